//! `read`: a file's lines, with offset and limit, head-truncated, or a file
//! reference for binary files.

use std::io::Read as _;
use std::path::PathBuf;

use flemma_schema::SchemaError;
use flemma_schema::builtin::inputs::ReadInput;
use serde_json::Value;

use super::files::{NotAFile, blocking, number_text, open_regular, whole};
use crate::messages as msg;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;
use flemma_store::format_size;

use flemma_core::truncate::{Limits, MAX_BYTES, TruncatedBy, truncate_head};

/// How much of a file's beginning decides whether it is binary.
const SNIFF_BYTES: usize = 8192;

/// The built-in `read` tool.
///
/// Relative paths are resolved against the conversation's directory. A text file comes back
/// as its lines from `offset` (1-based), at most `limit` of them, cut to 2000 lines or 50 KB
/// with a notice saying where to continue. A binary file (an image, a PDF, anything with a NUL
/// byte in its first 8 KB) comes back as a file reference, `@./photo.png;type=image/png`,
/// which the tool's `emits_template` capability turns into a file part of the request.
#[derive(Debug)]
pub struct ReadTool {
    definition: ToolDefinition,
}

impl ReadTool {
    /// The tool, with the definition of flemma-schema's built-in table.
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`SchemaError`] otherwise.
    pub fn new() -> Result<Self, SchemaError> {
        Ok(Self {
            definition: ToolDefinition::from_builtin(&flemma_schema::builtin::read())?,
        })
    }
}

#[async_trait::async_trait]
impl Tool for ReadTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let input = match ReadInput::from_call(&input) {
            Ok(input) => input,
            Err(missing) => return ToolOutput::error(msg::missing(missing)),
        };
        let request = Request {
            resolved: ctx.resolve_path(&input.path),
            path: input.path,
            offset: whole(input.offset, 1),
            limit: whole(input.limit, 1),
        };
        blocking(ctx, move || request.run()).await
    }

    /// `<path>  +<offset or 0>[,<limit>]` (the range only when offset or limit is given).
    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let path = input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let offset = input.get("offset").and_then(number_text);
        let limit = input.get("limit").and_then(number_text);
        let range = if offset.is_some() || limit.is_some() {
            let mut range = format!("+{}", offset.as_deref().unwrap_or("0"));
            if let Some(limit) = limit {
                range.push(',');
                range.push_str(&limit);
            }
            range
        } else {
            String::new()
        };
        Some(Preview::parts([path, range.as_str()]).with_label(Preview::label_of(input)))
    }
}

/// One call's input, moved to the blocking pool.
struct Request {
    /// The path as the model wrote it (what the messages show).
    path: String,
    resolved: PathBuf,
    offset: Option<usize>,
    limit: Option<usize>,
}

impl Request {
    fn run(self) -> ToolOutput {
        let not_found = || ToolOutput::error(msg::file_not_found(&self.path));
        // Only a regular file is read: a named pipe would block the read until a writer
        // comes, a device such as `/dev/zero` never ends.
        let mut file = match open_regular(&self.resolved) {
            Ok(file) => file,
            Err(NotAFile::Missing) => return not_found(),
            Err(NotAFile::Special(kind)) => {
                return ToolOutput::error(msg::read_failed(&msg::not_regular(&self.path, kind)));
            }
        };
        let mut bytes = Vec::new();
        if (&mut file)
            .take(SNIFF_BYTES as u64)
            .read_to_end(&mut bytes)
            .is_err()
        {
            return not_found();
        }
        if let Some(mime) = binary_mime(&bytes) {
            return ToolOutput::text(file_reference(&self.path, mime));
        }
        if file.read_to_end(&mut bytes).is_err() {
            return not_found();
        }
        self.text(&String::from_utf8_lossy(&bytes))
    }

    fn text(&self, content: &str) -> ToolOutput {
        let lines = split_lines(content);
        let total = lines.len();
        let start = self.offset.unwrap_or(1);
        if start > total {
            return ToolOutput::error(msg::offset_beyond_eof(start, total));
        }
        let end = self
            .limit
            .map_or(total, |limit| start.saturating_add(limit - 1).min(total));
        let selected = lines[start - 1..end].join("\n");
        let cut = truncate_head(&selected, Limits::default());
        let limit_text = format_size(MAX_BYTES);
        if cut.first_line_exceeds_limit {
            return ToolOutput::text(msg::line_exceeds_limit(
                start,
                &format_size(lines[start - 1].len()),
                &limit_text,
                &self.path,
                MAX_BYTES,
            ));
        }
        let shown_end = start + cut.output_lines - 1;
        let notice = match cut.truncated_by {
            Some(TruncatedBy::Lines) => Some(msg::read_truncated_lines(
                start,
                shown_end,
                total,
                shown_end + 1,
            )),
            Some(TruncatedBy::Bytes) => Some(msg::read_truncated_bytes(
                start,
                shown_end,
                total,
                &limit_text,
                shown_end + 1,
            )),
            None if self.limit.is_some() && end < total => {
                Some(msg::read_more_lines(total - end, end + 1))
            }
            None => None,
        };
        match notice {
            Some(notice) => ToolOutput::text(format!("{}\n\n{notice}", cut.content)),
            None => ToolOutput::text(cut.content),
        }
    }
}

