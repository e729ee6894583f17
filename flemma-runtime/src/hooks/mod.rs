//! Hooks: code that runs before and after each tool call and at a session's edges, to block
//! or rewrite a call, change or annotate its result, add context, or keep a session going.
//!
//! The contract, the [`Hook`] trait with one async method per [`HookEvent`] (each defaults to
//! "no opinion") and the events' inputs and answers, is flemma-core's
//! [`flemma_core::hooks`]; this module registers and runs hooks. A closure becomes a hook with
//! [`hook_fn`]. Hooks are registered on a
//! [`ToolRegistry`](crate::ToolRegistry) ([`ToolRegistry::register_hook`](crate::ToolRegistry::register_hook))
//! with a name, the events they listen to, a [`Matcher`] on the tool's name and a priority
//! (higher runs first). Command hooks ([`CommandHook`]: a shell command given the event as
//! JSON, in Claude Code's contract) come from `[[hooks.<Event>]]` tables of `flemma.toml`
//! ([`from_config`]).
//!
//! `PreToolUse` hooks run in Phase 1, before the approval chain decides: each sees the input
//! as the hooks before it rewrote it, and the `**Tool Use:**` block is rewritten to hold the
//! input the call will run with. Their decisions take part in the chain as one resolver,
//! [`HOOKS_RESOLVER`] at [`HOOKS_PRIORITY`]: a denial wins over `ask`, `ask` over `allow`,
//! whatever the hooks' order; `flemma approval explain` shows it. A hook that errors or
//! panics is a warning ([`Event::Warning`](crate::Event::Warning)) and counts as no opinion.
//!
//! ```
//! use flemma_core::hooks::{HookEvent, PreToolUseAnswer, on};
//! use flemma_runtime::hooks::hook_fn;
//! use flemma_runtime::ToolRegistry;
//!
//! let registry = ToolRegistry::new();
//! let no_rm = hook_fn(on::PreToolUse, |call| {
//!     let command = call.input["command"].as_str().unwrap_or_default();
//!     if command.contains("rm -rf") {
//!         PreToolUseAnswer::deny("recursive deletes are not allowed here")
//!     } else {
//!         PreToolUseAnswer::pass()
//!     }
//! });
//! registry.register_hook(no_rm.named("no-rm")?.matcher("bash")?)?;
//! assert_eq!(registry.hooks().names(HookEvent::PreToolUse), ["no-rm"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod claude;
mod command;
mod config;
mod matcher;
mod registration;
pub(crate) mod resolver;
mod run;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

pub(crate) use claude::native_tool_name;
pub use claude::{claude_input, claude_tool_name, native_input};
pub use command::{CommandHook, DEFAULT_TIMEOUT};
pub use config::{Compat, HookConfigError, HooksConfig, from_config, from_frontmatter};
pub(crate) use flemma_core::hooks::{
    CompactTrigger, Hook, HookContext, HookError, HookEvent, HookKind, NotificationInput,
    PostCompactInput, PostToolUseAnswer, PostToolUseInput, PreCompactAnswer, PreCompactInput,
    PreToolUseAnswer, PreToolUseInput, PromptAnswer, SessionInput, StopAnswer, StopInput,
    SubagentInput, UserPromptSubmitInput, on,
};
pub use matcher::Matcher;
pub use registration::{DEFAULT_HOOK_PRIORITY, HookRegistration, Hooks};
pub use resolver::{HOOKS_PRIORITY, HOOKS_RESOLVER};

/// The chain's resolver for `hooks`.
pub(crate) fn resolver_for(hooks: &Hooks) -> impl flemma_approval::Resolver + 'static {
    resolver::HooksResolver(hooks.clone())
}
pub use run::{PostOutcome, PreCompactOutcome, PreOutcome, PromptOutcome, StopOutcome};

/// A hook made of a synchronous closure for one event; see [`hook_fn`].
pub struct FnHook<K, F> {
    f: F,
    kind: PhantomData<K>,
}

