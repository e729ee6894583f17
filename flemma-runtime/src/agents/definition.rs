//! [`AgentDefinition`]: one subagent, from the host's code or from a Markdown file in Claude
//! Code's format.

use std::path::{Path, PathBuf};

use flemma_ids::ToolName;
use yaml_rust2::{Yaml, YamlLoader};

use super::error::{AgentError, AgentWarning};

/// The longest agent name: it is part of a tool call's input and of file names.
pub const MAX_AGENT_NAME: usize = 64;

/// The largest frontmatter read, in bytes (a definition's metadata is a few lines).
const MAX_FRONTMATTER: usize = 64 * 1024;

/// The name of the tool that starts subagents; a definition that lists it (or Claude Code's
/// `Task`/`Agent`) may start children of its own, within the depth limit.
pub const AGENT_TOOL: &str = "agent";

/// Where a definition comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentSource {
    /// Registered by the host's code ([`Agents::register`](super::Agents::register)).
    Host,
    /// Read from this file (`.flemma/agents/NAME.md` or `.claude/agents/NAME.md`).
    File(PathBuf),
}

impl std::fmt::Display for AgentSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Host => f.write_str("the host's code"),
            Self::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One subagent: what the `agent` tool's description shows the model (its name and
/// description), the child's system prompt, and what the child may use.
///
/// A definition can only narrow: the child's tools are [`tools`](Self::tools) (all of the
/// parent's when `None`) less [`disallowed`](Self::disallowed), and never a tool the parent
/// conversation does not have ([`narrow`](Self::narrow)); its turns are at most the parent's.
///
/// ```
/// use flemma_runtime::agents::AgentDefinition;
///
/// let reviewer = AgentDefinition::new(
///     "reviewer",
///     "Reviews a change for bugs; read-only.",
///     "You review code. Report problems with file and line.",
/// )?
/// .with_tools(["read", "grep", "find"])?
/// .with_max_turns(20)?;
/// assert_eq!(reviewer.name(), "reviewer");
/// let child = reviewer.narrow(&["bash".parse()?, "read".parse()?, "grep".parse()?], false);
/// assert_eq!(child.tools, ["grep", "read"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDefinition {
    name: String,
    description: String,
    prompt: String,
    tools: Option<Vec<ToolName>>,
    disallowed: Vec<ToolName>,
    model: Option<String>,
    max_turns: Option<u64>,
    source: AgentSource,
}

/// What [`AgentDefinition::narrow`] leaves a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowed {
    /// The child's tools, sorted: the definition's, within the parent's.
    pub tools: Vec<ToolName>,
    /// Tools the definition names that the child does not get (the parent lacks them, or
    /// `agent` past the depth limit), sorted.
    pub dropped: Vec<ToolName>,
}

