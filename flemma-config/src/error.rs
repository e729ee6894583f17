//! The crate's error type.

use std::path::PathBuf;
use std::sync::Arc;

/// What can go wrong when options are set, loaded or finalized.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A path that names no option.
    #[error("unknown option `{path}`{}", suggestion.as_ref().map(|s| format!(" -- did you mean `{s}`?")).unwrap_or_default())]
    UnknownOption {
        /// The path as written.
        path: String,
        /// The closest known path, when one is close.
        suggestion: Option<String>,
    },
    /// A value of the wrong type for its option.
    #[error("option `{path}` expects {expected}, got {found}")]
    Type {
        /// The option.
        path: String,
        /// What it takes.
        expected: &'static str,
        /// What it got, as JSON.
        found: String,
    },
    /// A list item whose prefixes do not compose (`+^x`, `!$std`).
    #[error("invalid list item {item:?} for `{path}`: {reason}")]
    InvalidListItem {
        /// The option.
        path: String,
        /// The item.
        item: String,
        /// Why.
        reason: &'static str,
    },
    /// A list operation on an option that is not a list.
    #[error("option `{path}` is not a list")]
    NotAList {
        /// The option.
        path: String,
    },
    /// A preset name or definition that cannot be used.
    #[error("invalid preset {name:?}: {reason}")]
    InvalidPreset {
        /// The preset name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Values that do not decode into their typed form: the combined options, a preset's
    /// definition.
    #[error("invalid {what}")]
    Decode {
        /// What was decoded (`options`, `preset "$ci"`).
        what: String,
        /// The decoder's error.
        #[source]
        source: serde_json::Error,
    },
    /// An option flemma knows from the Flemma plugin but cannot honour here, with what to do instead
    /// (`tools.modules`: Lua modules cannot be loaded; tools are registered in Rust).
    #[error("option `{path}` is not supported here: {instead}")]
    Unsupported {
        /// The option.
        path: String,
        /// The Rust-side equivalent.
        instead: &'static str,
    },
    /// A configuration file that cannot be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A configuration file that is not valid TOML; the source says what is wrong.
    #[error("{}:{}:{}", path.display(), source.line(), source.column())]
    Toml {
        /// The file.
        path: PathBuf,
        /// Where and what the parser found.
        #[source]
        source: TomlError,
    },
    /// An option set in a file, with where it was set; the source is the problem.
    #[error("{}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// The problem.
        #[source]
        source: Box<ConfigError>,
    },
    /// The options name tools, globs or presets that do not exist once every tool source
    /// has loaded: the [errors](flemma_ids::Severity::Error) of
    /// [`Config::diagnostics`](crate::Config::diagnostics), each with where it was written.
    /// A conversation with such a mistake is not run, rather than run with a tool set it did
    /// not ask for.
    #[error("{}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Finalize {
        /// The errors, in the order the options were written (never empty).
        errors: Vec<crate::OptionDiagnostic>,
    },
}

/// A TOML syntax error: its position and the parser's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", inner.message())]
pub struct TomlError {
    line: usize,
    column: usize,
    inner: Box<toml::de::Error>,
}

impl TomlError {
    /// The parser's error at 1-based `line` and `column`.
    pub(crate) fn new(line: usize, column: usize, inner: toml::de::Error) -> Self {
        Self {
            line,
            column,
            inner: Box::new(inner),
        }
    }

    /// 1-based line of the problem.
    pub fn line(&self) -> usize {
        self.line
    }

    /// 1-based column of the problem, in characters.
    pub fn column(&self) -> usize {
        self.column
    }

    /// The parser's message, without the position.
    pub fn message(&self) -> &str {
        self.inner.message()
    }
}

/// The message of a frontmatter error whose source is the [`ConfigError`] of a write.
pub(crate) const INVALID_OPTION: &str = "invalid option";

/// A problem found in a conversation's frontmatter, with its line in the transcript.
///
/// `message` says what went wrong; the cause, when there is one (the JSON parser's error, the
/// option error of a write), is the [`source`](std::error::Error::source), not repeated in the
/// message.
#[derive(Debug, Clone)]
pub struct FrontmatterError {
    /// 1-based line in the transcript.
    pub line: u32,
    /// What went wrong, without the cause.
    pub message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl std::fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for FrontmatterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The cause itself, not the `Arc` holding it, so that it can be downcast.
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl FrontmatterError {
    /// An error at `line` saying `message`, without a cause.
    pub fn new(line: u32, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
            source: None,
        }
    }

    /// An error at `line` saying `message`, caused by `source`.
    pub fn with_source(
        line: u32,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            line,
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }
}

/// Errors are equal when their lines, messages and the texts of their causes are.
impl PartialEq for FrontmatterError {
    fn eq(&self, other: &Self) -> bool {
        self.line == other.line
            && self.message == other.message
            && self.source.as_ref().map(ToString::to_string)
                == other.source.as_ref().map(ToString::to_string)
    }
}

impl Eq for FrontmatterError {}

/// Why an `auto_approve` function could not decide about a call: it raised an error, ran out
/// of its instruction budget or memory, or returned something other than `true`, `false`,
/// `"deny"` or `nil`. The config resolver asks for approval then (fail closed).
///
/// ```
/// use flemma_config::PolicyError;
///
/// let error = PolicyError::new(Some(4), "attempt to index a nil value (field 'command')");
/// assert_eq!(error.to_string(), "line 4: attempt to index a nil value (field 'command')");
/// assert_eq!(error.line(), Some(4));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    line: Option<u32>,
    message: String,
}

impl PolicyError {
    /// An error saying `message`, at a 1-based transcript line when known.
    pub fn new(line: Option<u32>, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }

    /// The transcript line the error was raised at, when known.
    pub fn line(&self) -> Option<u32> {
        self.line
    }

    /// What went wrong, without the line.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for PolicyError {}
