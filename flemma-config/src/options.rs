//! The typed view of the resolved options.

use std::collections::BTreeMap;

use flemma_ids::ToolName;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Every option, resolved through the layers. Built by [`Config::options`](crate::Config::options).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Options {
    /// `tools.*`
    pub tools: ToolsOptions,
    /// `sandbox.*`
    pub sandbox: SandboxOptions,
    /// `editing.*`
    pub editing: EditingOptions,
    /// `http.*`: the timeouts and retries of provider requests.
    #[serde(default)]
    pub http: HttpOptions,
    /// `budget.*`: what a run and a conversation may spend.
    #[serde(default)]
    pub budget: BudgetOptions,
    /// `compaction.*`: when a long conversation is summarised.
    #[serde(default)]
    pub compaction: CompactionOptions,
    /// `telemetry.*`: what the tracing spans record.
    #[serde(default)]
    pub telemetry: TelemetryOptions,
    /// `templates.*`
    pub templates: TemplatesOptions,
    /// The provider (`anthropic`, `openai`, `vertex`, …).
    pub provider: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// Thinking level or budget (`"medium"`, `false`, `4096`).
    pub thinking: Option<Value>,
    /// Maximum output tokens.
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Prompt-cache retention (`short`, `long`, `none`).
    pub cache_retention: Option<String>,
    /// Provider-specific parameters (`parameters.<provider>.<key>`).
    #[serde(default)]
    pub parameters: Map<String, Value>,
    /// Provider-specific overrides written under the provider's name (`anthropic.thinking_budget`,
    /// `openai.reasoning`, `vertex.thinking_budget`); they win over the general parameters.
    #[serde(default)]
    pub anthropic: Map<String, Value>,
    /// `openai.*` overrides.
    #[serde(default)]
    pub openai: Map<String, Value>,
    /// `vertex.*` overrides.
    #[serde(default)]
    pub vertex: Map<String, Value>,
    /// `moonshot.*` overrides.
    #[serde(default)]
    pub moonshot: Map<String, Value>,
    /// `mcp.servers.<name>.*`: how a layer above the options files (a frontmatter, `--set`)
    /// narrows the MCP servers those files configure. The servers themselves are the
    /// `[mcp]` host section ([`Config::section`](crate::Config::section)), which only the
    /// options files write.
    #[serde(default)]
    pub mcp: McpOptions,
}

impl Options {
    /// The options table of one tool (`tools.<name>.*`, the Flemma plugin's `ctx:get_config()`),
    /// when a layer sets one. The built-in tools with typed tables (`bash`, `grep`, `find`, `ls`)
    /// are read from their fields ([`ToolsOptions::bash`], …) instead.
    ///
    /// ```
    /// use flemma_config::{Config, Layer};
    /// use flemma_ids::ToolName;
    ///
    /// let mut config = Config::new();
    /// config.load_toml_str("[tools.\"mcp.fs.read\"]\ncwd = \"/srv\"\n", "flemma.toml".as_ref())?;
    /// config.set(Layer::Runtime, "tools.mcp.depth", 2)?;
    /// let options = config.options()?;
    /// let read = options.tool_options(&ToolName::new("mcp.fs.read")?);
    /// assert_eq!(read.map(|t| &t["cwd"]), Some(&"/srv".into()));
    /// let mcp = options.tool_options(&ToolName::new("mcp")?);
    /// assert_eq!(mcp.map(|t| t.len()), Some(1), "no `fs` key: the dotted name is one tool");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tool_options(&self, name: &ToolName) -> Option<&Map<String, Value>> {
        self.tools.tables.get(name)
    }
}

