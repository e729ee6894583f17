//! Reading a transcript from a file or standard input, and writing it back.

use std::io::Read as _;
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

    /// Converts LF text to the input's own line ending ([`flemma::ast::line_ending`]).
    pub(crate) fn with_line_ending(&self, lf_text: &str) -> String {
        match flemma::ast::line_ending(&self.text) {
            "\n" => lf_text.to_owned(),
            eol => lf_text.replace('\n', eol),
        }
    }

    /// Replaces the file atomically with the store's writer ([`flemma::store::write_atomic`]:
    /// a temporary file in the same directory, fsync, rename; the file's permissions are kept;
    /// no backup).
    pub(crate) fn write_back(&self, text: &str) -> Result<(), flemma::store::StoreError> {
        match &self.path {
            Some(path) => {
                flemma::store::write_atomic(path, text.as_bytes(), &flemma::store::NoBackup)
                    .map(drop)
            }
            None => Ok(()),
        }
    }
}
