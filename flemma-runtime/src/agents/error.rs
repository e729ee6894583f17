//! What can go wrong with agent definitions: [`AgentError`] refuses one, [`AgentWarning`]
//! reports what was read without something.

use std::path::PathBuf;

use super::definition::AgentSource;
use super::definition::MAX_AGENT_NAME;

/// A definition that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The name is not 1 to 64 characters of `[A-Za-z0-9_-]`.
    #[error("invalid agent name {name:?}: use 1 to {MAX_AGENT_NAME} of A-Z, a-z, 0-9, _ and -")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// The description is blank.
    #[error("agent {name}: it needs a description (the model chooses an agent by it)")]
    MissingDescription {
        /// The agent.
        name: String,
    },
    /// A tool name that is neither ours nor Claude Code's.
    #[error("agent {agent}: {tool:?} is not a tool name")]
    InvalidToolName {
        /// The agent.
        agent: String,
        /// The name as written.
        tool: String,
        /// Why it is not one.
        #[source]
        source: flemma_ids::InvalidId,
    },
    /// `max_turns` of 0.
    #[error("agent {name}: its turn limit must be at least 1")]
    ZeroTurns {
        /// The agent.
        name: String,
    },
    /// The frontmatter is not closed, not YAML, or not a mapping.
    #[error("{}: the frontmatter cannot be read: {reason}", path.display())]
    Frontmatter {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A field of the wrong type.
    #[error("{}: `{field}` must be {expected}, not {found}", path.display())]
    Field {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it is.
        found: &'static str,
    },
    /// The file cannot be read (or is not a regular file, or is too large, or not UTF-8).
    #[error("{}: cannot read the agent definition", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What loading definitions left out, each with where.
#[derive(Debug)]
#[non_exhaustive]
pub enum AgentWarning {
    /// A file that is not a usable definition, skipped.
    Skipped {
        /// Why.
        error: AgentError,
    },
    /// A field of Claude Code's format flemma does not honour (`permissionMode`, `hooks`,
    /// `mcpServers`, …: each would let a file widen what a child may do); the definition is
    /// used without it.
    FieldIgnored {
        /// The agent.
        agent: String,
        /// The file.
        path: PathBuf,
        /// The field.
        field: String,
    },
    /// A definition of a name an earlier one has (the host's code, then `.flemma/agents`,
    /// then `.claude/agents`): the earlier one is used.
    Shadowed {
        /// The agent.
        agent: String,
        /// The file not used.
        path: PathBuf,
        /// Where the one used comes from.
        by: AgentSource,
    },
}

impl std::fmt::Display for AgentWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Skipped { error } => write!(f, "{error}; the file is skipped"),
            Self::FieldIgnored { agent, path, field } => write!(
                f,
                "{}: agent {agent}: `{field}` is not honoured (a definition only narrows what a \
                 child may do)",
                path.display()
            ),
            Self::Shadowed { agent, path, by } => write!(
                f,
                "{}: agent {agent} is already defined by {by}; this file is not used",
                path.display()
            ),
        }
    }
}