/// `tools.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each bool is one documented `tools.*` option, not a state machine"
)]
pub struct ToolsOptions {
    /// The conversation's tool list (`tools` itself; `tools.list` in files).
    pub list: Vec<String>,
    /// Whether a layer above the defaults shaped `list`: then exactly these tools are offered
    /// (disabled ones included, an empty list meaning none).
    #[serde(skip)]
    pub list_is_explicit: bool,
    /// Names and globs approved without asking.
    pub auto_approve: Vec<String>,
    /// Ask for calls no resolver approves (`false` registers the catch-all approver).
    pub require_approval: bool,
    /// Let the sandbox resolver approve tools that are safe when sandboxed.
    pub auto_approve_sandboxed: bool,
    /// Foreground tools running at once (`0` = unlimited).
    pub max_concurrent: u64,
    /// Seconds before a tool times out.
    pub default_timeout: u64,
    /// Show a spinner in pending placeholders while a tool runs.
    pub show_spinner: bool,
    /// Where the cursor goes after a result is injected.
    pub cursor_after_result: CursorAfterResult,
    /// `tools.autopilot.*`
    pub autopilot: AutopilotOptions,
    /// `tools.store.*`
    pub store: StoreOptions,
    /// `tools.bash.*`
    pub bash: BashOptions,
    /// `tools.env.*`: which host variables tool processes see.
    pub env: crate::env::EnvPolicy,
    /// `tools.grep.*`
    pub grep: SearchOptions,
    /// `tools.find.*`
    pub find: SearchOptions,
    /// `tools.ls.*`
    pub ls: LsOptions,
    /// The tables of tools without typed fields (`tools.<name>.*`), keyed by the full tool
    /// name: `tools."mcp.fs.read".cwd` is the key `cwd` of `mcp.fs.read`. Read one with
    /// [`Options::tool_options`].
    #[serde(flatten)]
    pub tables: BTreeMap<ToolName, Map<String, Value>>,
}

/// `tools.cursor_after_result`: where the cursor goes after a tool result is injected
/// (skipped while autopilot is armed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CursorAfterResult {
    /// To the result's header line (the default).
    #[default]
    Result,
    /// Nowhere: the cursor stays.
    Stay,
    /// To the line after the `@You:` message that holds the result.
    Next,
}

/// `tools.autopilot.*` (`tools.autopilot = false` is shorthand for `{enabled = false}`)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AutopilotOptions {
    /// Chain the tool cycle automatically.
    pub enabled: bool,
    /// Consecutive turns before stopping.
    pub max_turns: u64,
    /// Milliseconds to wait before resuming after background deliveries.
    pub resume_delay: u64,
}

/// `tools.store.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoreOptions {
    /// `$chat`, `$state` or a template.
    pub path_format: String,
    /// The template for conversations without a file.
    pub unnamed_path_format: String,
    /// Write every result to the store, not only overflow and redirects.
    pub materialize: bool,
    /// The preview of a `flemma.save_to` stub.
    pub preview: PreviewOptions,
    /// What happens to an existing file before it is overwritten.
    pub backup: Backup,
}

/// `tools.store.preview.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PreviewOptions {
    /// Lines of preview (`0` = none).
    pub lines: u64,
    /// Bytes of preview.
    pub bytes: u64,
}

/// `tools.store.backup`: a strategy name, or `false` to overwrite in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Backup {
    /// `false`: no backup (`true` is read as the default strategy).
    Enabled(bool),
    /// A named strategy (`version`).
    Strategy(String),
}

/// `tools.bash.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BashOptions {
    /// The shell.
    pub shell: String,
    /// The working directory (a path or URN).
    pub cwd: String,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// Command patterns run without asking (`tools.bash.allow`).
    pub allow: Vec<String>,
    /// Command patterns that ask (`tools.bash.ask`).
    pub ask: Vec<String>,
    /// Command patterns refused (`tools.bash.deny`).
    pub deny: Vec<String>,
    /// Read the `Bash(…)` permissions of the project's `.claude/settings*.json`.
    pub claude_settings: bool,
}

/// `tools.grep.*` and `tools.find.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SearchOptions {
    /// The working directory (a path or URN).
    pub cwd: String,
    /// Directories and files left out.
    pub exclude: Vec<String>,
}

/// `tools.ls.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LsOptions {
    /// The working directory (a path or URN).
    pub cwd: String,
}

/// `sandbox.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SandboxOptions {
    /// Sandbox tool processes.
    pub enabled: bool,
    /// `auto`, `required` or a backend name.
    pub backend: String,
    /// What sandboxed processes may do.
    pub policy: SandboxPolicy,
    /// Backend settings.
    pub backends: SandboxBackends,
}

