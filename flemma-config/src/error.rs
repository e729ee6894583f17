//! The crate's error type.

use std::path::PathBuf;

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
    /// A configuration file that cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A configuration file that is not valid TOML.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// The parser's message.
        message: String,
        /// The parser's error.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// An option set in a file, with where it was set.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// The problem.
        #[source]
        source: Box<ConfigError>,
    },
}

/// A problem found in a conversation's frontmatter, with its line in the transcript.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FrontmatterError {
    /// 1-based line in the transcript.
    pub line: u32,
    /// What went wrong.
    pub message: String,
}

/// A warning or error found when the options are finalized against the registered tools.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FinalizeIssue {
    /// A glob in `tools` that matches no registered tool.
    GlobMatchedNothing {
        /// The pattern.
        pattern: String,
    },
    /// A name in `tools` that is not a registered tool.
    UnknownTool {
        /// The name.
        name: String,
        /// The closest registered name.
        suggestion: Option<String>,
    },
    /// A `$preset` reference to a preset that does not exist.
    UnknownPreset {
        /// The option whose list held the reference.
        path: String,
        /// The reference.
        name: String,
        /// The closest preset name.
        suggestion: Option<String>,
    },
    /// A preset naming a tool that is not registered (spec §5.6; a warning).
    PresetUnknownTool {
        /// The preset (with its `$`).
        preset: String,
        /// The tool name, operators stripped.
        tool: String,
        /// The preset field (`auto_approve` or `tools`).
        field: &'static str,
    },
    /// Options set for a tool that is not registered (`tools.<name>.<key>`).
    UnknownToolOptions {
        /// The tool name of the table.
        tool: String,
        /// The closest registered name.
        suggestion: Option<String>,
    },
}

impl std::fmt::Display for FinalizeIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hint = |s: &Option<String>| {
            s.as_ref()
                .map(|s| format!(" -- did you mean '{s}'?"))
                .unwrap_or_default()
        };
        match self {
            FinalizeIssue::GlobMatchedNothing { pattern } => {
                write!(f, "Glob pattern '{pattern}' matched no tools")
            }
            FinalizeIssue::UnknownTool { name, suggestion } => {
                write!(f, "Unknown tool '{name}'{}", hint(suggestion))
            }
            FinalizeIssue::UnknownPreset {
                path,
                name,
                suggestion,
            } => {
                write!(f, "Unknown preset '{name}' in {path}{}", hint(suggestion))
            }
            FinalizeIssue::PresetUnknownTool {
                preset,
                tool,
                field,
            } => {
                write!(
                    f,
                    "Preset '{preset}' references unknown tool '{tool}' in {field}"
                )
            }
            FinalizeIssue::UnknownToolOptions { tool, suggestion } => {
                write!(
                    f,
                    "Options for unknown tool '{tool}' in tools.{tool}{}",
                    hint(suggestion)
                )
            }
        }
    }
}
