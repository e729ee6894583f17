//! Subagents: the definitions a parent conversation may delegate to.
//!
//! A definition ([`AgentDefinition`]) names an agent, says what it is for, gives the child's
//! system prompt, and narrows what the child may use: its tools within the parent's, its turns
//! within the parent's. [`Agents`] holds a host's definitions: those registered in code first,
//! then the project's files, `.flemma/agents/NAME.md` and, in Claude Code's format unchanged,
//! `.claude/agents/NAME.md`.
//!
//! Who may change what: the host's code registers definitions and decides whether a project's
//! files are read. A project's definition files are text the user may not have written (a
//! cloned repository): they can name an agent, describe it and write its system prompt, and
//! only narrow its tools and turns. A field of Claude Code's format that would widen what a
//! child may do (`permissionMode`, `hooks`, `mcpServers`) is ignored with a warning, and a
//! definition is read only from a regular file inside the project (a symbolic link, or an
//! agents directory that resolves outside the project, is skipped), so a file cannot make a
//! secret elsewhere on the machine the child's prompt.

mod definition;
mod error;
mod tool;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use definition::{AGENT_TOOL, AgentDefinition, AgentSource, MAX_AGENT_NAME, Narrowed};
pub use error::{AgentError, AgentWarning};
pub use tool::{AgentTool, DEFAULT_MAX_DEPTH, Subagents};

/// The resolver of a child's approval chain through which the parent conversation's decision
/// of the same call bounds the child's (first in the chain: `approval explain` of a child's
/// call shows it).
pub const PARENT_RESOLVER: &str = "urn:flemma:approval:parent";

/// The largest definition file read, in bytes.
pub const MAX_DEFINITION_BYTES: u64 = flemma_config::MAX_PROJECT_FILE_BYTES;

/// Where a project's definitions are, in the order they are read (an earlier name wins).
pub const AGENT_DIRS: [&str; 2] = [".flemma/agents", ".claude/agents"];

/// A host's agent definitions, by name.
///
/// ```
/// use flemma_runtime::agents::{AgentDefinition, Agents};
///
/// let mut agents = Agents::new();
/// agents.register(AgentDefinition::new("explorer", "Finds where things are.", "Search, then report.")?);
/// assert_eq!(agents.get("explorer").map(|a| a.description()), Some("Finds where things are."));
/// assert_eq!(agents.did_you_mean("explorr"), Some("explorer"));
/// # Ok::<(), flemma_runtime::agents::AgentError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Agents {
    definitions: BTreeMap<String, AgentDefinition>,
}

impl Agents {
    /// No definitions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a definition from the host's code, replacing one of the same name (returned).
    pub fn register(&mut self, definition: AgentDefinition) -> Option<AgentDefinition> {
        self.definitions
            .insert(definition.name().to_owned(), definition)
    }

    /// Reads the definitions of the project at `root`: `.flemma/agents/*.md`, then
    /// `.claude/agents/*.md`, each directory in file-name order. A name already defined (by the
    /// host's code or an earlier file) keeps its definition ([`AgentWarning::Shadowed`]); a
    /// file that is not a definition is skipped ([`AgentWarning::Skipped`]). Missing
    /// directories are no error.
    pub fn load_project(&mut self, root: &Path) -> Vec<AgentWarning> {
        let mut warnings = Vec::new();
        let Ok(project) = root.canonicalize() else {
            return warnings;
        };
        for dir in AGENT_DIRS {
            let dir = root.join(dir);
            for path in definition_files(&dir, &project, &mut warnings) {
                match read_definition(&path) {
                    Ok((definition, mut ignored)) => {
                        warnings.append(&mut ignored);
                        self.add_file(definition, path, &mut warnings);
                    }
                    Err(error) => warnings.push(AgentWarning::Skipped { error }),
                }
            }
        }
        warnings
    }

    fn add_file(
        &mut self,
        definition: AgentDefinition,
        path: PathBuf,
        warnings: &mut Vec<AgentWarning>,
    ) {
        if let Some(earlier) = self.definitions.get(definition.name()) {
            warnings.push(AgentWarning::Shadowed {
                agent: definition.name().to_owned(),
                path,
                by: earlier.source().clone(),
            });
        } else {
            self.definitions
                .insert(definition.name().to_owned(), definition);
        }
    }

    /// The definition named `name`.
    pub fn get(&self, name: &str) -> Option<&AgentDefinition> {
        self.definitions.get(name)
    }

    /// Every definition, by name.
    pub fn iter(&self) -> impl Iterator<Item = &AgentDefinition> {
        self.definitions.values()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.definitions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.definitions.is_empty()
    }

    /// The defined name closest to `name`, for an error's "did you mean".
    pub fn did_you_mean(&self, name: &str) -> Option<&str> {
        flemma_config::did_you_mean(name, self.definitions.keys().map(String::as_str))
    }
}

/// The `*.md` files of `dir`, sorted, when `dir` is a directory inside `project`.
fn definition_files(dir: &Path, project: &Path, warnings: &mut Vec<AgentWarning>) -> Vec<PathBuf> {
    let Ok(resolved) = dir.canonicalize() else {
        return Vec::new();
    };
    if !resolved.starts_with(project) {
        warnings.push(AgentWarning::Skipped {
            error: AgentError::Read {
                path: dir.to_owned(),
                source: std::io::Error::other(format!(
                    "the directory resolves outside the project, to {}",
                    resolved.display()
                )),
            },
        });
        return Vec::new();
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) => {
            warnings.push(AgentWarning::Skipped {
                error: AgentError::Read {
                    path: dir.to_owned(),
                    source,
                },
            });
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

/// Reads one definition file: a regular file of the project (not a link, not a FIFO), at most
/// [`MAX_DEFINITION_BYTES`], UTF-8 ([`flemma_config::read_project_file`]).
fn read_definition(path: &Path) -> Result<(AgentDefinition, Vec<AgentWarning>), AgentError> {
    let text = flemma_config::read_project_file(path).map_err(|source| AgentError::Read {
        path: path.to_owned(),
        source,
    })?;
    AgentDefinition::parse(&text, path)
}
