//! The option paths flemma knows, their kinds and defaults.

use flemma_ids::ToolName;
use serde_json::{Value, json};

use crate::error::ConfigError;
use crate::suggest::did_you_mean;

/// What an option holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// `true` / `false`.
    Bool,
    /// A non-negative integer.
    Integer,
    /// Any number.
    Number,
    /// Text.
    String,
    /// A list of strings; takes list operations (`+x ^x !x $preset`).
    List,
    /// A table of strings (`tools.bash.env`).
    StringMap,
    /// Anything (provider-specific parameters, thinking levels).
    Any,
    /// One of a few strings (`tools.cursor_after_result`), with how the choice reads in an
    /// error.
    Choice(&'static [&'static str], &'static str),
}

impl OptionKind {
    /// Whether `value` fits.
    pub(crate) fn accepts(self, value: &Value) -> bool {
        match self {
            OptionKind::Bool => value.is_boolean(),
            OptionKind::Integer => value.as_u64().is_some(),
            OptionKind::Number => value.is_number(),
            OptionKind::String => value.is_string(),
            OptionKind::List => value
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string)),
            OptionKind::StringMap => value
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string)),
            OptionKind::Any => true,
            OptionKind::Choice(values, _) => value.as_str().is_some_and(|v| values.contains(&v)),
        }
    }

    /// How the kind reads in an error and in the options reference (`a list of strings`).
    pub fn describe(self) -> &'static str {
        match self {
            OptionKind::Bool => "a boolean",
            OptionKind::Integer => "a non-negative integer",
            OptionKind::Number => "a number",
            OptionKind::String => "a string",
            OptionKind::List => "a list of strings",
            OptionKind::StringMap => "a table of strings",
            OptionKind::Any => "a value",
            OptionKind::Choice(_, describe) => describe,
        }
    }
}

/// One option of the schema, as [`known_options`](crate::known_options) lists it: for a reference page, a
/// completion list or a settings screen.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OptionInfo {
    /// The dotted path (`tools.max_concurrent`), as `--set` and a frontmatter write it.
    pub path: &'static str,
    /// What it holds.
    pub kind: OptionKind,
    /// Its value when no layer sets it; `null` when the program decides (a provider's own
    /// default, or a default the option's description states).
    pub default: Value,
    /// What it does, in a sentence or two.
    pub doc: &'static str,
    /// What a conversation's frontmatter may write to it.
    pub frontmatter: FrontmatterRule,
}

/// What a conversation's frontmatter may write to an option. The host's layers (defaults,
/// `flemma.toml`, `--set`, the builder) may write any option; a frontmatter is text the user
/// may not have written, so for the sandbox, the tools' environment and what references read
/// it may only narrow the host's value, unless the host allows widening (`[frontmatter]
/// may_widen = true`, [`Config::allow_frontmatter_widening`](crate::Config::allow_frontmatter_widening)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrontmatterRule {
    /// Any value.
    Any,
    /// Only a value that lets less happen than the host's; how, in words.
    Narrow(&'static str),
    /// Only a value at or before the host's in this order, narrowest first.
    NarrowOrder(&'static [&'static str]),
    /// Nothing different from the host's value: how the sandbox starts is the host's.
    HostOnly,
}

/// One known option.
#[derive(Debug, Clone)]
pub(crate) struct OptionDef {
    pub(crate) path: &'static str,
    pub(crate) kind: OptionKind,
    pub(crate) default: fn() -> Value,
    pub(crate) doc: &'static str,
}

macro_rules! options {
    ($($path:literal : $kind:ident $(($($arg:expr),*))? = $default:expr => $doc:literal),* $(,)?) => {
        &[$(OptionDef {
            path: $path,
            kind: OptionKind::$kind $(($($arg),*))?,
            default: || json!($default),
            doc: $doc,
        }),*]
    };
}

/// The default `exclude` of `grep` and `find`.
const EXCLUDES: [&str; 8] = [
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    "target",
    "dist",
    "build",
    "vendor",
];