impl<K, F> fmt::Debug for FnHook<K, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnHook(..)")
    }
}

/// A hook from a closure answering one event: `hook_fn(on::PreToolUse, |call| …)`.
///
/// ```
/// use flemma_core::hooks::{PostToolUseAnswer, on};
/// use flemma_runtime::hooks::hook_fn;
/// let note = hook_fn(on::PostToolUse, |result| {
///     PostToolUseAnswer::pass().with_context(format!("{} bytes", result.result.len()))
/// });
/// let registration = note.named("sizes")?;
/// assert_eq!(registration.name(), "sizes");
/// # Ok::<(), flemma_core::hooks::HookError>(())
/// ```
pub fn hook_fn<K, F>(kind: K, f: F) -> FnHook<K, F>
where
    K: HookKind,
    F: Fn(&K::Input) -> K::Answer + Send + Sync + 'static,
{
    let _ = kind;
    FnHook {
        f,
        kind: PhantomData,
    }
}

impl<K, F> FnHook<K, F>
where
    K: HookKind,
    FnHook<K, F>: Hook + 'static,
{
    /// A registration of this hook for its event, under `name`, matching every tool.
    ///
    /// # Errors
    ///
    /// [`HookError`] for a name that is empty or holds whitespace.
    pub fn named(self, name: &str) -> Result<HookRegistration, HookError> {
        HookRegistration::new(name, [K::EVENT], self)
    }
}

macro_rules! fn_hooks {
    ($($kind:ident => $method:ident($input:ty) -> $answer:ty;)*) => {$(
        #[allow(clippy::unused_unit, reason = "the macro writes every event's answer type")]
        #[async_trait]
        impl<F> Hook for FnHook<on::$kind, F>
        where
            F: Fn(&$input) -> $answer + Send + Sync,
        {
            async fn $method(&self, event: &$input) -> Result<$answer, HookError> {
                Ok((self.f)(event))
            }
        }
    )*};
}

fn_hooks! {
    PreToolUse => pre_tool_use(PreToolUseInput) -> PreToolUseAnswer;
    PostToolUse => post_tool_use(PostToolUseInput) -> PostToolUseAnswer;
    PostToolUseFailure => post_tool_use_failure(PostToolUseInput) -> PostToolUseAnswer;
    UserPromptSubmit => user_prompt_submit(UserPromptSubmitInput) -> PromptAnswer;
    Stop => stop(StopInput) -> StopAnswer;
    SessionStart => session_start(SessionInput) -> ();
    SessionEnd => session_end(SessionInput) -> ();
    Notification => notification(NotificationInput) -> ();
    SubagentStart => subagent_start(SubagentInput) -> ();
    SubagentStop => subagent_stop(SubagentInput) -> ();
    PreCompact => pre_compact(PreCompactInput) -> PreCompactAnswer;
    PostCompact => post_compact(PostCompactInput) -> ();
}

/// `chain` with the hooks resolver ([`HOOKS_RESOLVER`] at [`HOOKS_PRIORITY`]) deciding for
/// `hooks`, when any of them listens to `PreToolUse` and the chain has no hooks resolver yet
/// (a host's own chain, or the hooks are a conversation's): so that no hook's decision is
/// skipped. Otherwise `chain` itself.
pub fn chain_with_hooks(
    chain: Arc<flemma_approval::Chain>,
    hooks: &Hooks,
) -> Arc<flemma_approval::Chain> {
    if chain.get(HOOKS_RESOLVER).is_some() || !hooks.has(HookEvent::PreToolUse) {
        return chain;
    }
    let mut with = (*chain).clone();
    // The name is a valid resolver name: registering cannot fail.
    let _ = with.register(HOOKS_RESOLVER, HOOKS_PRIORITY, resolver_for(hooks));
    Arc::new(with)
}
