//! [`ExecutorBuilder`]: what an [`Executor`] is made of, set before it is built.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use flemma_approval::Chain;
use flemma_config::Config;

use super::claim::table::Claimant;
use super::state::{CycleGuard, Executor, Setup};
use super::types::Refusal;
use crate::conversation::Conversation;
use crate::events::Event;
use crate::placements::{Placements, TranscriptApprovals};
use crate::registry::ToolRegistry;
use crate::transcript::{Transcript, TranscriptBuilder};
use flemma_core::Approver;
use flemma_core::sandbox::{SandboxBackend, SandboxBackends};

/// What a builder holds before the transcript is built.
struct Parts {
    transcript: TranscriptBuilder,
    sandbox: SandboxBackends,
    chain: Option<Arc<Chain>>,
    approver: Option<Arc<dyn Approver>>,
    guard: Option<CycleGuard>,
    hooks: crate::hooks::Hooks,
    placements: Option<Arc<dyn Placements>>,
    approvals: TranscriptApprovals,
    delegate: Option<Arc<dyn flemma_core::Delegate>>,
}

/// Builds an [`Executor`]; see [`Executor::builder`].
#[must_use]
pub struct ExecutorBuilder {
    parts: Parts,
    /// Each subscriber's queue, in events.
    event_capacity: usize,
    /// Functions every event is forwarded to.
    forwards: Vec<crate::fanout::Forward<Event>>,
}

impl std::fmt::Debug for ExecutorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorBuilder").finish_non_exhaustive()
    }
}

impl ExecutorBuilder {
    /// The options below the conversation's frontmatter (defaults, `flemma.toml`, runtime
    /// overrides); default: the built-in defaults.
    pub fn config(mut self, config: Config) -> Self {
        self.parts.transcript = self.parts.transcript.config(config);
        self
    }

    /// What this executor's calls may ask of a session beyond their own work: child
    /// conversations ([`ExecutionContext::delegate`](flemma_core::ExecutionContext::delegate),
    /// for the `agent` tool). [`SessionBuilder::subagents`](crate::SessionBuilder::subagents)
    /// sets it; without it the `agent` tool answers that subagents need a session.
    pub fn delegate(mut self, delegate: Arc<dyn flemma_core::Delegate>) -> Self {
        self.parts.delegate = Some(delegate);
        self
    }

    /// A fixed approval chain (default: the registry's, read at every decision, so resolvers
    /// registered later take part).
    pub fn chain(mut self, chain: Arc<Chain>) -> Self {
        self.parts.chain = Some(chain);
        self
    }

    /// Adds a hook for this executor's conversation alone (the registry's hooks run for every
    /// conversation of the registry; see [`ToolRegistry::register_hook`]). It runs beside the
    /// registry's, in priority order, and replaces a registry hook of the same name here.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flemma_core::hooks::{PreToolUseAnswer, on};
    /// use flemma_runtime::hooks::hook_fn;
    /// use flemma_runtime::{Executor, MemoryConversation, ToolRegistry};
    ///
    /// let guard = hook_fn(on::PreToolUse, |_| PreToolUseAnswer::deny("read-only session"));
    /// let chat = Arc::new(MemoryConversation::new("@You:\nHi.\n"));
    /// let executor = Executor::builder(chat, ToolRegistry::new())
    ///     .hook(guard.named("read-only")?)
    ///     .build();
    /// # Ok::<(), flemma_core::hooks::HookError>(())
    /// ```
    pub fn hook(self, hook: crate::hooks::HookRegistration) -> Self {
        self.parts.hooks.register(hook);
        self
    }