/// `sandbox.policy.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SandboxPolicy {
    /// Writable paths (paths, URNs, `${VAR:-default}`). URNs: `urn:flemma:project` (the
    /// conversation's project, [`crate::project_root`] of its directory; default),
    /// `urn:flemma:buffer:path` (its directory), `urn:flemma:store` (its store directory),
    /// `urn:flemma:cwd` (the process working directory: the Flemma plugin's default, not ours). A
    /// relative entry is taken against the conversation's directory.
    pub rw_paths: Vec<String>,
    /// Allow network access.
    pub network: bool,
    /// Keep the user namespace (no `--unshare-user`).
    pub allow_privileged: bool,
    /// Keep the conversation's file and the options files the host loaded
    /// ([`Config::protected_files`](crate::Config::protected_files)) read-only for tools,
    /// whatever `sandbox.enabled` says: `write`, `edit` and `flemma.save_to` refuse them, and
    /// under the sandbox they are bound read-only. Default `true`; `false` is the Flemma plugin's
    /// behaviour (a tool may rewrite the transcript, frontmatter included).
    pub protect_conversation: bool,
}

/// `sandbox.backends.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SandboxBackends {
    /// `sandbox.backends.bwrap.*`
    pub bwrap: BwrapOptions,
}

/// `sandbox.backends.bwrap.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BwrapOptions {
    /// The bubblewrap binary.
    pub path: String,
    /// Extra arguments before the command.
    pub extra_args: Vec<String>,
}

/// `http.*`: how long provider requests may wait, and how often they are retried. Unset
/// values keep the transport's defaults (connect 10 s, first byte 60 s, idle 60 s, 3
/// retries).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Seconds to open the connection.
    pub connect_timeout: Option<f64>,
    /// Seconds from sending a request to the first byte of its response.
    pub first_byte_timeout: Option<f64>,
    /// Seconds between two chunks of a streaming response.
    pub idle_timeout: Option<f64>,
    /// Retries after the first attempt.
    pub max_retries: Option<u64>,
}

/// `budget.*`: what a run of the agent loop (`budget.run.*`) and a conversation over all its
/// runs (`budget.conversation.*`) may spend; unset, nothing is limited. A session stops before
/// a request that would cross one, so a budget is never exceeded by more than one response. A
/// frontmatter may lower a budget or set one, never raise or remove the host's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BudgetOptions {
    /// One run's limits.
    #[serde(default)]
    pub run: BudgetLimits,
    /// The conversation's limits, over every run its usage log records.
    #[serde(default)]
    pub conversation: BudgetLimits,
}

/// The limits of one scope of [`BudgetOptions`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BudgetLimits {
    /// Tokens in and out, added up over the requests (cached input included).
    pub max_tokens: Option<u64>,
    /// US dollars at the model table's prices.
    pub max_cost: Option<f64>,
}

impl BudgetLimits {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.max_tokens.is_some() || self.max_cost.is_some()
    }
}

/// `compaction.*`: when a long conversation is summarised into a `**Compaction:**` block.
///
/// A frontmatter may turn compaction off, not on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompactionOptions {
    /// Compact before a request estimated to exceed [`threshold`](Self::threshold) of the
    /// model's context window. `false` never compacts on its own (a host or `flemma compact`
    /// still may).
    pub enabled: bool,
    /// The share of the model's context window (from the model table) a request may fill
    /// before the conversation is compacted, above 0 and at most 1.
    pub threshold: f64,
    /// How many of the latest exchanges (a model's response and the results that answer it)
    /// stay verbatim after the summary.
    pub keep_turns: u32,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: 0.8,
            keep_turns: 2,
        }
    }
}

/// `telemetry.*`: what the tracing spans of a conversation record (`flemma_runtime::telemetry`).
///
/// A frontmatter may turn the capture off, not on: a transcript cannot make its host send
/// the conversation to the host's tracing backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TelemetryOptions {
    /// Record the content on the spans: the messages of each request and response
    /// (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`),
    /// each call's input and result (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`).
    /// Off by default: they may hold secrets, and an exporter sends them on.
    pub capture_content: bool,
}

/// `editing.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct EditingOptions {
    /// No blank line between a block header and its fence.
    pub compact_headers: bool,
}

