//! The approval chain of flemma: resolvers deciding whether a tool call runs.
//!
//! When a model asks for a tool, the chain decides: approve (run it), require approval (ask
//! the user) or deny. Resolvers run by priority, highest first (ties by name); the first
//! decision wins; nothing deciding means "ask". The built-ins read the layered options of
//! `flemma-config`: `tools.auto_approve` (names, `*` globs, `$presets`, a Lua frontmatter's
//! function, or the host's closure policy; a policy that fails asks for approval),
//! the command rules of `tools.bash.allow`, `ask` and `deny` ([`BashRulesResolver`], read with
//! the bash parser of `flemma-shell`), the sandbox rule and the catch-all for
//! `tools.require_approval = false`.
//! Applications add their own resolvers with [`Chain::register`]: a type implementing the
//! asynchronous [`Resolver`] trait (a host asking a remote policy service or a person), or a
//! closure through [`resolver_fn`] (synchronous) or [`async_resolver_fn`]. A resolver answers a
//! [`Verdict`] or a [`ResolverError`]; a failing or panicking resolver is skipped, and
//! recorded. [`ApprovalContext`] is `Send + Sync`, so deciding can run in any task.
//!
//! [`Chain::explain`] returns the decision with every resolver consulted and why (the
//! `auto_approve` entry that matched, the sandbox condition that failed, the error of a
//! resolver that failed), which is what `flemma approval explain` prints.
//!
//! ```
//! use flemma_approval::{ApprovalContext, Chain, Decision, ResolverError, ToolCall, Verdict, resolver_fn};
//! use flemma_ids::ToolName;
//! use flemma_config::Config;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::new();
//! let options = config.options()?;
//! let ctx = ApprovalContext::new(&config, &options);
//!
//! let mut chain = Chain::with_builtins();
//! chain.register("my_app.no_deploys", 200, resolver_fn(|call, _| {
//!     if call.name == "deploy" { Verdict::deny(Some("not from a chat".into())) } else { Verdict::pass() }
//! }))?;
//! chain.register("my_app.offline", 150, resolver_fn(|_, _| -> Result<Verdict, ResolverError> {
//!     Err(ResolverError::new("the policy service is offline"))
//! }))?;
//!
//! let input = serde_json::json!({});
//! let deploy = ToolCall { name: &ToolName::new("deploy")?, input: &input, id: None };
//! let outcome = chain.decide(&deploy, &ctx).await;
//! assert_eq!(outcome.decision, Decision::Deny { reason: Some("not from a chat".into()) });
//!
//! let read = ToolCall { name: &ToolName::new("read")?, input: &input, id: None };
//! let outcome = chain.decide(&read, &ctx).await;
//! assert_eq!(outcome.decision, Decision::Approve, "read is in $standard");
//! assert_eq!(outcome.failures[0].error.message(), "the policy service is offline");
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod bash_rules;
mod builtin;
mod cache;
mod chain;
mod error;
mod resolver;

pub use bash_rules::{BashRulesResolver, claude_pattern};
pub use builtin::{CatchAllResolver, ConfigResolver, SandboxResolver};
pub use chain::{
    BASH_RULES_RESOLVER, CATCH_ALL_RESOLVER, CONFIG_RESOLVER, Chain, DEFAULT_PRIORITY, Explanation,
    Failure, KnownVerdicts, Outcome, Registration, ResolverName, SANDBOX_RESOLVER, TraceEntry,
    TraceResult, priority,
};
pub use error::{ApprovalError, ResolverError};
pub use resolver::{
    ApprovalContext, AsyncFnResolver, Decision, FnResolver, IntoVerdict, ResolveFuture, Resolver,
    SandboxStatus, ToolCall, ToolTraits, Verdict, Workspace, async_resolver_fn, resolver_fn,
};