    /// Asks `approver` about pending calls instead of waiting for the transcript.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.parts.approver = Some(approver);
        self
    }

    /// Whether an `(approved)` written in the transcript approves a call by itself (default
    /// [`TranscriptApprovals::Placed`]: only on calls this host placed or a person approved
    /// through it; see [`crate::placements`]). [`TranscriptApprovals::Trusted`] runs every
    /// `(approved)` block, as the Flemma plugin does.
    pub fn transcript_approvals(mut self, approvals: TranscriptApprovals) -> Self {
        self.parts.approvals = approvals;
        self
    }

    /// Where this executor remembers the calls it placed for a person's decision (default:
    /// the conversation's [`placements`](Conversation::placements), else a
    /// [`FilePlacements`](crate::placements::FilePlacements) in the user's state directory
    /// for a conversation with a file, else the process's
    /// [`MemoryPlacements`](crate::placements::MemoryPlacements)). A host that keeps its
    /// conversations in a database and rebuilds executors gives its own, kept beside them.
    pub fn placements(mut self, placements: Arc<dyn Placements>) -> Self {
        self.parts.placements = Some(placements);
        self
    }

    /// The sandbox backends `sandbox.backend` selects from when `sandbox.enabled` is on
    /// (default: [`flemma_builtins::sandbox_backends`], bubblewrap where it works). With none
    /// available (`SandboxBackends::new()`, or no bubblewrap here) commands run unconfined and
    /// `bash` is not approved as sandboxed, while the file tools keep to the writable set in
    /// process. No sandbox at all is the host's choice of the option: `sandbox.enabled = false`
    /// in its options (`Config::set(Layer::Setup, "sandbox.enabled", false)`).
    pub fn sandbox_backends(mut self, backends: SandboxBackends) -> Self {
        self.parts.sandbox = backends;
        self
    }

    /// Adds one sandbox backend at [`DEFAULT_PRIORITY`](flemma_core::sandbox::DEFAULT_PRIORITY),
    /// replacing a backend of the same name.
    pub fn sandbox_backend(mut self, backend: Arc<dyn SandboxBackend>) -> Self {
        let mut backends = SandboxBackends::new();
        for (name, priority) in self.parts.sandbox.names() {
            if let Some(kept) = self
                .parts
                .sandbox
                .get(&name)
                .filter(|_| name != backend.name())
            {
                // Names are unique in `self.setup.sandbox`, so this cannot fail.
                let _ = backends.register(Arc::clone(kept), priority);
            }
        }
        let _ = backends.register(backend, flemma_core::sandbox::DEFAULT_PRIORITY);
        self.parts.sandbox = backends;
        self
    }

    /// The conversation's id for store paths (`bufnr`; default
    /// [`default_conversation_id`](crate::transcript::default_conversation_id): `1` for a
    /// file, an id of its own for each conversation without one).
    pub fn conversation_id(mut self, id: impl Into<String>) -> Self {
        self.parts.transcript = self.parts.transcript.conversation_id(id);
        self
    }

    /// How many events each [`subscribe`](Executor::subscribe)r's queue holds before it
    /// misses some and reads [`Event::Missed`] instead (default
    /// [`fanout::DEFAULT_CAPACITY`](crate::fanout::DEFAULT_CAPACITY)).
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// Calls `forward` with every event, as it is emitted and in order, from the executor's
    /// first event on: nothing queues, nothing is missed (a session forwards the executor's
    /// events into its own stream this way). It runs on the emitting task under the
    /// executor's event lock: it must be quick and must not block.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use flemma_runtime::{Event, Executor, MemoryConversation, ToolRegistry};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let into = Arc::clone(&seen);
    /// let chat = Arc::new(MemoryConversation::new(
    ///     "@Assistant:\n**Tool Use:** `nope` (`toolu_1`)\n```json\n{}\n```\n",
    /// ));
    /// let executor = Executor::builder(chat, ToolRegistry::new())
    ///     .on_event(move |event: &Event| into.lock().unwrap().push(event.clone()))
    ///     .build();
    /// let mut events = executor.subscribe();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// runtime.block_on(executor.cycle())?;
    /// let queued: Vec<Event> = std::iter::from_fn(|| events.try_recv()).collect();
    /// assert!(!queued.is_empty());
    /// assert_eq!(*seen.lock().unwrap(), queued);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_event(mut self, forward: impl Fn(&Event) + Send + Sync + 'static) -> Self {
        self.forwards.push(Arc::new(forward));
        self
    }

    /// Asks `guard` at the start of every [`cycle`](Executor::cycle): a [`Refusal`] refuses
    /// the cycle with [`ExecutorError::Refused`](super::ExecutorError::Refused) before anything
    /// is read or written. A flemma `Session` refuses its executor's cycles this way while
    /// its request is in flight, so that no caller bypasses that guard.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use flemma_runtime::{Executor, ExecutorError, MemoryConversation, Refusal, ToolRegistry};
    ///
    /// let busy = Arc::new(AtomicBool::new(true));
    /// let flag = Arc::clone(&busy);
    /// let chat = Arc::new(MemoryConversation::new("@You:\nHi.\n"));
    /// let executor = Executor::builder(chat, ToolRegistry::new())
    ///     .cycle_guard(move || {
    ///         flag.load(Ordering::SeqCst).then(|| Refusal::Host("the host is busy".into()))
    ///     })
    ///     .build();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// let refused = runtime.block_on(executor.cycle()).unwrap_err();
    /// assert!(matches!(refused, ExecutorError::Refused(Refusal::Host(_))));
    /// assert_eq!(refused.to_string(), "the host is busy");
    /// busy.store(false, Ordering::SeqCst);
    /// assert!(runtime.block_on(executor.cycle()).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cycle_guard(
        mut self,
        guard: impl Fn() -> Option<Refusal> + Send + Sync + 'static,
    ) -> Self {
        self.parts.guard = Some(Arc::new(guard));
        self
    }

    /// The executor.
    pub fn build(self) -> Executor {
        let events = Arc::new(crate::fanout::Fanout::new(self.event_capacity));
        for forward in self.forwards {
            events.forward(forward);
        }
        let Parts {
            transcript,
            sandbox,
            chain,
            approver,
            guard,
            hooks,
            placements,
            approvals,
            delegate,
        } = self.parts;
        let transcript = Arc::new(transcript.sandbox_backends(sandbox).build());
        Executor {
            setup: Setup {
                registry: transcript.registry().clone(),
                transcript,
                chain,
                approver,
                guard,
                hooks: hooks.snapshot(),
                placements,
                approvals,
                delegate,
            },
            jobs: Arc::new(crate::jobs::table::Jobs::new(Arc::clone(&events))),
            events,
            running: Mutex::new(HashMap::new()),
            recovered: std::sync::atomic::AtomicBool::new(false),
            claimant: Claimant::new(),
            option_warnings: Mutex::new(Vec::new()),
            hook_notes: Mutex::new(HashMap::new()),
            decided: Mutex::new(HashMap::new()),
        }
    }
}

impl Executor {
    /// Starts an executor for `conversation` with the tools of `registry`.
    pub fn builder(conversation: Arc<dyn Conversation>, registry: ToolRegistry) -> ExecutorBuilder {
        ExecutorBuilder {
            parts: Parts {
                transcript: Transcript::builder(conversation, registry),
                sandbox: flemma_builtins::sandbox_backends(),
                chain: None,
                approver: None,
                hooks: crate::hooks::Hooks::default(),
                guard: None,
                placements: None,
                approvals: TranscriptApprovals::default(),
                delegate: None,
            },
            event_capacity: crate::fanout::DEFAULT_CAPACITY,
            forwards: Vec::new(),
        }
    }
}
