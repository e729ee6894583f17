//! Host sections of `flemma.toml`: top-level tables that are not options but belong to a crate
//! above this one (`[mcp]`, read by flemma-mcp; `[hooks]`, read by flemma-runtime; `[models]`,
//! the host's prices and context windows, read by the session's host), kept as
//! loaded for that crate to parse, and `[frontmatter]` (what a conversation's frontmatter may
//! do, read here).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::Config;

/// The top-level keys of `flemma.toml` kept as host sections instead of options.
pub const HOST_SECTIONS: &[&str] = &["mcp", "hooks", "frontmatter", "models"];

/// The host sections whose arrays add up across files instead of replacing each other: each
/// file's `[[hooks.PreToolUse]]` tables join the earlier files' (as Claude Code runs the
/// hooks of every settings file).
const APPENDING: &[&str] = &["hooks"];

/// One host section: its merged value and the last file that wrote it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Section {
    value: Value,
    path: PathBuf,
}

/// Merges `value` into `into`: tables key by key (recursively), arrays appended when
/// `append`, anything else replaces.
fn merge(into: &mut Value, value: Value, append: bool) {
    match (into, value) {
        (Value::Array(into), Value::Array(value)) if append => into.extend(value),
        (Value::Object(into), Value::Object(value)) => {
            for (key, value) in value {
                match into.get_mut(&key) {
                    Some(slot) => merge(slot, value, append),
                    None => {
                        into.insert(key, value);
                    }
                }
            }
        }
        (into, value) => *into = value,
    }
}

