//! The approval chain of flemma: resolvers deciding whether a tool call runs.
//!
//! When a model asks for a tool, the chain decides: approve (run it), require approval (ask
//! the user) or deny. Resolvers run by priority, highest first (ties by name); the first
//! decision wins; nothing deciding means "ask". The built-ins read the layered options of
//! `flemma-config`: `tools.auto_approve` (names, `*` globs, `$presets`, or a closure policy),
//! the sandbox rule (spec §6.4) and the catch-all for `tools.require_approval = false`.
//! Applications add their own resolvers with [`Chain::register`] or [`resolver_fn`].
//!
//! [`Chain::explain`] returns the decision with every resolver consulted and why (the
//! `auto_approve` entry that matched, the sandbox condition that failed), which is what
//! `flemma approval explain` prints.
//!
//! ```
//! use flemma_approval::{ApprovalContext, Chain, Decision, ToolCall, ToolName, Verdict, resolver_fn};
//! use flemma_config::Config;
//!
//! let config = Config::new();
//! let options = config.options()?;
//! let ctx = ApprovalContext { config: &config, options: &options, tools: &|_: &ToolName| false, sandbox: &false };
//!
//! let mut chain = Chain::with_builtins();
//! chain.register("my_app.no_deploys", 200, resolver_fn(|call, _| {
//!     if call.name == "deploy" { Verdict::deny(Some("not from a chat".into())) } else { Verdict::pass() }
//! }))?;
//!
//! let input = serde_json::json!({});
//! let deploy = ToolCall { name: &ToolName::new("deploy")?, input: &input, id: None };
//! assert_eq!(chain.decide(&deploy, &ctx), Decision::Deny { reason: Some("not from a chat".into()) });
//! let read = ToolCall { name: &ToolName::new("read")?, input: &input, id: None };
//! assert_eq!(chain.decide(&read, &ctx), Decision::Approve, "read is in $standard");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod builtin;
mod chain;
mod error;
mod resolver;

pub use builtin::{CatchAllResolver, ConfigResolver, SandboxResolver};
pub use chain::{
    CATCH_ALL_RESOLVER, CONFIG_RESOLVER, Chain, DEFAULT_PRIORITY, Explanation, Registration,
    ResolverName, SANDBOX_RESOLVER, TraceEntry, TraceResult,
};
pub use error::ApprovalError;
pub use flemma_ids::{ToolName, ToolUseId};
pub use resolver::{
    ApprovalContext, Decision, FnResolver, Resolver, SandboxStatus, ToolCall, ToolTraits, Verdict,
    resolver_fn,
};