/// Every option with its default and what it does.
/// The book's configuration reference is generated from this table.
pub(crate) const OPTIONS: &[OptionDef] = options![
    "tools": List = Vec::<String>::new()
        => "The tools the conversation offers the model, as names and globs with list operations (`+x`, `^x`, `!x`, `$preset`). Unset, every enabled tool of the registry; once a layer sets it, exactly the tools it names.",
    "tools.auto_approve": List = ["$standard"]
        => "Tools whose calls run without asking, as names and globs (`mcp.fs.*`) and presets (`$standard`, `$readonly`); a frontmatter may also give a Lua function deciding per call.",
    "tools.require_approval": Bool = true
        => "Ask for approval of a call no resolver approved; `false` approves them (a deny still wins).",
    "tools.auto_approve_sandboxed": Bool = true
        => "Approve calls of tools that are safe when sandboxed (`bash`) while a sandbox backend runs them.",
    "tools.max_concurrent": Integer = 2
        => "How many foreground calls run at once; `0` means no limit.",
    "tools.default_timeout": Integer = 30
        => "Seconds a call may run before it is given up (a tool's own `timeout` input wins); a call still running 3 s past its limit is reported as timed out.",
    "tools.show_spinner": Bool = true
        => "For an editor host: show a spinner in a call's result while the tool runs (kept for the plugin's options; flemma's own commands do not read it).",
    "tools.cursor_after_result": Choice(
        &["result", "stay", "next"],
        "one of \"result\", \"stay\", \"next\""
    ) = "result"
        => "For an editor host: where the cursor goes after a result is written: onto the result, where it was, or to the next pending call (flemma's own commands do not read it).",
    // `tools.modules` (spec §4.2: Lua module paths) is refused with what to do instead: see
    // `UNSUPPORTED`.
    "tools.autopilot.enabled": Bool = true
        => "Send the conversation again once every call of a response has its result, until the model answers without tools.",
    "tools.autopilot.max_turns": Integer = 100
        => "Stop after this many consecutive responses that ask for tools.",
    "tools.autopilot.resume_delay": Integer = 2000
        => "Milliseconds to wait after a background job's result arrives before sending again (a new result restarts the wait).",
    "tools.store.path_format": String = "$chat"
        => "Where stored results go: `$chat` (`.flemma/<file>/` beside the conversation), `$state` (under `$XDG_STATE_HOME`), or a path template.",
    "tools.store.unnamed_path_format": String =
        "${TMPDIR:-/tmp}/flemma/unnamed/{{ flemma.pid }}/{{ bufnr }}/{{ source }}_{{ name }}_{{ id }}.txt"
        => "The path template of stored results for a conversation without a file.",
    "tools.store.materialize": Bool = false
        => "Write every result to the store, not only those too large for the transcript and those redirected by `flemma.save_to`.",
    "tools.store.preview.lines": Integer = 10
        => "Lines of a stored result shown in the transcript in its place (`0`: none).",
    "tools.store.preview.bytes": Integer = 2048
        => "Bytes of a stored result shown in the transcript in its place, at most.",
    "tools.store.backup": Any = "version"
        => "What happens to a file a store write replaces: `\"version\"` keeps the old one beside it with a number; `false` overwrites it.",
    "tools.bash.shell": String = "bash"
        => "The shell `bash` runs commands with.",
    "tools.bash.cwd": String = "urn:flemma:buffer:path"
        => "The directory commands run in: the conversation's directory by default; `urn:flemma:project`, `urn:flemma:cwd`, an absolute path, or a path relative to the conversation.",
    "tools.bash.env": StringMap = serde_json::Map::new()
        => "Variables set for `bash`'s commands (after `tools.env`).",
    "tools.bash.allow": List = Vec::<String>::new()
        => "Command patterns `bash` runs without asking (`git status`, `cargo test *`), when every simple command of a command matches one.",
    "tools.bash.ask": List = Vec::<String>::new()
        => "Command patterns that ask for approval, even where `tools.auto_approve` or an allow pattern would run them.",
    "tools.bash.deny": List = Vec::<String>::new()
        => "Command patterns that are refused wherever they appear in a command (`rm -rf *`).",
    "tools.bash.claude_settings": Bool = false
        => "Also read the `Bash(…)` entries of `permissions.allow`, `ask` and `deny` in the project's `.claude/settings.json` and `settings.local.json` as command rules.",
    "tools.env.inherit": Choice(&["all", "core", "none"], "one of \"all\", \"core\", \"none\"") = "all"
        => "Which of the host's variables tool processes see: all (without the credentials of the default excludes), a core set (`PATH`, `HOME`, locale, terminal), or none.",
    "tools.env.ignore_default_excludes": Bool = false
        => "Pass the variables of the default excludes too (API keys, tokens, passwords); a frontmatter cannot set it.",
    "tools.env.exclude": List = Vec::<String>::new()
        => "More variable names and globs tool processes do not see.",
    "tools.env.include_only": List = Vec::<String>::new()
        => "When not empty, tool processes see only these names and globs.",
    "tools.env.keep": List = Vec::<String>::new()
        => "Names of the default excludes passed anyway (a credential a tool needs).",
    "tools.env.set": StringMap = serde_json::Map::new()
        => "Variables set for every tool process.",
    "tools.grep.cwd": String = "urn:flemma:buffer:path"
        => "The directory `grep` searches from (as `tools.bash.cwd`).",
    "tools.grep.exclude": List = EXCLUDES
        => "Directory and file names `grep` skips.",
    "tools.find.cwd": String = "urn:flemma:buffer:path"
        => "The directory `find` searches from (as `tools.bash.cwd`).",
    "tools.find.exclude": List = EXCLUDES
        => "Directory and file names `find` skips.",
    "tools.ls.cwd": String = "urn:flemma:buffer:path"
        => "The directory `ls` lists relative paths from (as `tools.bash.cwd`).",
    "sandbox.enabled": Bool = true
        => "Run commands and file tools inside the sandbox; `false` runs them with the host's rights.",
    "sandbox.backend": String = "auto"
        => "Which backend confines commands: `auto` (the first available, else none), `required` (the first available, else a warning that commands run unconfined), or a backend's name (`bwrap`).",
    // Departure from spec §14.1: `urn:flemma:project` (the conversation's project) in place
    // of `urn:flemma:cwd` (the process's working directory, which is `/` or `$HOME` for a
    // command run from there). Listing `urn:flemma:cwd` restores the spec's entry.
    "sandbox.policy.rw_paths": List = [
        "urn:flemma:project", "urn:flemma:buffer:path", "urn:flemma:store", "/tmp",
        "${TMPDIR:-/tmp}", "${XDG_CACHE_HOME:-~/.cache}", "${XDG_DATA_HOME:-~/.local/share}"
    ]
        => "The paths tools may write under the sandbox (everything else is read-only): the conversation's project, its directory, its store and the temporary and cache directories.",
    "sandbox.policy.network": Bool = true
        => "Let sandboxed commands use the network.",
    "sandbox.policy.allow_privileged": Bool = false
        => "Run sandboxed commands without a new user namespace (setuid programs such as `sudo` work; weaker confinement).",
    // Not in the spec: the conversation's file and the options files the host loaded are
    // read-only for tools (a model could otherwise rewrite its own frontmatter). `false`
    // restores the spec.
    "sandbox.policy.protect_conversation": Bool = true
        => "Keep the conversation's file, the options files, hooks and the project's `.git`, `.claude` and store bookkeeping read-only for tools, sandbox or not.",
    "sandbox.backends.bwrap.path": String = "bwrap"
        => "The bubblewrap program.",
    "sandbox.backends.bwrap.extra_args": List = Vec::<String>::new()
        => "Arguments added to every bubblewrap command line.",
    "budget.run.max_tokens": Integer = Value::Null
        => "The most tokens (in and out, cached input included) one run's requests may use; the run stops before a request that would cross it. A frontmatter may lower it, not raise or remove it.",
    "budget.run.max_cost": Number = Value::Null
        => "The most US dollars one run's requests may cost at the model table's prices; a model without a price stops the run before its first request. A frontmatter may lower it, not raise or remove it.",
    "budget.conversation.max_tokens": Integer = Value::Null
        => "As `budget.run.max_tokens`, over every run of the conversation (its usage log).",
    "budget.conversation.max_cost": Number = Value::Null
        => "As `budget.run.max_cost`, over every run of the conversation (its usage log).",
    "compaction.enabled": Bool = true
        => "Summarise the older part of a conversation into a `**Compaction:**` block before a request estimated to exceed `compaction.threshold` of the model's context window. A frontmatter may turn it off, not on.",
    "compaction.threshold": Number = 0.8
        => "The share of the model's context window (the model table's `context_window`) a request may fill before the conversation is compacted.",
    "compaction.keep_turns": Integer = 2
        => "How many of the latest exchanges (a response and the results answering it) stay verbatim below the summary.",
    "telemetry.capture_content": Bool = false
        => "Record the messages sent and received, the tool calls' inputs and their results on the tracing spans (`gen_ai.input.messages`, `gen_ai.tool.call.result`, ...): they may hold secrets, and a span exporter sends them on. A frontmatter may turn it off, not on.",
    "editing.compact_headers": Bool = true
        => "Write result headers without the blank line before their fence.",
    "http.connect_timeout": Number = Value::Null
        => "Seconds to connect to the provider (10 when unset).",
    "http.first_byte_timeout": Number = Value::Null
        => "Seconds from sending a request to the response's first byte (60 when unset); a request that times out is retried.",
    "http.idle_timeout": Number = Value::Null
        => "Seconds a response may stay silent between chunks (60 when unset); not retried.",
    "http.max_retries": Integer = Value::Null
        => "Retries of a request that failed before its response began (3 when unset).",
    "templates.file_access": Choice(
        &["project", "any", "none"],
        "one of \"project\", \"any\", \"none\""
    ) = "project"
        => "What `@./file` references and `include()` may read: the project, the store and `templates.allowed_roots`; any file; or nothing.",
    "templates.allowed_roots": List = Vec::<String>::new()
        => "More directories references and `include()` may read under `templates.file_access = \"project\"`.",
    "provider": String = Value::Null
        => "The provider: `anthropic`, `openai`, `openai-chat` or `vertex` (the command's `--provider` wins).",
    "model": String = Value::Null
        => "The model (a per-provider default when unset).",
    "thinking": Any = Value::Null
        => "Extended thinking: a level (`minimal`, `low`, `medium`, `high`, `max`), a token budget, or `false`; provider-specific parameters win.",
    "max_tokens": Integer = Value::Null
        => "The most tokens a response may have (a per-provider default when unset).",
    "temperature": Number = Value::Null
        => "The sampling temperature.",
    "cache_retention": String = Value::Null
        => "Prompt caching: `none`, `short` (the default) or `long` (Anthropic's 1-hour cache); Anthropic gets breakpoints on the tools, the system prompt and the latest message, OpenAI the conversation's `prompt_cache_key`.",
];

