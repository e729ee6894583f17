//! File parts: what an `@./file` reference or a binary `include()` sends.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;

/// A file attached to a message or a tool result.
///
/// `filename` is the path as the reference wrote it (`./img/cat.png`), which is what the
/// adapters show the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FilePart {
    /// An image (`image/*`), base64-encoded.
    Image {
        /// The MIME type, `image/png` for example.
        mime_type: String,
        /// The bytes, standard base64 with padding.
        data: String,
        /// The path as referenced.
        filename: String,
    },
    /// A PDF document (`application/pdf`), base64-encoded.
    Pdf {
        /// The MIME type, `application/pdf`.
        mime_type: String,
        /// The bytes, standard base64 with padding.
        data: String,
        /// The path as referenced.
        filename: String,
    },
    /// A text file (`text/*`, or any UTF-8 file without NUL bytes), sent as text.
    TextFile {
        /// The MIME type, `text/plain` for example.
        mime_type: String,
        /// The file's text.
        text: String,
        /// The path as referenced.
        filename: String,
    },
    /// A file no provider can take (an archive, an executable, …); only its name is sent.
    Unsupported {
        /// The MIME type detected or given.
        mime_type: String,
        /// The path as referenced.
        filename: String,
    },
}

impl FilePart {
    /// Builds the part for `bytes`, of `mime_type` when given, else detected.
    ///
    /// ```
    /// use flemma_providers::FilePart;
    ///
    /// let part = FilePart::from_bytes("./a.pdf", b"%PDF-1.7\n...", None);
    /// assert_eq!(part.mime_type(), "application/pdf");
    /// assert_eq!(part.data_url().as_deref(), Some("data:application/pdf;base64,JVBERi0xLjcKLi4u"));
    /// ```
    pub fn from_bytes(filename: &str, bytes: &[u8], mime_type: Option<&str>) -> Self {
        let mime_type = mime_type.map_or_else(
            || detect_mime(Path::new(filename), bytes).to_owned(),
            |m| m.trim().to_ascii_lowercase(),
        );
        let filename = filename.to_owned();
        if mime_type.starts_with("image/") {
            let data = STANDARD.encode(bytes);
            FilePart::Image {
                mime_type,
                data,
                filename,
            }
        } else if mime_type == "application/pdf" {
            let data = STANDARD.encode(bytes);
            FilePart::Pdf {
                mime_type,
                data,
                filename,
            }
        } else if is_textual(&mime_type)
            && let Ok(text) = std::str::from_utf8(bytes)
        {
            FilePart::TextFile {
                mime_type,
                text: text.to_owned(),
                filename,
            }
        } else {
            FilePart::Unsupported {
                mime_type,
                filename,
            }
        }
    }

    /// The MIME type.
    pub fn mime_type(&self) -> &str {
        match self {
            FilePart::Image { mime_type, .. }
            | FilePart::Pdf { mime_type, .. }
            | FilePart::TextFile { mime_type, .. }
            | FilePart::Unsupported { mime_type, .. } => mime_type,
        }
    }

    /// The path as referenced.
    pub fn filename(&self) -> &str {
        match self {
            FilePart::Image { filename, .. }
            | FilePart::Pdf { filename, .. }
            | FilePart::TextFile { filename, .. }
            | FilePart::Unsupported { filename, .. } => filename,
        }
    }

    /// The last component of the path (a document's title).
    pub fn basename(&self) -> &str {
        let name = self.filename().trim_end_matches('/');
        name.rsplit('/').next().unwrap_or(name)
    }

    /// The base64 data of an image or a PDF.
    pub fn data(&self) -> Option<&str> {
        match self {
            FilePart::Image { data, .. } | FilePart::Pdf { data, .. } => Some(data),
            FilePart::TextFile { .. } | FilePart::Unsupported { .. } => None,
        }
    }

    /// `data:<mime>;base64,<data>` for an image or a PDF.
    pub fn data_url(&self) -> Option<String> {
        self.data()
            .map(|data| format!("data:{};base64,{data}", self.mime_type()))
    }

    /// What a text-only provider is sent instead of the file: `[binary file: <name> (<mime>)]`, or
    /// the text of a text file.
    pub fn as_text_fallback(&self) -> String {
        match self {
            FilePart::TextFile { text, .. } => text.clone(),
            _ => format!("[binary file: {} ({})]", self.filename(), self.mime_type()),
        }
    }
}

