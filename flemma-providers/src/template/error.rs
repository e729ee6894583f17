//! What goes wrong in a template.

use std::path::PathBuf;

use super::limits::{MAX_FILE_BYTES, MAX_INCLUDE_DEPTH};

/// What went wrong in a template.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template does not compile or fails to evaluate.
    #[error("{message}")]
    Render {
        /// The line (of the transcript, or of the included file) when known.
        line: Option<u32>,
        /// What the engine said.
        message: String,
        /// The engine's error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A file could not be read.
    #[error("cannot read '{}'", path.display())]
    Read {
        /// The resolved path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file included as text is not UTF-8.
    #[error("'{}' is not UTF-8 text (include it with binary=true)", path.display())]
    NotText {
        /// The resolved path.
        path: PathBuf,
    },
    /// A file includes itself, directly or not.
    #[error("circular include: {}", chain.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" -> "))]
    Cycle {
        /// The include chain, ending with the file included again.
        chain: Vec<PathBuf>,
    },
    /// The builder's [`FileAccess`](super::FileAccess) does not allow reading the file.
    #[error("reading '{}{DENIED_TAIL}", path.display())]
    Denied {
        /// The resolved path.
        path: PathBuf,
    },
    /// A file is larger than [`MAX_FILE_BYTES`].
    #[error("'{}' is {size} bytes, more than the {MAX_FILE_BYTES} bytes a file may have", path.display())]
    TooLarge {
        /// The resolved path.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Includes nest deeper than 32 files.
    #[error("includes nest deeper than {MAX_INCLUDE_DEPTH} files at '{}'", path.display())]
    TooDeep {
        /// The file that would have been one too many.
        path: PathBuf,
    },
}

/// What the message of [`TemplateError::Denied`] says after the path.
const DENIED_TAIL: &str = "' is not allowed here: it is outside the conversation's project and \
     store (templates.file_access = \"any\" or templates.allowed_roots widens it)";

impl TemplateError {
    /// Appends the message (what `Display` writes) to `out`; the two a file reference meets
    /// most, a refused and an unreadable file, without the formatting machinery.
    pub(crate) fn write_message(&self, out: &mut String) {
        let path = match self {
            TemplateError::Denied { path } | TemplateError::Read { path, .. } => path.to_str(),
            _ => None,
        };
        match (self, path) {
            (TemplateError::Denied { .. }, Some(path)) => {
                out.push_str("reading '");
                out.push_str(path);
                out.push_str(DENIED_TAIL);
            }
            (TemplateError::Read { .. }, Some(path)) => {
                out.push_str("cannot read '");
                out.push_str(path);
                out.push('\'');
            }
            _ => {
                use std::fmt::Write as _;
                let _ = write!(out, "{self}");
            }
        }
    }

    /// A [`TemplateError::Render`] without a source.
    pub fn render(line: Option<u32>, message: impl Into<String>) -> Self {
        TemplateError::Render {
            line,
            message: message.into(),
            source: None,
        }
    }

    /// The line the error points at, when known.
    pub fn line(&self) -> Option<u32> {
        match self {
            TemplateError::Render { line, .. } => *line,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_messages_are_the_displayed_ones() {
        let path = PathBuf::from("./src/a b.rs");
        for error in [
            TemplateError::Denied { path: path.clone() },
            TemplateError::Read {
                path: path.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            },
            TemplateError::NotText { path: path.clone() },
            TemplateError::render(Some(3), "boom"),
        ] {
            let mut written = String::from("> ");
            error.write_message(&mut written);
            assert_eq!(written, format!("> {error}"));
        }
        assert!(
            TemplateError::Denied { path }
                .to_string()
                .ends_with("is not allowed here: it is outside the conversation's project and store (templates.file_access = \"any\" or templates.allowed_roots widens it)")
        );
    }
}