/// Options of the Flemma plugin that cannot be honoured here, with the Rust-side equivalent: a write
/// is [`ConfigError::Unsupported`], never silently ignored.
pub(crate) const UNSUPPORTED: &[(&str, &str)] = &[(
    "tools.modules",
    "Lua tool modules cannot be loaded; register tools in Rust instead, through the `Tool` \
     trait: `ToolRegistry::register(tool)`, or `ToolRegistry::register_module(ToolModule)` for \
     tools with their approval resolver",
)];

/// The fields of a server table `[mcp.servers.NAME]` of the `[mcp]` host section, as
/// flemma-mcp reads them. Outside the options files a layer may write only the ones that
/// narrow a server (`enabled`, `include`, `exclude`, `tool_timeout`; see
/// [`McpOptions`](crate::McpOptions)); the others define how a server starts.
pub const MCP_SERVER_FIELDS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "enabled",
    "include",
    "exclude",
    "startup_timeout",
    "tool_timeout",
    "trusted",
];

/// What a conversation may write about an MCP server of the options files
/// (`mcp.servers.<name>.<field>`): it may narrow the server, never start or change one.
pub(crate) const MCP_NARROWING: &[(&str, OptionKind)] = &[
    ("enabled", OptionKind::Bool),
    ("include", OptionKind::List),
    ("exclude", OptionKind::List),
    ("tool_timeout", OptionKind::Number),
];

