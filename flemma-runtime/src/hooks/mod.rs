//! Hooks: code that runs before and after each tool call and at a session's edges, to block
//! or rewrite a call, change or annotate its result, add context, or keep a session going.
//!
//! A [`Hook`] has one async method per [`HookEvent`] (each defaults to "no opinion"); a
//! closure becomes one with [`hook_fn`]. Hooks are registered on a
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
//! use flemma_runtime::hooks::{HookEvent, PreToolUseAnswer, hook_fn, on};
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
mod event;
mod matcher;
pub(crate) mod resolver;
mod run;

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;

pub use claude::{claude_input, claude_tool_name, native_input};
pub use command::{CommandHook, DEFAULT_TIMEOUT};
pub use config::{Compat, HookConfigError, HooksConfig, from_config, from_frontmatter};
pub use event::{
    HookContext, HookEvent, NotificationInput, Permission, PostToolUseAnswer, PostToolUseInput,
    PreToolUseAnswer, PreToolUseInput, PromptAnswer, SessionInput, StopAnswer, StopInput,
    UserPromptSubmitInput,
};
pub use matcher::Matcher;
pub use resolver::{HOOKS_PRIORITY, HOOKS_RESOLVER};

/// The chain's resolver for `hooks`.
pub(crate) fn resolver_for(hooks: &Hooks) -> impl flemma_approval::Resolver + 'static {
    resolver::HooksResolver(hooks.clone())
}
pub use run::{PostOutcome, PreOutcome, PromptOutcome, StopOutcome};

/// Why a hook had no answer. The runner shows it as a warning and goes on without the hook.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl HookError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// An error with a message and its cause.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The message and its causes, `: `-joined.
    pub fn report(&self) -> String {
        let mut text = self.message.clone();
        let mut cause = std::error::Error::source(self);
        while let Some(error) = cause {
            text.push_str(": ");
            text.push_str(&error.to_string());
            cause = error.source();
        }
        text
    }
}

/// Code that runs at the [`HookEvent`]s it is registered for. Every method defaults to no
/// opinion, so a hook implements only the events it answers.
///
/// ```
/// use flemma_runtime::hooks::{Hook, HookError, PostToolUseAnswer, PostToolUseInput};
/// use async_trait::async_trait;
///
/// /// Tells the model that a write was formatted.
/// struct Formatted;
///
/// #[async_trait]
/// impl Hook for Formatted {
///     async fn post_tool_use(&self, event: &PostToolUseInput) -> Result<PostToolUseAnswer, HookError> {
///         Ok(if event.tool == "write" { PostToolUseAnswer::append("(formatted)") } else { PostToolUseAnswer::pass() })
///     }
/// }
/// ```
#[async_trait]
pub trait Hook: Send + Sync {
    /// A call about to be decided: allow, deny, ask, rewrite its input, add context.
    async fn pre_tool_use(&self, event: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
        let _ = event;
        Ok(PreToolUseAnswer::pass())
    }

    /// A call that succeeded, before its result is written.
    async fn post_tool_use(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        let _ = event;
        Ok(PostToolUseAnswer::pass())
    }

    /// A call that failed, before its error is written.
    async fn post_tool_use_failure(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        let _ = event;
        Ok(PostToolUseAnswer::pass())
    }

    /// A send carrying a new user message.
    async fn user_prompt_submit(
        &self,
        event: &UserPromptSubmitInput,
    ) -> Result<PromptAnswer, HookError> {
        let _ = event;
        Ok(PromptAnswer::pass())
    }

    /// The session is about to go idle.
    async fn stop(&self, event: &StopInput) -> Result<StopAnswer, HookError> {
        let _ = event;
        Ok(StopAnswer::pass())
    }

    /// A session starts.
    async fn session_start(&self, event: &SessionInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }

    /// A session ends.
    async fn session_end(&self, event: &SessionInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }

    /// A call waits for approval.
    async fn notification(&self, event: &NotificationInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }
}

#[async_trait]
impl<H: Hook + ?Sized> Hook for Arc<H> {
    async fn pre_tool_use(&self, event: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
        (**self).pre_tool_use(event).await
    }
    async fn post_tool_use(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        (**self).post_tool_use(event).await
    }
    async fn post_tool_use_failure(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        (**self).post_tool_use_failure(event).await
    }
    async fn user_prompt_submit(
        &self,
        event: &UserPromptSubmitInput,
    ) -> Result<PromptAnswer, HookError> {
        (**self).user_prompt_submit(event).await
    }
    async fn stop(&self, event: &StopInput) -> Result<StopAnswer, HookError> {
        (**self).stop(event).await
    }
    async fn session_start(&self, event: &SessionInput) -> Result<(), HookError> {
        (**self).session_start(event).await
    }
    async fn session_end(&self, event: &SessionInput) -> Result<(), HookError> {
        (**self).session_end(event).await
    }
    async fn notification(&self, event: &NotificationInput) -> Result<(), HookError> {
        (**self).notification(event).await
    }
}

