//! The built-in resolvers: config (100), sandbox (25), catch-all (0).

use std::panic::{AssertUnwindSafe, catch_unwind};

use async_trait::async_trait;
use flemma_config::{AutoApprovePolicy, Layer, OpKind, PolicyContext, PolicyDecision};

use crate::cache::ListCache;
use crate::error::{ResolverError, panic_message};
use crate::resolver::{ApprovalContext, Decision, Resolver, ToolCall, Verdict};

/// A built-in resolver: synchronous, so the chain calls it without boxing a future.
pub(crate) trait Builtin: Send + Sync {
    /// The verdict on one call.
    fn verdict(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict;

    /// The verdict, and what failed when the resolver decided because something failed (the
    /// config resolver asks for approval when its policy fails): the chain reports it as it
    /// reports a failing resolver, but keeps the decision.
    fn verdict_and_failure(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> (Verdict, Option<ResolverError>) {
        (self.verdict(call, ctx), None)
    }
}

/// `urn:flemma:approval:config`: the host's closure policy, then the value of
/// `tools.auto_approve`: the function a layer set (a Lua frontmatter's
/// `flemma.opt.tools.auto_approve = function(tool_name, input, ctx) … end`), then the
/// list (exact names and `*` globs).
///
/// A policy that fails (a panicking closure; a Lua function that raises an error, runs too
/// long or returns something other than `true`, `false`, `"deny"` or `nil`) asks for approval
/// (fail closed) and is reported in [`Outcome::failures`](crate::chain::Outcome::failures).
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

/// Asks one policy; `None` when it passes.
fn ask(
    policy: &AutoApprovePolicy,
    who: &str,
    call: &ToolCall<'_>,
) -> Option<(Verdict, Option<ResolverError>)> {
    let ctx = PolicyContext::new(call.id);
    let fail_closed = |error: ResolverError| {
        let verdict = Verdict::require_approval().because(error.report());
        Some((verdict, Some(error)))
    };
    match catch_unwind(AssertUnwindSafe(|| {
        policy.decide(call.name, call.input, &ctx)
    })) {
        Ok(PolicyDecision::Approve) => {
            Some((Verdict::approve().because(format!("{who} approved")), None))
        }
        Ok(PolicyDecision::RequireApproval) => Some((
            Verdict::require_approval().because(format!("{who} asks for approval")),
            None,
        )),
        Ok(PolicyDecision::Deny(reason)) => {
            Some((Verdict::deny(reason).because(format!("{who} denied")), None))
        }
        Ok(PolicyDecision::Pass) => None,
        Ok(PolicyDecision::Failed(error)) => fail_closed(ResolverError::with_source(
            format!("{who} failed, so the call waits for approval"),
            error,
        )),
        Err(panic) => fail_closed(ResolverError::new(format!(
            "{who} {}, so the call waits for approval",
            panic_message(&*panic)
        ))),
    }
}

impl Builtin for ConfigResolver {
    fn verdict(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        self.verdict_and_failure(call, ctx).0
    }

    /// The host's policy, the option's function, then the list.
    fn verdict_and_failure(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> (Verdict, Option<ResolverError>) {
        if let Some(decided) = ctx
            .config
            .auto_approve_policy()
            .and_then(|policy| ask(policy, "the auto_approve policy", call))
        {
            return decided;
        }
        if let Some(decided) = ctx
            .config
            .auto_approve_function()
            .and_then(|function| ask(function, "the auto_approve function", call))
        {
            return decided;
        }
        // `$preset` references left in the list are unknown presets (known ones are expanded
        // on read): they hold no `*` and no tool is called `$…`, so they match nothing.
        let verdict = self.cache.with(ctx.config, |list| {
            match list.first_match(call.name.as_str()) {
                // The defaults' approval says so: nobody chose it for this conversation.
                Some(entry) if ctx.config.is_default("tools.auto_approve") => Verdict::approve()
                    .because(format!(
                        "matched auto_approve entry {entry:?} of the default $standard"
                    )),
                Some(entry) => {
                    Verdict::approve().because(format!("matched auto_approve entry {entry:?}"))
                }
                None => Verdict::pass(),
            }
        });
        (verdict, None)
    }
}

/// `urn:flemma:approval:sandbox`: approves a tool that is safe when sandboxed, while a sandbox is
/// active, unless the conversation's frontmatter took `auto_approve` into its own hands.
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

resolver_from_verdict!(
    ConfigResolver,
    SandboxResolver,
    CatchAllResolver,
    crate::bash_rules::BashRulesResolver
);
