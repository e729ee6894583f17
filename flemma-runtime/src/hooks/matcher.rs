//! Which calls a hook is asked about: a matcher on the tool's name.

use flemma_config::GlobList;

use flemma_core::hooks::HookError;

/// A hook's matcher.
///
/// Native matchers (`matcher = "bash|write"`, `flemma.*`) are `|`-separated tool-name globs (the
/// glob dialect of tool names: `*` matches any run of characters, the rest is literal, anchored).
/// Claude Code matchers ([`Matcher::claude`]) follow Claude Code's rule: a string of letters,
/// digits, `_` and `|` names tools exactly (`Edit|Write`), anything else is a regular expression
/// searched in the name (`mcp__memory__.*`). Empty and `*` match every tool either way.
///
/// ```
/// use flemma_runtime::hooks::Matcher;
/// let native = Matcher::new("bash|flemma.*")?;
/// assert!(native.matches("flemma.jobs.status"));
/// assert!(!native.matches("write"));
/// let claude = Matcher::claude("Edit|Write")?;
/// assert!(claude.matches("Write") && !claude.matches("NotebookWrite"));
/// assert!(Matcher::claude("mcp__.*")?.matches("mcp__fs__read_file"));
/// # Ok::<(), flemma_core::hooks::HookError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Matcher {
    pattern: String,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    All,
    Globs(GlobList),
    Exact(Vec<String>),
    Regex(regex::Regex),
}

impl Matcher {
    /// Every tool.
    pub fn all() -> Self {
        Self {
            pattern: String::new(),
            kind: Kind::All,
        }
    }

    /// A native matcher: `|`-separated tool-name globs.
    ///
    /// # Errors
    ///
    /// [`HookError`] for an empty alternative (`bash||write`).
    pub fn new(pattern: &str) -> Result<Self, HookError> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() || trimmed == "*" {
            return Ok(Self::all());
        }
        let alternatives: Vec<&str> = trimmed.split('|').map(str::trim).collect();
        if alternatives.iter().any(|a| a.is_empty()) {
            return Err(HookError::new(format!(
                "matcher `{pattern}` has an empty alternative"
            )));
        }
        Ok(Self {
            pattern: trimmed.to_owned(),
            kind: Kind::Globs(GlobList::new(alternatives)),
        })
    }

    /// A Claude Code matcher: exact names, or a regular expression.
    ///
    /// # Errors
    ///
    /// [`HookError`] when the expression does not compile.
    pub fn claude(pattern: &str) -> Result<Self, HookError> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() || trimmed == "*" {
            return Ok(Self::all());
        }
        let simple = trimmed
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|');
        let kind = if simple {
            Kind::Exact(trimmed.split('|').map(str::to_owned).collect())
        } else {
            Kind::Regex(regex::Regex::new(trimmed).map_err(|e| {
                HookError::with_source(
                    format!("matcher `{pattern}` is not a regular expression"),
                    e,
                )
            })?)
        };
        Ok(Self {
            pattern: trimmed.to_owned(),
            kind,
        })
    }

    /// Whether the tool `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match &self.kind {
            Kind::All => true,
            Kind::Globs(globs) => globs.is_match(name),
            Kind::Exact(names) => names.iter().any(|n| n == name),
            Kind::Regex(regex) => regex.is_match(name),
        }
    }

    /// The pattern as written (empty for every tool).
    pub fn pattern(&self) -> &str {
        &self.pattern
    }
}

impl Default for Matcher {
    fn default() -> Self {
        Self::all()
    }
}