/// The events [`hook_fn`] can wrap a closure for: a marker type per event, naming the
/// event's input and answer.
pub trait HookKind: Copy + Send + Sync + 'static {
    /// What the hook is given.
    type Input: Send + Sync;
    /// What it answers.
    type Answer: Send;
    /// The event.
    const EVENT: HookEvent;
}

/// The event markers of [`hook_fn`].
pub mod on {
    use super::{HookEvent, HookKind, event};

    macro_rules! kinds {
        ($($(#[$doc:meta])* $name:ident: $input:ty => $answer:ty;)*) => {$(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;
            impl HookKind for $name {
                type Input = $input;
                type Answer = $answer;
                const EVENT: HookEvent = HookEvent::$name;
            }
        )*};
    }

    kinds! {
        /// `PreToolUse`.
        PreToolUse: event::PreToolUseInput => event::PreToolUseAnswer;
        /// `PostToolUse`.
        PostToolUse: event::PostToolUseInput => event::PostToolUseAnswer;
        /// `PostToolUseFailure`.
        PostToolUseFailure: event::PostToolUseInput => event::PostToolUseAnswer;
        /// `UserPromptSubmit`.
        UserPromptSubmit: event::UserPromptSubmitInput => event::PromptAnswer;
        /// `Stop`.
        Stop: event::StopInput => event::StopAnswer;
        /// `SessionStart`.
        SessionStart: event::SessionInput => ();
        /// `SessionEnd`.
        SessionEnd: event::SessionInput => ();
        /// `Notification`.
        Notification: event::NotificationInput => ();
    }
}

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
/// use flemma_runtime::hooks::{PostToolUseAnswer, hook_fn, on};
/// let note = hook_fn(on::PostToolUse, |result| {
///     PostToolUseAnswer::pass().with_context(format!("{} bytes", result.result.len()))
/// });
/// let registration = note.named("sizes")?;
/// assert_eq!(registration.name(), "sizes");
/// # Ok::<(), flemma_runtime::hooks::HookError>(())
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
}

/// The default priority of a hook.
pub const DEFAULT_HOOK_PRIORITY: i32 = 50;

/// A hook with its name, events, matcher and priority.
#[derive(Clone)]
pub struct HookRegistration {
    name: String,
    events: u16,
    matcher: Matcher,
    priority: i32,
    /// Whether the hook reads tool names in Claude Code's vocabulary (its matcher matches
    /// `Bash` as well as `bash`).
    claude_names: bool,
    hook: Arc<dyn Hook>,
}

impl fmt::Debug for HookRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookRegistration")
            .field("name", &self.name)
            .field("events", &self.events().collect::<Vec<_>>())
            .field("matcher", &self.matcher.pattern())
            .field("priority", &self.priority)
            .finish_non_exhaustive()
    }
}

impl HookRegistration {
    /// `hook` under `name` for `events`, matching every tool, at
    /// [`DEFAULT_HOOK_PRIORITY`].
    ///
    /// # Errors
    ///
    /// [`HookError`] for a name that is empty or holds whitespace or control characters.
    pub fn new(
        name: &str,
        events: impl IntoIterator<Item = HookEvent>,
        hook: impl Hook + 'static,
    ) -> Result<Self, HookError> {
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(HookError::new(format!("invalid hook name {name:?}")));
        }
        Ok(Self {
            name: name.to_owned(),
            events: events.into_iter().fold(0, |bits, e| bits | e.bit()),
            matcher: Matcher::all(),
            priority: DEFAULT_HOOK_PRIORITY,
            claude_names: false,
            hook: Arc::new(hook),
        })
    }

    /// Only for tools `pattern` matches (a native [`Matcher`]).
    ///
    /// # Errors
    ///
    /// [`HookError`] for a pattern [`Matcher::new`] refuses.
    pub fn matcher(mut self, pattern: &str) -> Result<Self, HookError> {
        self.matcher = Matcher::new(pattern)?;
        Ok(self)
    }

    /// Only for tools `matcher` matches.
    #[must_use]
    pub fn with_matcher(mut self, matcher: Matcher) -> Self {
        self.matcher = matcher;
        self
    }

    /// Higher runs first (ties by name).
    #[must_use]
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    /// Its matcher also sees tool names in Claude Code's vocabulary (`Bash`, `Write`).
    #[must_use]
    pub fn claude_names(mut self, on: bool) -> Self {
        self.claude_names = on;
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its priority.
    pub fn get_priority(&self) -> i32 {
        self.priority
    }

    /// The events it listens to.
    pub fn events(&self) -> impl Iterator<Item = HookEvent> + '_ {
        HookEvent::ALL
            .into_iter()
            .filter(|e| self.events & e.bit() != 0)
    }

    /// Whether it listens to `event`.
    pub fn listens_to(&self, event: HookEvent) -> bool {
        self.events & event.bit() != 0
    }

    /// Whether it is asked about a call of `tool`.
    pub fn matches_tool(&self, tool: &str) -> bool {
        self.matcher.matches(tool)
            || (self.claude_names && self.matcher.matches(&claude_tool_name(tool)))
    }
}