/// Whether a MIME type is sent as text.
fn is_textual(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/toml"
                | "application/x-yaml"
                | "application/yaml"
                | "application/x-sh"
                | "image/svg+xml"
        )
}

/// The MIME type of a file from its first bytes, then its extension: the image formats the
/// providers accept and PDF by signature, text formats by extension, any other UTF-8 content
/// without NUL bytes as `text/plain`, and `application/octet-stream` otherwise.
///
/// ```
/// use std::path::Path;
/// use flemma_providers::detect_mime;
///
/// assert_eq!(detect_mime(Path::new("x"), b"\x89PNG\r\n\x1a\n...."), "image/png");
/// assert_eq!(detect_mime(Path::new("notes.md"), b"# Notes"), "text/markdown");
/// assert_eq!(detect_mime(Path::new("blob"), &[0, 159, 146, 150]), "application/octet-stream");
/// ```
pub fn detect_mime(path: &Path, bytes: &[u8]) -> &'static str {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xFF\xD8\xFF", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"%PDF-", "application/pdf"),
    ];
    if let Some((_, mime)) = SIGNATURES.iter().find(|(sig, _)| bytes.starts_with(sig)) {
        return mime;
    }
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return "image/webp";
    }
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let by_extension = match extension.as_deref() {
        Some("md" | "markdown") => Some("text/markdown"),
        Some("html" | "htm") => Some("text/html"),
        Some("css") => Some("text/css"),
        Some("csv") => Some("text/csv"),
        Some("json") => Some("application/json"),
        Some("xml") => Some("application/xml"),
        Some("svg") => Some("image/svg+xml"),
        Some("js" | "mjs") => Some("application/javascript"),
        Some("yaml" | "yml") => Some("application/yaml"),
        Some("toml") => Some("application/toml"),
        Some("sh") => Some("application/x-sh"),
        _ => None,
    };
    let text = !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok();
    match by_extension {
        Some(mime) if text => mime,
        _ if text => "text/plain",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_beat_extensions() {
        assert_eq!(
            detect_mime(Path::new("a.txt"), b"%PDF-1.4 binary"),
            "application/pdf"
        );
        assert_eq!(
            detect_mime(Path::new("a.jpg"), b"\xFF\xD8\xFF\xE0"),
            "image/jpeg"
        );
        assert_eq!(
            detect_mime(Path::new("a.webp"), b"RIFF\0\0\0\0WEBPVP8 "),
            "image/webp"
        );
        assert_eq!(
            detect_mime(Path::new("a.rs"), b"fn main() {}"),
            "text/plain"
        );
        assert_eq!(detect_mime(Path::new("a.json"), b"{}"), "application/json");
        // A binary file with a text extension is still binary.
        assert_eq!(
            detect_mime(Path::new("a.md"), b"\0\x01\x02"),
            "application/octet-stream"
        );
    }

    #[test]
    fn parts_follow_the_mime_type() {
        let png = FilePart::from_bytes("./a.png", b"\x89PNG\r\n\x1a\nrest", None);
        assert!(matches!(png, FilePart::Image { .. }));
        assert_eq!(png.basename(), "a.png");
        let text = FilePart::from_bytes("../notes/b.md", b"# B", None);
        assert_eq!(
            text,
            FilePart::TextFile {
                mime_type: "text/markdown".into(),
                text: "# B".into(),
                filename: "../notes/b.md".into()
            }
        );
        let forced = FilePart::from_bytes("./x.bin", b"abc", Some("Image/PNG"));
        assert_eq!(forced.mime_type(), "image/png");
        let blob = FilePart::from_bytes("./x.bin", &[0, 1, 2], None);
        assert_eq!(
            blob.as_text_fallback(),
            "[binary file: ./x.bin (application/octet-stream)]"
        );
        // A text MIME type given for bytes that are not UTF-8 cannot be sent as text.
        let bad = FilePart::from_bytes("./x.txt", &[0xff, 0xfe], Some("text/plain"));
        assert!(matches!(bad, FilePart::Unsupported { .. }));
    }
}