impl AgentDefinition {
    /// A definition from the host's code: all of the parent's tools, the parent's model.
    ///
    /// # Errors
    ///
    /// [`AgentError::InvalidName`] unless `name` is 1 to [`MAX_AGENT_NAME`] characters of
    /// `[A-Za-z0-9_-]`; [`AgentError::MissingDescription`] for a blank description (the model
    /// chooses an agent by it).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Result<Self, AgentError> {
        let name = checked_name(name.into())?;
        let description = description.into().trim().to_owned();
        if description.is_empty() {
            return Err(AgentError::MissingDescription { name });
        }
        Ok(Self {
            name,
            description,
            prompt: prompt.into(),
            tools: None,
            disallowed: Vec::new(),
            model: None,
            max_turns: None,
            source: AgentSource::Host,
        })
    }

    /// Only these tools (within the parent's), by our names (`bash`, `fs.read_file`) or
    /// Claude Code's (`Bash`, `Glob`, `mcp__fs__read_file`).
    ///
    /// # Errors
    ///
    /// [`AgentError::InvalidToolName`] for a name that is neither.
    pub fn with_tools<'a>(
        mut self,
        tools: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, AgentError> {
        self.tools = Some(native_names(&self.name, tools)?);
        Ok(self)
    }

    /// Never these tools, whatever else allows them.
    ///
    /// # Errors
    ///
    /// [`AgentError::InvalidToolName`] as for [`with_tools`](Self::with_tools).
    pub fn with_disallowed<'a>(
        mut self,
        tools: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, AgentError> {
        self.disallowed = native_names(&self.name, tools)?;
        Ok(self)
    }

    /// The child's model, on the parent's provider (default: the parent's model).
    #[must_use]
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The most consecutive tool turns of the child (at most the parent's, whatever this says).
    ///
    /// # Errors
    ///
    /// [`AgentError::ZeroTurns`] for 0.
    pub fn with_max_turns(mut self, max_turns: u64) -> Result<Self, AgentError> {
        if max_turns == 0 {
            return Err(AgentError::ZeroTurns {
                name: self.name.clone(),
            });
        }
        self.max_turns = Some(max_turns);
        Ok(self)
    }

    /// Reads a definition in Claude Code's subagent format: a YAML frontmatter between `---`
    /// lines (`name`, `description`, `tools`, `disallowedTools`, `model`, `maxTurns`), then the
    /// system prompt. `path` names the file in errors, and its stem is the name when the
    /// frontmatter gives none. `tools` is a comma-separated list or a YAML list; absent, the
    /// child has the parent's tools. `model: inherit` and Claude Code's aliases (`sonnet`,
    /// `opus`, `haiku`) keep the parent's model. Fields that would widen what a child may do
    /// in Claude Code (`permissionMode`, `hooks`, `mcpServers`, …) are not honoured: each is a
    /// warning, and the definition is read without it.
    ///
    /// ```
    /// use flemma_runtime::agents::AgentDefinition;
    ///
    /// let text = "---\nname: code-reviewer\ndescription: Reviews code. Use after edits.\n\
    ///             tools: Read, Grep, Glob, Bash\nmodel: sonnet\n---\n\nYou are a reviewer.\n";
    /// let (agent, warnings) = AgentDefinition::parse(text, ".claude/agents/code-reviewer.md".as_ref())?;
    /// assert!(warnings.is_empty());
    /// assert_eq!(agent.name(), "code-reviewer");
    /// let tools: Vec<&str> = agent.tools().unwrap_or_default().iter().map(|t| t.as_str()).collect();
    /// assert_eq!(tools, ["read", "grep", "find", "bash"]);
    /// assert_eq!(agent.model(), None);
    /// assert_eq!(agent.prompt(), "You are a reviewer.\n");
    /// # Ok::<(), flemma_runtime::agents::AgentError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`AgentError::Frontmatter`] for a frontmatter that is not closed, not YAML or not a
    /// mapping; [`AgentError::Field`] for a field of the wrong type; the errors of
    /// [`new`](Self::new), [`with_tools`](Self::with_tools) and
    /// [`with_max_turns`](Self::with_max_turns).
    pub fn parse(text: &str, path: &Path) -> Result<(Self, Vec<AgentWarning>), AgentError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let (frontmatter, body) = split_frontmatter(text, path)?;
        let fields = match frontmatter {
            None => Vec::new(),
            Some(yaml) => mapping(yaml, path)?,
        };
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut name = stem;
        let mut description = String::new();
        let mut tools = None;
        let mut disallowed = None;
        let mut model = None;
        let mut max_turns = None;
        let mut ignored = Vec::new();
        for (key, value) in fields {
            match key.as_str() {
                "name" => name = string(&value, path, "name")?,
                "description" => description = string(&value, path, "description")?,
                "tools" => tools = list(&value, path, "tools")?,
                "disallowedTools" | "disallowed_tools" => {
                    disallowed = list(&value, path, "disallowedTools")?;
                }
                "model" => model = Some(string(&value, path, "model")?),
                "maxTurns" | "max_turns" => max_turns = Some(turns(&value, path)?),
                // Shown by Claude Code's interface only.
                "color" => {}
                _ => ignored.push(key),
            }
        }
        let mut agent = Self::new(name, description, body.trim_start_matches(['\r', '\n']))?;
        if let Some(tools) = tools {
            agent = agent.with_tools(tools.iter().map(String::as_str))?;
        }
        if let Some(disallowed) = disallowed {
            agent = agent.with_disallowed(disallowed.iter().map(String::as_str))?;
        }
        if let Some(model) = model.filter(|m| !inherits(m)) {
            agent = agent.with_model(model);
        }
        if let Some(max_turns) = max_turns {
            agent = agent.with_max_turns(max_turns)?;
        }
        agent.source = AgentSource::File(path.to_owned());
        let warnings = ignored
            .into_iter()
            .map(|field| AgentWarning::FieldIgnored {
                agent: agent.name.clone(),
                path: path.to_owned(),
                field,
            })
            .collect();
        Ok((agent, warnings))
    }

    /// The name the model calls it by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it is for (the model chooses an agent by it).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The child's system prompt.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// The tools it may have (within the parent's); `None`: the parent's.
    pub fn tools(&self) -> Option<&[ToolName]> {
        self.tools.as_deref()
    }

    /// The tools it never has.
    pub fn disallowed(&self) -> &[ToolName] {
        &self.disallowed
    }

    /// Its model on the parent's provider; `None`: the parent's.
    pub fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    /// Its most consecutive tool turns; `None`: the parent's.
    pub fn max_turns(&self) -> Option<u64> {
        self.max_turns
    }

    /// Where it comes from.
    pub fn source(&self) -> &AgentSource {
        &self.source
    }

    /// The child's tools under a parent whose conversation has `parent`: the definition's
    /// (all of `parent` when it names none) less its disallowed ones, only those in `parent`,
    /// and [`AGENT_TOOL`] only when `may_delegate` (the depth limit not reached).
    pub fn narrow(&self, parent: &[ToolName], may_delegate: bool) -> Narrowed {
        let wanted: Vec<&ToolName> = match &self.tools {
            Some(tools) => tools.iter().collect(),
            None => parent.iter().collect(),
        };
        let mut tools = Vec::new();
        let mut dropped = Vec::new();
        for tool in wanted {
            if self.disallowed.contains(tool) {
                continue;
            }
            let delegates = tool.as_str() == AGENT_TOOL;
            if parent.contains(tool) && (!delegates || may_delegate) {
                tools.push(tool.clone());
            } else {
                dropped.push(tool.clone());
            }
        }
        tools.sort();
        tools.dedup();
        dropped.sort();
        dropped.dedup();
        Narrowed { tools, dropped }
    }
}