/// The hooks of a registry, in priority order. Cheap to clone: clones share the set.
#[derive(Clone, Default)]
pub struct Hooks {
    set: Arc<RwLock<Arc<Vec<HookRegistration>>>>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.snapshot().iter()).finish()
    }
}

impl Hooks {
    /// The hooks now, in the order they run.
    pub fn snapshot(&self) -> Arc<Vec<HookRegistration>> {
        Arc::clone(&self.set.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Adds `hook`, replacing one of the same name; returns the one replaced.
    pub fn register(&self, hook: HookRegistration) -> Option<HookRegistration> {
        let mut slot = self.set.write().unwrap_or_else(PoisonError::into_inner);
        let mut set = (**slot).clone();
        let replaced = set
            .iter()
            .position(|h| h.name == hook.name)
            .map(|at| set.remove(at));
        let at = set
            .iter()
            .position(|h| {
                (std::cmp::Reverse(h.priority), &h.name)
                    > (std::cmp::Reverse(hook.priority), &hook.name)
            })
            .unwrap_or(set.len());
        set.insert(at, hook);
        *slot = Arc::new(set);
        replaced
    }

    /// Removes the hook `name`; returns whether there was one.
    pub fn unregister(&self, name: &str) -> bool {
        let mut slot = self.set.write().unwrap_or_else(PoisonError::into_inner);
        let before = slot.len();
        let set: Vec<_> = slot.iter().filter(|h| h.name != name).cloned().collect();
        let removed = set.len() != before;
        *slot = Arc::new(set);
        removed
    }

    /// The names of the hooks listening to `event`, in the order they run.
    pub fn names(&self, event: HookEvent) -> Vec<String> {
        self.snapshot()
            .iter()
            .filter(|h| h.listens_to(event))
            .map(|h| h.name.clone())
            .collect()
    }

    /// Whether any hook listens to `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.snapshot().iter().any(|h| h.listens_to(event))
    }

    /// These hooks with a conversation's own (those its frontmatter added, where the host
    /// allows it: [`from_frontmatter`]), in priority order. A conversation's hook never
    /// replaces one of these: one of the same name is left out. Without `extra` the result
    /// is this set itself (it shares later registrations); with it, a set of its own.
    ///
    /// ```
    /// use flemma_runtime::hooks::{HookEvent, HookRegistration, Hooks, PreToolUseAnswer, hook_fn, on};
    ///
    /// let host = Hooks::default();
    /// host.register(hook_fn(on::PreToolUse, |_| PreToolUseAnswer::pass()).named("guard")?);
    /// let conversation = vec![
    ///     hook_fn(on::Stop, |_| Default::default()).named("frontmatter:more")?,
    ///     hook_fn(on::Stop, |_| Default::default()).named("guard")?,
    /// ];
    /// let hooks = host.with_conversation(&conversation);
    /// assert_eq!(hooks.names(HookEvent::PreToolUse), ["guard"]);
    /// assert_eq!(hooks.names(HookEvent::Stop), ["frontmatter:more"]);
    /// assert!(!host.has(HookEvent::Stop));
    /// # Ok::<(), flemma_runtime::hooks::HookError>(())
    /// ```
    #[must_use]
    pub fn with_conversation(&self, extra: &[HookRegistration]) -> Hooks {
        self.merged(extra, false)
    }

    /// These hooks with `extra` added: a hook of `extra` replaces one of the same name when
    /// `replace`, else it is left out.
    pub(crate) fn merged(&self, extra: &[HookRegistration], replace: bool) -> Hooks {
        if extra.is_empty() {
            return self.clone();
        }
        let set = self.snapshot();
        let merged = Hooks {
            set: Arc::new(RwLock::new(Arc::clone(&set))),
        };
        for hook in extra {
            if replace || !set.iter().any(|h| h.name == hook.name) {
                merged.register(hook.clone());
            }
        }
        merged
    }
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