/// `templates.*`
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TemplatesOptions {
    /// Which files `include()` and `@./file` references may read.
    pub file_access: FileAccessMode,
    /// More directories they may read under `file_access = "project"` (paths, `~/`,
    /// `${VAR:-default}`).
    pub allowed_roots: Vec<String>,
}

/// `templates.file_access`: which files `include()` and `@./file` references may read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FileAccessMode {
    /// Files inside the conversation's project, its store and `templates.allowed_roots`
    /// (symbolic links resolved first).
    #[default]
    Project,
    /// Any file the process can read (the Flemma plugin's behaviour).
    Any,
    /// No file.
    None,
}

impl FileAccessMode {
    /// How the mode is written in options.
    pub fn as_str(self) -> &'static str {
        match self {
            FileAccessMode::Project => "project",
            FileAccessMode::Any => "any",
            FileAccessMode::None => "none",
        }
    }
}

/// `mcp.*`: the narrowing of the MCP servers of the options files, by server name.
///
/// A conversation cannot define a server or change how one starts (`command`, `url`, …
/// are [`ConfigError::Unsupported`](crate::ConfigError::Unsupported) outside the options
/// files); it can only take tools away from one, or shorten its calls' timeout:
///
/// ```
/// use flemma_config::{Config, ConfigError};
///
/// let mut config = Config::new();
/// config.apply_frontmatter(
///     "json",
///     r#"{"flemma": {"mcp": {"servers": {
///         "fs": {"exclude": ["write_*"], "tool_timeout": 5},
///         "web": {"enabled": false}
///     }}}}"#,
///     2,
/// )?;
/// let mcp = config.options()?.mcp;
/// assert!(mcp.allows("fs", "read_file"));
/// assert!(!mcp.allows("fs", "write_file"));
/// assert!(!mcp.allows("web", "fetch"));
/// assert!(mcp.allows("other", "anything"), "a server no layer narrows keeps its tools");
/// assert_eq!(mcp.tool_timeout("fs"), Some(std::time::Duration::from_secs(5)));
///
/// let defining = config.apply_frontmatter(
///     "json",
///     r#"{"flemma": {"mcp": {"servers": {"evil": {"command": "sh"}}}}}"#,
///     2,
/// );
/// assert!(defining.is_err(), "a frontmatter cannot start a server");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct McpOptions {
    /// The servers a layer narrows, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerOptions>,
}

impl McpOptions {
    /// Whether the server `server` may offer its tool `tool` (the server's own name for it,
    /// as `include` and `exclude` of `flemma.toml` match it): not when a layer sets
    /// `enabled = false`, when its `include` is not empty and matches nothing, or when its
    /// `exclude` matches.
    pub fn allows(&self, server: &str, tool: &str) -> bool {
        let Some(narrowed) = self.servers.get(server) else {
            return true;
        };
        if narrowed.enabled == Some(false) {
            return false;
        }
        let included = narrowed
            .include
            .as_ref()
            .is_none_or(|globs| globs.is_empty() || crate::GlobList::new(globs).is_match(tool));
        included && !crate::GlobList::new(&narrowed.exclude).is_match(tool)
    }

    /// Whether a layer disables the server (`enabled = false`).
    pub fn disables(&self, server: &str) -> bool {
        self.servers
            .get(server)
            .is_some_and(|s| s.enabled == Some(false))
    }

    /// The `tool_timeout` a layer sets for the server's calls, when it sets one; a call waits
    /// for the shorter of it and the server's own.
    pub fn tool_timeout(&self, server: &str) -> Option<std::time::Duration> {
        let seconds = self.servers.get(server)?.tool_timeout?;
        std::time::Duration::try_from_secs_f64(seconds)
            .ok()
            .filter(|d| !d.is_zero())
    }
}

/// `mcp.servers.<name>.*`: how a layer narrows one server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct McpServerOptions {
    /// `false` takes every tool of the server away; `true` changes nothing (a layer cannot
    /// enable a server the options files disable).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// When set and not empty, only the tools matching one of these globs stay.
    #[serde(default)]
    pub include: Option<Vec<String>>,
    /// Tools matching one of these globs go.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Seconds; a call waits for the shorter of this and the server's `tool_timeout`.
    #[serde(default)]
    pub tool_timeout: Option<f64>,
}