fn checked_name(name: String) -> Result<String, AgentError> {
    let valid = !name.is_empty()
        && name.len() <= MAX_AGENT_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(name)
    } else {
        Err(AgentError::InvalidName { name })
    }
}

/// Whether a frontmatter's `model` means the parent's model: `inherit`, or one of Claude
/// Code's aliases of Anthropic's model families, which name no model on another provider.
fn inherits(model: &str) -> bool {
    matches!(
        model.trim().to_ascii_lowercase().as_str(),
        "" | "inherit" | "sonnet" | "opus" | "haiku"
    )
}

/// Tool names as the registry knows them, from ours or Claude Code's.
fn native_names<'a>(
    agent: &str,
    tools: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<ToolName>, AgentError> {
    let mut names = Vec::new();
    for tool in tools {
        let tool = tool.trim();
        if tool.is_empty() {
            continue;
        }
        let native = crate::hooks::native_tool_name(tool).unwrap_or_else(|| tool.to_owned());
        let name = ToolName::new(native).map_err(|source| AgentError::InvalidToolName {
            agent: agent.to_owned(),
            tool: tool.to_owned(),
            source,
        })?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// The frontmatter (between a first line `---` and the next `---` line) and the body.
fn split_frontmatter<'t>(
    text: &'t str,
    path: &Path,
) -> Result<(Option<&'t str>, &'t str), AgentError> {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((None, text));
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            let frontmatter = &rest[..offset];
            if frontmatter.len() > MAX_FRONTMATTER {
                break;
            }
            return Ok((Some(frontmatter), &rest[offset + line.len()..]));
        }
        offset += line.len();
        if offset > MAX_FRONTMATTER {
            break;
        }
    }
    Err(AgentError::Frontmatter {
        path: path.to_owned(),
        reason: format!(
            "no closing `---` line within {} KiB",
            MAX_FRONTMATTER / 1024
        ),
    })
}

/// The frontmatter's top-level fields, in order.
fn mapping(yaml: &str, path: &Path) -> Result<Vec<(String, Yaml)>, AgentError> {
    let documents = YamlLoader::load_from_str(yaml).map_err(|e| AgentError::Frontmatter {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    match documents.into_iter().next() {
        None | Some(Yaml::Null) => Ok(Vec::new()),
        Some(Yaml::Hash(hash)) => hash
            .into_iter()
            .map(|(key, value)| match key {
                Yaml::String(key) => Ok((key, value)),
                other => Err(AgentError::Frontmatter {
                    path: path.to_owned(),
                    reason: format!("a key that is not text: {}", shown(&other)),
                }),
            })
            .collect(),
        Some(other) => Err(AgentError::Frontmatter {
            path: path.to_owned(),
            reason: format!("not a mapping of fields but {}", shown(&other)),
        }),
    }
}

fn shown(value: &Yaml) -> &'static str {
    match value {
        Yaml::Real(_) | Yaml::Integer(_) => "a number",
        Yaml::String(_) => "text",
        Yaml::Boolean(_) => "a boolean",
        Yaml::Array(_) => "a list",
        Yaml::Hash(_) => "a mapping",
        Yaml::Alias(_) => "an alias",
        Yaml::Null => "null",
        Yaml::BadValue => "a bad value",
    }
}

fn field_error(path: &Path, field: &'static str, expected: &'static str, got: &Yaml) -> AgentError {
    AgentError::Field {
        path: path.to_owned(),
        field,
        expected,
        found: shown(got),
    }
}

fn string(value: &Yaml, path: &Path, field: &'static str) -> Result<String, AgentError> {
    match value {
        Yaml::String(s) => Ok(s.clone()),
        // `name: 42` is a name too.
        Yaml::Integer(i) => Ok(i.to_string()),
        other => Err(field_error(path, field, "text", other)),
    }
}

/// A comma-separated list (Claude Code's form) or a YAML list of names; `null` is absent.
fn list(value: &Yaml, path: &Path, field: &'static str) -> Result<Option<Vec<String>>, AgentError> {
    match value {
        Yaml::Null => Ok(None),
        Yaml::String(s) => Ok(Some(s.split(',').map(|t| t.trim().to_owned()).collect())),
        Yaml::Array(items) => items
            .iter()
            .map(|item| match item {
                Yaml::String(s) => Ok(s.trim().to_owned()),
                other => Err(field_error(path, field, "a list of tool names", other)),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        other => Err(field_error(path, field, "a list of tool names", other)),
    }
}

fn turns(value: &Yaml, path: &Path) -> Result<u64, AgentError> {
    match value {
        Yaml::Integer(i) if *i >= 0 => Ok(u64::try_from(*i).unwrap_or(u64::MAX)),
        other => Err(field_error(path, "maxTurns", "a whole number", other)),
    }
}
