//! Layered options for flemma: defaults, setup, runtime and per-conversation frontmatter.
//!
//! Every decision the SDK makes (which tools a conversation has, which calls run unasked, how
//! many run at once) reads an option. Options live in four layers of operation logs, replayed
//! on read: DEFAULTS < SETUP (`flemma.toml`, the builder) < RUNTIME (`--set`) <
//! FRONTMATTER (the conversation's own). List options take operations (`+x` append, `^x`
//! prepend, `!x` remove, `$preset` spread); the layers keep the operations themselves, so the
//! approval chain can ask what a conversation *meant* ("did the frontmatter remove `bash`?"),
//! not only what the list ended up as. Every write keeps where it was made ([`Origin`]: a
//! frontmatter line, a `flemma.toml` line), so [`Config::diagnostics`] can say where a
//! misspelled tool name, a glob that matches nothing or an unknown preset was written.
//!
//! ```
//! use flemma_config::{Config, Layer};
//!
//! let mut config = Config::new();
//! config.load_toml_str("[tools]\nmax_concurrent = 4\nauto_approve = [\"$readonly\"]\n", "flemma.toml".as_ref())?;
//! config.append(Layer::Frontmatter, "tools.auto_approve", "bash")?;
//!
//! let options = config.options()?;
//! assert_eq!(options.tools.max_concurrent, 4);
//! assert_eq!(options.tools.auto_approve, ["read", "find", "grep", "ls", "bash"]);
//! assert_eq!(config.list("tools.auto_approve").source, "S+F");
//! # Ok::<(), flemma_config::ConfigError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod config;
mod diagnostic;
mod env;
mod error;
mod glob;
mod layer;
mod listops;
mod locator;
#[cfg(feature = "lua")]
mod lua;
mod narrow;
mod options;
mod path;
mod presets;
mod project;
mod schema;
mod sections;
mod sources;
mod suggest;

pub use config::builder::ConfigBuilder;
pub use config::{AutoApprovePolicy, Config, PolicyContext, PolicyDecision, ResolvedList};
pub use diagnostic::{FinalizeIssue, OptionDiagnostic, Origin};
pub use env::{CORE_VARS, DEFAULT_EXCLUDES, EnvPolicy, Inherit};
pub use error::{ConfigError, FrontmatterError, PolicyError, TomlError};
pub use glob::{GlobList, glob_match};
pub use layer::Layer;
pub use listops::{ListOp, OpKind, is_preset_ref, parse_list};
/// The cache of compiled Lua chunks that flemma-config's frontmatter uses, shared with
/// flemma-providers' Lua templates (one cache implementation, not part of the supported API:
/// it names mlua's types).
#[cfg(feature = "lua")]
#[doc(hidden)]
pub use lua::chunks::Chunks as LuaChunks;
/// The one Lua sandbox, shared with flemma-providers' Lua templates: a state for a
/// frontmatter or a template, with one list of what is taken away, bounded memory and
/// instructions, and bounded pattern functions (not part of the supported API: it names
/// mlua's types).
#[cfg(feature = "lua")]
#[doc(hidden)]
pub use lua::sandbox::{LuaUse, lua_sandbox};
pub use narrow::known_options;
pub use options::{
    AutopilotOptions, Backup, BashOptions, BudgetLimits, BudgetOptions, BwrapOptions,
    CompactionOptions, CursorAfterResult, EditingOptions, FileAccessMode, HttpOptions, LsOptions,
    McpOptions, McpServerOptions, Options, PreviewOptions, SandboxBackends, SandboxOptions,
    SandboxPolicy, SearchOptions, StoreOptions, TelemetryOptions, TemplatesOptions, ToolsOptions,
};
pub use presets::{Preset, Presets};
pub use project::{
    MAX_PROJECT_FILE_BYTES, PROJECT_MARKER, conversation_dir, conversation_path, fold_path,
    project_root, project_root_with_home, read_project_file,
};
pub use schema::{FrontmatterRule, MCP_SERVER_FIELDS, OptionInfo, OptionKind};
pub use sections::HOST_SECTIONS;
pub use suggest::did_you_mean;