/// Why a layer of options cannot write how an MCP server starts.
const MCP_SETUP_ONLY_INSTEAD: &str = "a conversation or a layer of options cannot define an MCP \
     server or change how one starts; define servers in `[mcp.servers.<name>]` of flemma.toml. \
     A frontmatter may narrow them: `enabled = false`, `include`, `exclude` and a shorter \
     `tool_timeout`";

/// Why a layer of options cannot write hooks.
const HOOKS_SETUP_ONLY_INSTEAD: &str = "a conversation or a layer of options cannot add hooks \
     (a shared .chat file must not run commands when it is opened); define command hooks in \
     `[[hooks.<Event>]]` of flemma.toml, or register them in Rust with \
     `ToolRegistry::register_hook`. A host that trusts its conversations may let frontmatters \
     add hooks with `[hooks] allow_frontmatter = true`";

/// The server of an `mcp.servers.<name>…` path, when `<name>` can be a server's name.
pub(crate) fn mcp_server<'p>(segments: &[&'p str]) -> Option<&'p str> {
    match segments {
        ["mcp", "servers", name, ..] if !name.contains('.') && ToolName::new(*name).is_ok() => {
            Some(*name)
        }
        _ => None,
    }
}

/// Resolves `mcp.servers.<name>.<field>`: the narrowing fields; the fields that define a
/// server are [`ConfigError::Unsupported`]; the rest is unknown.
fn resolve_mcp(path: &str, segments: &[&str]) -> Option<Result<Resolved, ConfigError>> {
    mcp_server(segments)?;
    let (field, deeper) = match segments {
        [_, _, _, field] => (*field, false),
        [_, _, _, field, ..] => (*field, true),
        _ => {
            return Some(Err(ConfigError::UnknownOption {
                path: path.to_owned(),
                suggestion: None,
            }));
        }
    };
    // `env.PATH` and `headers.X` of a written table are refused as their field.
    let narrows = MCP_NARROWING.iter().any(|(f, _)| *f == field);
    if !narrows && MCP_SERVER_FIELDS.contains(&field) {
        return Some(Err(ConfigError::Unsupported {
            path: segments[..4].join("."),
            instead: MCP_SETUP_ONLY_INSTEAD,
        }));
    }
    if deeper {
        return Some(Err(ConfigError::UnknownOption {
            path: path.to_owned(),
            suggestion: None,
        }));
    }
    if let Some((_, kind)) = MCP_NARROWING.iter().find(|(f, _)| *f == field) {
        return Some(Ok(Resolved {
            path: path.to_owned(),
            kind: *kind,
        }));
    }
    let prefix = &path[..path.len() - field.len()];
    Some(Err(ConfigError::UnknownOption {
        path: path.to_owned(),
        suggestion: did_you_mean(field, MCP_NARROWING.iter().map(|(f, _)| *f))
            .map(|f| format!("{prefix}{f}")),
    }))
}