/// The existing files the commands under `value` name: each word with a `/` of a `command`
/// string or an `args` item, taken against `base` when relative.
fn command_files(value: &Value, in_command: bool, base: &Path, out: &mut Vec<PathBuf>) {
    match value {
        Value::String(text) if in_command => {
            for word in text.split_whitespace().filter(|w| w.contains('/')) {
                let file = base.join(word.trim_matches(|c| c == '"' || c == '\''));
                if file.is_file() {
                    out.push(file);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                command_files(item, in_command, base, out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                command_files(item, matches!(key.as_str(), "command" | "args"), base, out);
            }
        }
        _ => {}
    }
}

impl Config {
    /// A host section of the options files loaded (see [`HOST_SECTIONS`]): `[mcp]` or
    /// `[hooks]` and the tables below it, as TOML values converted to JSON. Files loaded later
    /// merge into it table by table (a key written again replaces the earlier value; in
    /// `[hooks]` an array of tables adds up). `None` when no file
    /// had the section.
    ///
    /// ```
    /// let mut config = flemma_config::Config::new();
    /// config.load_toml_str("[mcp.servers.fs]\ncommand = \"mcp-fs\"\n", "flemma.toml".as_ref())?;
    /// let command = config.section("mcp").map(|mcp| mcp["servers"]["fs"]["command"].clone());
    /// assert_eq!(command, Some("mcp-fs".into()));
    /// assert!(config.section("other").is_none());
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn section(&self, name: &str) -> Option<&Value> {
        self.sections.get(name).map(|s| &s.value)
    }

    /// The last file that wrote the host section `name`, for error messages.
    pub fn section_origin(&self, name: &str) -> Option<&Path> {
        self.sections.get(name).map(|s| s.path.as_path())
    }

    /// Keeps `value` as (part of) the host section `name`, written by `path`. The files the
    /// commands of `[hooks]` and `[mcp]` name (a hook's script, a server's program) are
    /// [protected](Self::protect_file): the host runs them outside any sandbox.
    pub(crate) fn merge_section(&mut self, name: &str, value: Value, path: &Path) {
        if matches!(name, "hooks" | "mcp") {
            let base = path.parent().unwrap_or_else(|| Path::new(""));
            let mut files = Vec::new();
            command_files(&value, false, base, &mut files);
            for file in files {
                self.protect_file(&file);
            }
        }
        match self.sections.get_mut(name) {
            Some(section) => {
                merge(&mut section.value, value, APPENDING.contains(&name));
                path.clone_into(&mut section.path);
            }
            None => {
                self.sections.insert(
                    name.to_owned(),
                    Section {
                        value,
                        path: path.to_owned(),
                    },
                );
            }
        }
    }
}

impl Config {
    /// Whether a conversation's frontmatter may add hooks: what the host said with
    /// [`allow_frontmatter_hooks`](Self::allow_frontmatter_hooks), else `allow_frontmatter`
    /// of the options files' `[hooks]` section, else no (a shared `.chat` file must not run
    /// commands when it is opened).
    ///
    /// ```
    /// let mut config = flemma_config::Config::new();
    /// assert!(!config.frontmatter_hooks_allowed());
    /// config.load_toml_str("[hooks]\nallow_frontmatter = true\n", "flemma.toml".as_ref())?;
    /// assert!(config.frontmatter_hooks_allowed());
    /// config.allow_frontmatter_hooks(false);
    /// assert!(!config.frontmatter_hooks_allowed());
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn frontmatter_hooks_allowed(&self) -> bool {
        self.allow_frontmatter_hooks.unwrap_or_else(|| {
            self.section("hooks")
                .and_then(|h| h.get("allow_frontmatter"))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        })
    }

    /// Lets conversations' frontmatters add hooks (`allow`), or not, whatever the options
    /// files say.
    pub fn allow_frontmatter_hooks(&mut self, allow: bool) {
        self.allow_frontmatter_hooks = Some(allow);
        self.generation = crate::config::next_generation();
    }

    /// The `hooks` the frontmatter wrote (`{"flemma": {"hooks": {"PreToolUse": [...]}}}`,
    /// `flemma.opt.hooks.PreToolUse = {...}`), as written, when the host allows frontmatter
    /// hooks ([`frontmatter_hooks_allowed`](Self::frontmatter_hooks_allowed)); `None` when the
    /// frontmatter wrote none. Without the host's leave, writing `hooks` in a frontmatter is
    /// [`ConfigError::Unsupported`](crate::ConfigError::Unsupported) and nothing is kept.
    ///
    /// ```
    /// let mut config = flemma_config::Config::new();
    /// config.allow_frontmatter_hooks(true);
    /// let fm = r#"{"flemma": {"hooks": {"PreToolUse": [{"matcher": "bash", "command": "exit 0"}]}}}"#;
    /// config.apply_frontmatter("json", fm, 2)?;
    /// let hooks = config.frontmatter_hooks().expect("written");
    /// assert_eq!(hooks["PreToolUse"][0]["matcher"], "bash");
    /// # Ok::<(), flemma_config::FrontmatterError>(())
    /// ```
    pub fn frontmatter_hooks(&self) -> Option<&Value> {
        self.frontmatter_hooks.as_ref()
    }

    /// Keeps a frontmatter's write of `hooks` or a path below it (`hooks.PreToolUse`);
    /// `false` for any other path.
    pub(crate) fn write_frontmatter_hooks(
        &mut self,
        path: &str,
        value: &Value,
    ) -> Result<bool, crate::ConfigError> {
        let segments = crate::path::split(path)?;
        if segments.first() != Some(&"hooks") {
            return Ok(false);
        }
        let mut written = value.clone();
        for segment in segments[1..].iter().rev() {
            let mut table = serde_json::Map::new();
            table.insert((*segment).to_owned(), written);
            written = Value::Object(table);
        }
        match &mut self.frontmatter_hooks {
            Some(hooks) => merge(hooks, written, true),
            None => self.frontmatter_hooks = Some(written),
        }
        self.generation = crate::config::next_generation();
        Ok(true)
    }
}

/// The host sections of a [`Config`], by name.
pub(crate) type Sections = BTreeMap<String, Section>;
