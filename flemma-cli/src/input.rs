//! Reading a transcript from a file or standard input, and writing it back.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

/// Why a transcript could not be read or written. The message names the file; the I/O error
/// is the source, printed after it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error("cannot read {name}")]
    Read {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {name}")]
    Write {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{name}: invalid UTF-8 at byte offset {offset}")]
    Utf8 { name: String, offset: usize },
}

/// A transcript's text and where it came from.
#[derive(Debug)]
pub(crate) struct Input {
    /// The path as given, or `<stdin>`.
    pub(crate) name: String,
    path: Option<PathBuf>,
    pub(crate) text: String,
}

impl Input {
    /// Reads `file`; `-` reads standard input.
    pub(crate) fn read(file: &Path) -> Result<Self, InputError> {
        let (name, path, bytes) = if file.as_os_str() == "-" {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|source| InputError::Read {
                    name: "<stdin>".into(),
                    source,
                })?;
            ("<stdin>".to_owned(), None, bytes)
        } else {
            let name = file.display().to_string();
            let bytes = std::fs::read(file).map_err(|source| InputError::Read {
                name: name.clone(),
                source,
            })?;
            (name, Some(file.to_owned()), bytes)
        };
        let text = String::from_utf8(bytes).map_err(|err| InputError::Utf8 {
            name: name.clone(),
            offset: err.utf8_error().valid_up_to(),
        })?;
        Ok(Self { name, path, text })
    }

    /// The file's path; `None` for standard input.
    pub(crate) fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    pub(crate) fn is_stdin(&self) -> bool {
        self.path.is_none()
    }

    /// Converts LF text to the input's own line ending (CRLF when its first line ends in CRLF).
    pub(crate) fn with_line_ending(&self, lf_text: &str) -> String {
        let crlf = self
            .text
            .find('\n')
            .is_some_and(|i| i > 0 && self.text.as_bytes()[i - 1] == b'\r');
        if crlf {
            lf_text.replace('\n', "\r\n")
        } else {
            lf_text.to_owned()
        }
    }

    /// Replaces the file atomically: a temporary file in the same directory, then a rename.
    pub(crate) fn write_back(&self, text: &str) -> Result<(), InputError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let io = |source| InputError::Write {
            name: self.name.clone(),
            source,
        };
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{file_name}.flemma-fmt.{}", std::process::id()));
        let result = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            if let Ok(meta) = std::fs::metadata(path) {
                std::fs::set_permissions(&tmp, meta.permissions())?;
            }
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io)
    }
}