/// Paths under which any key is accepted: provider-specific parameters
/// (`flemma.opt.anthropic.thinking_budget = 20000`, `parameters.<provider>.<key>`).
pub(crate) const OPEN_PREFIXES: &[&str] = &[
    "parameters.",
    "anthropic.",
    "openai.",
    "vertex.",
    "moonshot.",
];

/// The built-in tools whose tables are typed; other `tools.<name>.<key>` tables are free-form.
const TYPED_TOOL_TABLES: &[&str] = &["bash", "grep", "find", "ls"];

/// What a path refers to once aliases and shorthands are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The canonical spelling (see [`crate::path`]).
    pub(crate) path: String,
    pub(crate) kind: OptionKind,
}

/// Maps a written path to a known option: aliases (`tools.approve`), shorthands (`sandbox`,
/// `tools.autopilot` → `.enabled`), open tables and per-tool tables (`tools."mcp.fs".cwd`).
///
/// # Errors
///
/// [`ConfigError::UnknownOption`] with the closest known path.
pub(crate) fn resolve_path(path: &str, value_is_bool: bool) -> Result<Resolved, ConfigError> {
    let segments = crate::path::split(path)?;
    let canonical = crate::path::canonical(&segments);
    let path = match canonical.as_str() {
        "tools.approve" => "tools.auto_approve",
        "tools.list" => "tools",
        "sandbox" | "tools.autopilot" if value_is_bool => {
            return Ok(Resolved {
                path: format!("{canonical}.enabled"),
                kind: OptionKind::Bool,
            });
        }
        other => other,
    };
    if segments.first() == Some(&"hooks") {
        return Err(ConfigError::Unsupported {
            path: path.to_owned(),
            instead: HOOKS_SETUP_ONLY_INSTEAD,
        });
    }
    if let Some((path, instead)) = UNSUPPORTED.iter().find(|(p, _)| *p == path) {
        return Err(ConfigError::Unsupported {
            path: (*path).to_owned(),
            instead,
        });
    }
    if let Some(def) = OPTIONS.iter().find(|d| d.path == path) {
        return Ok(Resolved {
            path: path.to_owned(),
            kind: def.kind,
        });
    }
    if let Some(resolved) = resolve_mcp(&canonical, &segments) {
        return resolved;
    }
    if OPEN_PREFIXES.iter().any(|p| path.starts_with(p)) || tool_table(&segments).is_some() {
        return Ok(Resolved {
            path: path.to_owned(),
            kind: OptionKind::Any,
        });
    }
    Err(ConfigError::UnknownOption {
        path: path.to_owned(),
        suggestion: did_you_mean(path, OPTIONS.iter().map(|d| d.path)).map(str::to_owned),
    })
}

