//! A hook with its name, events, matcher and priority ([`HookRegistration`]), and the set of
//! them a registry holds ([`Hooks`]).

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

use super::claude::claude_tool_name;
use super::matcher::Matcher;
use flemma_core::hooks::Hook;
use flemma_core::hooks::HookError;
use flemma_core::hooks::HookEvent;

/// The default priority of a hook.
pub const DEFAULT_HOOK_PRIORITY: i32 = 50;

/// A hook with its name, events, matcher and priority.
#[derive(Clone)]
pub struct HookRegistration {
    pub(super) name: String,
    events: u16,
    matcher: Matcher,
    priority: i32,
    /// Whether the hook reads tool names in Claude Code's vocabulary (its matcher matches
    /// `Bash` as well as `bash`).
    claude_names: bool,
    pub(super) hook: Arc<dyn Hook>,
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
            events: events.into_iter().fold(0, |bits, e| bits | bit(e)),
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
            .filter(|e| self.events & bit(*e) != 0)
    }

    /// Whether it listens to `event`.
    pub fn listens_to(&self, event: HookEvent) -> bool {
        self.events & bit(event) != 0
    }

    /// Whether it is asked about a call of `tool`.
    pub fn matches_tool(&self, tool: &str) -> bool {
        self.matcher.matches(tool)
            || (self.claude_names && self.matcher.matches(&claude_tool_name(tool)))
    }
}

/// The hooks of a registry (or of one conversation), in priority order. Cheap to clone:
/// clones share the set. A host reads it ([`ToolRegistry::hooks`](crate::ToolRegistry::hooks),
/// [`Executor::hooks`](crate::Executor::hooks)); it adds to it in one way per scope:
/// [`ToolRegistry::register_hook`](crate::ToolRegistry::register_hook) for every conversation of
/// the registry, [`ExecutorBuilder::hook`](crate::ExecutorBuilder::hook) for one.
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

    /// Adds `hook`, replacing one of the same name; returns the one replaced. Crate-private:
    /// a host registers a hook on its scope, [`ToolRegistry::register_hook`] (every
    /// conversation of the registry) or [`ExecutorBuilder::hook`] (one conversation), so that
    /// every registration has the same effect (a `PreToolUse` hook joins the approval chain).
    ///
    /// [`ToolRegistry::register_hook`]: crate::ToolRegistry::register_hook
    /// [`ExecutorBuilder::hook`]: crate::ExecutorBuilder::hook
    pub(crate) fn register(&self, hook: HookRegistration) -> Option<HookRegistration> {
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

    /// Removes the hook `name`; returns whether there was one (a host calls
    /// [`ToolRegistry::unregister_hook`](crate::ToolRegistry::unregister_hook)).
    pub(crate) fn unregister(&self, name: &str) -> bool {
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
    /// allows it: [`from_frontmatter`](super::from_frontmatter)), in priority order. A
    /// conversation's hook never replaces one of these: one of the same name is left out.
    /// Without `extra` the result is this set itself (it shares later registrations); with
    /// it, a set of its own.
    ///
    /// ```
    /// use flemma_core::hooks::{HookEvent, PreToolUseAnswer, on};
    /// use flemma_runtime::ToolRegistry;
    /// use flemma_runtime::hooks::hook_fn;
    ///
    /// let registry = ToolRegistry::new();
    /// registry.register_hook(hook_fn(on::PreToolUse, |_| PreToolUseAnswer::pass()).named("guard")?)?;
    /// let host = registry.hooks();
    /// let conversation = vec![
    ///     hook_fn(on::Stop, |_| Default::default()).named("frontmatter:more")?,
    ///     hook_fn(on::Stop, |_| Default::default()).named("guard")?,
    /// ];
    /// let hooks = host.with_conversation(&conversation);
    /// assert_eq!(hooks.names(HookEvent::PreToolUse), ["guard"]);
    /// assert_eq!(hooks.names(HookEvent::Stop), ["frontmatter:more"]);
    /// assert!(!host.has(HookEvent::Stop));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
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

/// `event`'s bit in a registration's set of events: its place in [`HookEvent::ALL`].
fn bit(event: HookEvent) -> u16 {
    HookEvent::ALL
        .iter()
        .position(|e| *e == event)
        .map_or(0, |at| 1 << at)
}
