//! The built-in resolvers: config (100), sandbox (25), catch-all (0).

use std::panic::{AssertUnwindSafe, catch_unwind};

use async_trait::async_trait;
use flemma_config::{Layer, OpKind, PolicyDecision};

use crate::cache::ListCache;
use crate::error::{ResolverError, panic_message};
use crate::resolver::{ApprovalContext, Decision, Resolver, ToolCall, Verdict};

/// A built-in resolver: synchronous, so the chain calls it without boxing a future.
pub(crate) trait Builtin: Send + Sync {
    /// The verdict on one call.
    fn verdict(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict;
}

/// `urn:flemma:approval:config`: the closure policy, then the `tools.auto_approve` list (exact
/// names and `*` globs).
///
/// The list is read from `ctx.config` and compiled once per options state
/// ([`Config::generation`](flemma_config::Config::generation)) into a
/// [`GlobList`](flemma_config::GlobList), the matcher `flemma-config` uses for its own globs.
/// Compiled lists are kept per generation, so conversations sharing one resolver neither
/// recompile each other's lists nor wait on one lock.
#[derive(Debug, Default)]
pub struct ConfigResolver {
    cache: ListCache,
}

impl ConfigResolver {
    /// How many `auto_approve` lists this resolver has compiled: one per options state it was
    /// asked about, plus one for each state that fell out of its bounded cache. A diagnostic.
    pub fn compiled_lists(&self) -> u64 {
        self.cache.compiled()
    }
}

impl Builtin for ConfigResolver {
    /// The policy, then the list.
    fn verdict(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        if let Some(policy) = ctx.config.auto_approve_policy() {
            match catch_unwind(AssertUnwindSafe(|| policy.decide(call.name, call.input))) {
                Ok(PolicyDecision::Approve) => {
                    return Verdict::approve().because("the auto_approve policy approved");
                }
                Ok(PolicyDecision::RequireApproval) => {
                    return Verdict::require_approval()
                        .because("the auto_approve policy asks for approval");
                }
                Ok(PolicyDecision::Deny(reason)) => {
                    return Verdict::deny(reason).because("the auto_approve policy denied");
                }
                Ok(PolicyDecision::Pass) => {}
                // Fail closed.
                Err(panic) => {
                    return Verdict::require_approval().because(format!(
                        "the auto_approve policy {}",
                        panic_message(&*panic)
                    ));
                }
            }
        }
        // `$preset` references left in the list are unknown presets (known ones are expanded
        // on read): they hold no `*` and no tool is called `$…`, so they match nothing.
        self.cache.with(ctx.config, |list| {
            match list.first_match(call.name.as_str()) {
                Some(entry) => {
                    Verdict::approve().because(format!("matched auto_approve entry {entry:?}"))
                }
                None => Verdict::pass(),
            }
        })
    }
}

/// `urn:flemma:approval:sandbox`: approves a tool that is safe when sandboxed, while a sandbox is
/// active, unless the conversation's frontmatter took `auto_approve` into its own hands
/// (spec §6.4).
#[derive(Debug, Default, Clone, Copy)]
pub struct SandboxResolver;

impl Builtin for SandboxResolver {
    fn verdict(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        let pass = |why: &str| Verdict::pass().because(why.to_owned());
        if !ctx.options.tools.auto_approve_sandboxed {
            return pass("tools.auto_approve_sandboxed is false");
        }
        if !ctx.tools.auto_approves_if_sandboxed(call.name) {
            return pass("the tool does not declare auto_approves_if_sandboxed");
        }
        // The resolved option already lets a runtime override beat the frontmatter (§14.1).
        if !ctx.options.sandbox.enabled {
            return pass("the sandbox is disabled");
        }
        if !ctx.sandbox.backend_available() {
            return pass("no sandbox backend is available");
        }
        if ctx.config.layer_has_op(
            Layer::Frontmatter,
            OpKind::Remove,
            "tools.auto_approve",
            Some(call.name.as_str()),
        ) {
            return pass("the frontmatter removes the tool from tools.auto_approve");
        }
        if ctx
            .config
            .layer_has_set(Layer::Frontmatter, "tools.auto_approve")
        {
            return pass("the frontmatter sets tools.auto_approve");
        }
        Verdict::approve().because("sandboxed")
    }
}

/// `urn:flemma:approval:catch-all`: approves everything when `tools.require_approval` is
/// `false`, passes otherwise.
#[derive(Debug, Default, Clone, Copy)]
pub struct CatchAllResolver;

impl Builtin for CatchAllResolver {
    fn verdict(&self, _call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        if ctx.options.tools.require_approval {
            Verdict::pass()
        } else {
            Verdict::decide(Decision::Approve).because("tools.require_approval is false")
        }
    }
}

/// The built-in resolvers answer at once: as a [`Resolver`] they return their verdict.
macro_rules! resolver_from_verdict {
    ($($resolver:ty),*) => {$(
        #[async_trait]
        impl Resolver for $resolver {
            async fn resolve(
                &self,
                call: &ToolCall<'_>,
                ctx: &ApprovalContext<'_>,
            ) -> Result<Verdict, ResolverError> {
                Ok(self.verdict(call, ctx))
            }
        }
    )*};
}

resolver_from_verdict!(ConfigResolver, SandboxResolver, CatchAllResolver);