/// The tool whose free-form table a path points into: `tools.<name>.<key>…` where `<name>` is a
/// valid tool name that is neither a built-in tool with a typed table nor a `tools.*` option
/// (`autopilot`, `store`, `max_concurrent`, `list`, …).
pub(crate) fn tool_table<'p>(segments: &[&'p str]) -> Option<&'p str> {
    let [first, tool, _, ..] = segments else {
        return None;
    };
    let reserved = |name: &str| {
        TYPED_TOOL_TABLES.contains(&name)
            || matches!(name, "list" | "approve")
            || UNSUPPORTED
                .iter()
                .any(|(p, _)| p.strip_prefix("tools.") == Some(name))
            || OPTIONS.iter().any(|d| {
                d.path
                    .strip_prefix("tools.")
                    .is_some_and(|rest| rest.split('.').next() == Some(name))
            })
    };
    (*first == "tools" && !reserved(tool) && ToolName::new(*tool).is_ok()).then_some(*tool)
}

/// The default of a known path.
pub(crate) fn default_of(path: &str) -> Value {
    OPTIONS
        .iter()
        .find(|d| d.path == path)
        .map_or(Value::Null, |d| (d.default)())
}

/// Whether a path names a table of options (`tools`, `sandbox.policy`, `parameters.openai`,
/// `tools.<user tool>`), which an empty table may be written to.
pub(crate) fn is_table_path(path: &str) -> bool {
    let segments = crate::path::split(path).unwrap_or_default();
    if matches!(segments.as_slice(), ["mcp"] | ["mcp", "servers"])
        || (segments.len() == 3 && mcp_server(&segments).is_some())
    {
        return true;
    }
    let prefix = format!("{path}.");
    OPTIONS.iter().any(|d| d.path.starts_with(&prefix))
        || resolve_path(&format!("{prefix}key"), false).is_ok()
}