/// A file's lines as the reference implementation reads them (Vim's `readfile()`): split on
/// `\n`, a final newline ending the last line rather than starting an empty one (so an empty
/// file has no lines), a carriage return before a newline dropped, a UTF-8 byte order mark
/// dropped.
fn split_lines(content: &str) -> Vec<&str> {
    let content = content.strip_prefix('\u{feff}').unwrap_or(content);
    if content.is_empty() {
        return Vec::new();
    }
    let (body, ends_with_newline) = match content.strip_suffix('\n') {
        Some(body) => (body, true),
        None => (content, false),
    };
    let mut lines: Vec<&str> = body.split('\n').collect();
    let last = lines.len() - 1;
    for (i, line) in lines.iter_mut().enumerate() {
        if i < last || ends_with_newline {
            *line = line.strip_suffix('\r').unwrap_or(line);
        }
    }
    lines
}

/// The MIME type of a binary file from its first bytes: the images providers take and PDF by
/// signature, anything else with a NUL byte as `application/octet-stream`; `None` for text.
fn binary_mime(head: &[u8]) -> Option<&'static str> {
    const SIGNATURES: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xFF\xD8\xFF", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"%PDF-", "application/pdf"),
    ];
    if let Some((_, mime)) = SIGNATURES.iter().find(|(sig, _)| head.starts_with(sig)) {
        return Some(mime);
    }
    if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    memchr::memchr(0, head).map(|_| "application/octet-stream")
}

/// `@<ref>;type=<mime>`: an absolute path as `@//abs/path`, a path starting with
/// `~/`, `./` or `../` as written, any other with `./` before it; whitespace, `#`, `%`, `?`
/// and `;` percent-encoded so the reference stays one token.
fn file_reference(path: &str, mime: &str) -> String {
    let reference = if path.starts_with('/') {
        format!("/{path}")
    } else if ["~/", "./", "../"].iter().any(|p| path.starts_with(p)) {
        path.to_owned()
    } else {
        format!("./{path}")
    };
    let mut out = String::with_capacity(reference.len() + mime.len() + 8);
    out.push('@');
    for c in reference.chars() {
        if c.is_ascii_whitespace() || c == '\u{b}' || matches!(c, '#' | '%' | '?' | ';') {
            // ASCII only, so one byte.
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            let byte = c as u8;
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xF)]));
        } else {
            out.push(c);
        }
    }
    out.push_str(";type=");
    out.push_str(mime);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_follow_readfile() {
        assert_eq!(split_lines(""), Vec::<&str>::new());
        assert_eq!(split_lines("\n"), [""]);
        assert_eq!(split_lines("a\nb"), ["a", "b"]);
        assert_eq!(split_lines("a\nb\n"), ["a", "b"]);
        assert_eq!(split_lines("a\n\n"), ["a", ""]);
        assert_eq!(split_lines("a\r\nb\r\n"), ["a", "b"]);
        assert_eq!(split_lines("a\r\nb\r"), ["a", "b\r"]);
        assert_eq!(split_lines("\u{feff}a"), ["a"]);
    }

    #[test]
    fn references_keep_relative_prefixes_and_encode_the_unsafe_subset() {
        let r = |p| file_reference(p, "image/png");
        assert_eq!(r("x.png"), "@./x.png;type=image/png");
        assert_eq!(r("./x.png"), "@./x.png;type=image/png");
        assert_eq!(r("../x.png"), "@../x.png;type=image/png");
        assert_eq!(r("~/x.png"), "@~/x.png;type=image/png");
        assert_eq!(r("/abs/x.png"), "@//abs/x.png;type=image/png");
        assert_eq!(
            r("my pics/a#1%?;\t.png"),
            "@./my%20pics/a%231%25%3F%3B%09.png;type=image/png"
        );
        assert_eq!(r("été.png"), "@./été.png;type=image/png");
    }

    #[test]
    fn sniffing() {
        assert_eq!(binary_mime(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(binary_mime(b"\xFF\xD8\xFF\xE0"), Some("image/jpeg"));
        assert_eq!(binary_mime(b"GIF89a.."), Some("image/gif"));
        assert_eq!(binary_mime(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(binary_mime(b"%PDF-1.7\n"), Some("application/pdf"));
        assert_eq!(binary_mime(b"ELF\0\x01"), Some("application/octet-stream"));
        assert_eq!(binary_mime("plain text, é\n".as_bytes()), None);
        assert_eq!(binary_mime(b""), None);
        // Invalid UTF-8 without NUL bytes (Latin-1 text) is still text.
        assert_eq!(binary_mime(b"caf\xe9\n"), None);
    }
}
