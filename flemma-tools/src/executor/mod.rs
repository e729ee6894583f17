//! The executor: the three-phase cycle of spec §7.1 over one [`Conversation`].
//!
//! Phase 1 gives every tool use without a result a placeholder (`approved`, `pending`,
//! `denied`, or `aborted` in an interrupted response), all in one batch of edits. Phase 2
//! settles each lifecycle status: pasted results become final, denied, rejected and aborted
//! calls get their error texts, pending calls go to the host's [`Approver`] when it has one,
//! and approved calls run through the registry, at most `tools.max_concurrent` at a time,
//! each result written as soon as it is ready. Phase 3 (sending) is the caller's:
//! [`CycleReport::next`] says whether the conversation is ready to send.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use flemma_approval::Chain;
use flemma_ast::{Document, TextEdit};
use flemma_config::{Config, OptionDiagnostic, Options};
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

mod claim;
mod complete;
mod jobs;
mod phases;
mod plan;
mod run;
mod types;

pub use claim::CallClaim;
pub use types::{Answer, Approver, Completed, CycleReport, ExecutorError, Next, PendingCall};

use crate::actions;
use crate::conversation::{Conversation, Revision};
use crate::events::Event;
use crate::output::ToolOutput;
use crate::registry::ToolRegistry;
use crate::sandbox::{SandboxBackend, SandboxBackends};
pub(crate) use crate::transcript::EDIT_ATTEMPTS;
use crate::transcript::{Transcript, TranscriptBuilder};
use run::run_one;

/// What an executor is made of: set by [`ExecutorBuilder`], kept by [`Executor`].
struct Setup {
    /// The conversation's text, its options, its edits.
    transcript: Arc<Transcript>,
    /// The transcript's registry (a handle to the same tools).
    registry: ToolRegistry,
    chain: Option<Arc<Chain>>,
    approver: Option<Arc<dyn Approver>>,
    /// Asked before every cycle; a message refuses it.
    guard: Option<CycleGuard>,
}

/// A host's check before each cycle (see [`ExecutorBuilder::cycle_guard`]).
type CycleGuard = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// What a builder holds before the transcript is built.
struct Parts {
    transcript: TranscriptBuilder,
    sandbox: SandboxBackends,
    chain: Option<Arc<Chain>>,
    approver: Option<Arc<dyn Approver>>,
    guard: Option<CycleGuard>,
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

    /// A fixed approval chain (default: the registry's, read at every decision, so resolvers
    /// registered later take part).
    pub fn chain(mut self, chain: Arc<Chain>) -> Self {
        self.parts.chain = Some(chain);
        self
    }

    /// Asks `approver` about pending calls instead of waiting for the transcript.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.parts.approver = Some(approver);
        self
    }

    /// The sandbox backends `sandbox.backend` selects from when `sandbox.enabled` is on
    /// (default: none, so commands run unsandboxed, as spec §14.3 `auto` does without a
    /// backend; [`SandboxBackends::with_builtins`] adds bubblewrap).
    pub fn sandbox_backends(mut self, backends: SandboxBackends) -> Self {
        self.parts.sandbox = backends;
        self
    }

    /// Adds one sandbox backend at [`DEFAULT_PRIORITY`](crate::sandbox::DEFAULT_PRIORITY),
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
        let _ = backends.register(backend, crate::sandbox::DEFAULT_PRIORITY);
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
    /// use flemma_tools::{Event, Executor, MemoryConversation, ToolRegistry};
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

    /// Asks `guard` at the start of every [`cycle`](Executor::cycle): a message refuses the
    /// cycle with [`ExecutorError::Refused`] before anything is read or written. A
    /// flemma `Session` refuses its executor's cycles this way while its
    /// request is in flight (spec §7.5 step 2), so that no caller bypasses that guard.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use flemma_tools::{Executor, ExecutorError, MemoryConversation, ToolRegistry};
    ///
    /// let busy = Arc::new(AtomicBool::new(true));
    /// let flag = Arc::clone(&busy);
    /// let chat = Arc::new(MemoryConversation::new("@You:\nHi.\n"));
    /// let executor = Executor::builder(chat, ToolRegistry::new())
    ///     .cycle_guard(move || flag.load(Ordering::SeqCst).then(|| "busy".to_owned()))
    ///     .build();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// let refused = runtime.block_on(executor.cycle()).unwrap_err();
    /// assert!(matches!(refused, ExecutorError::Refused(m) if m == "busy"));
    /// busy.store(false, Ordering::SeqCst);
    /// assert!(runtime.block_on(executor.cycle()).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cycle_guard(
        mut self,
        guard: impl Fn() -> Option<String> + Send + Sync + 'static,
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
        } = self.parts;
        let transcript = Arc::new(transcript.sandbox_backends(sandbox).build());
        Executor {
            setup: Setup {
                registry: transcript.registry().clone(),
                transcript,
                chain,
                approver,
                guard,
            },
            jobs: Arc::new(crate::jobs::table::Jobs::new(Arc::clone(&events))),
            events,
            running: Mutex::new(HashMap::new()),
            recovered: std::sync::atomic::AtomicBool::new(false),
            claimant: claim::Claimant::new(),
            option_warnings: Mutex::new(Vec::new()),
        }
    }
}

/// Runs the tool cycle on one conversation. Share it behind an `Arc` to cancel calls from
/// another task while a cycle runs.
pub struct Executor {
    setup: Setup,
    events: Arc<crate::fanout::Fanout<Event>>,
    /// Foreground calls running now, by id.
    running: Mutex<HashMap<ToolUseId, RunningCall>>,
    /// Background jobs.
    jobs: Arc<crate::jobs::table::Jobs>,
    /// Whether orphan recovery ran (the first cycle runs it).
    recovered: std::sync::atomic::AtomicBool,
    /// This executor as the holder of call claims (one execution per call across hosts).
    claimant: claim::Claimant,
    /// The option warnings last emitted (each shown once while it lasts).
    option_warnings: Mutex<Vec<OptionDiagnostic>>,
}

/// A foreground call that runs now.
struct RunningCall {
    token: CancellationToken,
    tool: ToolName,
    /// Hands the call to the background; `None` for synchronous tools.
    handoff: Option<jobs::Handoff>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("registry", &self.setup.registry)
            .field("conversation_id", &self.setup.transcript.conversation_id())
            .finish_non_exhaustive()
    }
}

/// Everything a cycle needs from the options of the moment: the transcript's
/// [`Settings`](crate::transcript::Settings) (reached through `Deref`: the options, the
/// store, the sandbox, the writer's options) and the executor's own journal and claims.
pub(crate) struct Settings {
    shared: Arc<crate::transcript::Settings>,
    /// Where the conversation's call claims are kept.
    claims: claim::Table,
}

impl std::ops::Deref for Settings {
    type Target = crate::transcript::Settings;

    fn deref(&self) -> &crate::transcript::Settings {
        &self.shared
    }
}

/// A call ready to run.
struct Call {
    id: ToolUseId,
    tool: ToolName,
    input: Value,
}

/// A finished call on its way into the transcript.
struct Finished {
    id: ToolUseId,
    tool: ToolName,
    output: ToolOutput,
    save_to: Option<String>,
    overflow: Option<PathBuf>,
    /// Why the full output of a truncation could not be stored, when it could not.
    overflow_error: Option<Arc<flemma_store::StoreError>>,
}

impl Executor {
    /// Starts an executor for `conversation` with the tools of `registry`.
    pub fn builder(conversation: Arc<dyn Conversation>, registry: ToolRegistry) -> ExecutorBuilder {
        ExecutorBuilder {
            parts: Parts {
                transcript: Transcript::builder(conversation, registry),
                sandbox: SandboxBackends::new(),
                chain: None,
                approver: None,
                guard: None,
            },
            event_capacity: crate::fanout::DEFAULT_CAPACITY,
            forwards: Vec::new(),
        }
    }

    /// Follows what the executor does from now on: every event in order, in a queue of its
    /// own; one that falls [`event_capacity`](ExecutorBuilder::event_capacity) events behind
    /// reads [`Event::Missed`] in place of those that did not fit.
    pub fn subscribe(&self) -> crate::fanout::Subscription<Event> {
        self.events.subscribe()
    }

    fn emit(&self, event: Event) {
        // Nobody listening is fine.
        self.events.emit(event);
    }

    /// The conversation.
    pub fn conversation(&self) -> &Arc<dyn Conversation> {
        self.setup.transcript.conversation()
    }

    /// The conversation's text, options and edits, shared with the executor's clients (a
    /// session builds its requests from the same parse and the same evaluation).
    pub fn transcript(&self) -> &Arc<Transcript> {
        &self.setup.transcript
    }

    /// The conversation's store directory under `options` (what tools see as
    /// `$FLEMMA_TOOLS_STORE_PATH`); `None` when the store's path format does not render.
    pub fn store_directory(&self, options: &Options) -> Option<PathBuf> {
        self.setup.transcript.store_directory(options)
    }

    /// Whether the call `id` is running.
    pub fn is_running(&self, id: &str) -> bool {
        self.running_calls().contains_key(id)
    }

    fn running_calls(&self) -> std::sync::MutexGuard<'_, HashMap<ToolUseId, RunningCall>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the hand-over of a running foreground call: its tool, and `None` when the tool
    /// is synchronous.
    fn take_handoff(&self, id: &str) -> Option<(ToolName, Option<jobs::Handoff>)> {
        let mut running = self.running_calls();
        let call = running.get_mut(id)?;
        let handoff = call.handoff.take();
        let tool = call.tool.clone();
        if handoff.is_some() {
            running.remove(id);
        }
        Some((tool, handoff))
    }

    /// Cancels a running call or background job by its call id: it ends with `User aborted
    /// tool execution.` (spec §7.7). Returns whether it was running.
    pub fn cancel(&self, id: &str) -> bool {
        let foreground = self
            .running_calls()
            .get(id)
            .map(|call| call.token.cancel())
            .is_some();
        foreground || self.jobs.cancel_call(id)
    }

    /// Cancels every running call and background job.
    pub fn cancel_all(&self) {
        for call in self.running_calls().values() {
            call.token.cancel();
        }
        self.jobs.cancel_all();
    }

    /// Phase 1 then Phase 2 (spec §7.1): places placeholders, settles every lifecycle
    /// status and runs the approved calls, returning when their results are written.
    ///
    /// # Errors
    ///
    /// [`ExecutorError`] for faults of the harness: the conversation cannot be read or
    /// written, the frontmatter or options do not evaluate.
    pub async fn cycle(&self) -> Result<CycleReport, ExecutorError> {
        use tracing::Instrument as _;
        let span = tracing::debug_span!(
            "flemma.cycle",
            conversation = %self.setup.transcript.conversation_id()
        );
        if let Some(refusal) = self.setup.guard.as_ref().and_then(|guard| guard()) {
            return Err(ExecutorError::Refused(refusal));
        }
        async {
            // Tools still loading (an MCP server's list) must not be answered `Unknown tool`.
            self.setup.registry.ready().await;
            if !self.recovered.load(std::sync::atomic::Ordering::Relaxed) {
                self.recover().await?;
            }
            let settings = self.settings().await?;
            self.report_options(&settings.diagnostics)?;
            self.migrate_names().await?;
            // Calls whose host died mid-run get their error first.
            let lost = self.settle_claims(&settings).await?;
            let placed = self
                .phase_one(&settings)
                .instrument(tracing::debug_span!("flemma.phase_one"))
                .await?;
            let mut completed = lost;
            completed.extend(
                self.phase_two(&settings)
                    .instrument(tracing::debug_span!("flemma.phase_two"))
                    .await?,
            );
            // A delivery point (spec §8.5): no foreground call runs now.
            if self.running_calls().is_empty() {
                self.drain_jobs().await?;
            }
            let mut next = self.next_step().await?;
            // Read after the document: a call another host claims later was `(approved)` in
            // it, so `next` was not `send` then.
            if next != Next::Running && self.claimed_elsewhere(&settings).await {
                next = Next::Running;
            }
            tracing::debug!(
                placed = placed.len(),
                completed = completed.len(),
                ?next,
                "cycle done"
            );
            if next == Next::Idle {
                self.emit(Event::ConversationIdle);
            }
            Ok(CycleReport {
                placed,
                completed,
                next,
            })
        }
        .instrument(span)
        .await
    }

    /// Approves the pending call `id` (spec §7.1 `approve`).
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Action`] with the spec's texts (`Tool not found: <id>`, …).
    pub async fn approve(&self, id: &str) -> Result<(), ExecutorError> {
        self.edit(|doc| actions::approve(doc, id).map_err(ExecutorError::from))
            .await
    }

    /// Rejects the pending call `id`; a reason is written into its block as
    /// `User feedback: <reason>`, the error the model will be told (see
    /// [`reject`](crate::reject)).
    ///
    /// # Errors
    ///
    /// As [`Executor::approve`].
    pub async fn reject(&self, id: &str, message: Option<&str>) -> Result<(), ExecutorError> {
        // Only the writer's options: no store, no sandbox (and the evaluation is shared).
        let writer = self.setup.transcript.evaluated().await?.writer();
        self.edit(|doc| actions::reject(doc, id, message, writer).map_err(ExecutorError::from))
            .await
    }

    /// Approves every pending call.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Action`] with `No pending tools to approve` when none is pending.
    pub async fn approve_all_pending(&self) -> Result<(), ExecutorError> {
        self.edit(|doc| actions::approve_all_pending(doc).map_err(ExecutorError::from))
            .await
    }

    /// Appends whole lines at the end of the conversation (a message, a streamed response's
    /// completed lines), re-parsing only what they add.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Conversation`] when the conversation cannot be read or written.
    pub async fn append_lines(&self, text: &str) -> Result<(), ExecutorError> {
        let lines: Vec<String> = text
            .strip_suffix('\n')
            .unwrap_or(text)
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
            .collect();
        self.edit(|doc| Ok(vec![TextEdit::insert(doc.line_count + 1, lines.clone())]))
            .await
    }

    /// Reads the conversation, parses it (incrementally when possible) and hands the
    /// document to `f` (the [`Transcript`]'s).
    async fn with_document<T>(
        &self,
        f: impl FnOnce(&Document, Revision) -> T,
    ) -> Result<T, ExecutorError> {
        Ok(self.setup.transcript.read(f).await?)
    }

    /// Computes edits from the current document and applies them as one change, computing
    /// them again when the conversation changed in between (the [`Transcript`]'s loop).
    async fn edit(
        &self,
        mut f: impl FnMut(&Document) -> Result<Vec<TextEdit>, ExecutorError>,
    ) -> Result<(), ExecutorError> {
        self.edit_text(|doc, _| f(doc)).await
    }

    /// [`edit`](Self::edit) for edits that need the text as well.
    async fn edit_text(
        &self,
        f: impl FnMut(&Document, &str) -> Result<Vec<TextEdit>, ExecutorError>,
    ) -> Result<(), ExecutorError> {
        self.setup.transcript.edit(f).await.map(|_| ())
    }

    /// The conversation's options as the next cycle evaluates them: the host's layers, the
    /// frontmatter, the registry's tools ([`ToolRegistry::evaluate`]). A host shows its
    /// [`diagnostics`](crate::Evaluation::diagnostics) without running anything; a
    /// [`cycle`](Self::cycle) stops on its errors.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Conversation`], [`ExecutorError::Frontmatter`],
    /// [`ExecutorError::Config`] when the options do not evaluate at all.
    pub async fn evaluate_options(&self) -> Result<crate::Evaluation, ExecutorError> {
        Ok(self.setup.transcript.evaluated().await?.evaluation())
    }

    /// The options of the moment: the transcript's settings (evaluated once per revision of
    /// the frontmatter), the journal and the claims under its store.
    async fn settings(&self) -> Result<Settings, ExecutorError> {
        let shared = self.setup.transcript.settings().await?;
        let store_dir = shared.store.as_ref().and_then(|s| s.directory().ok());
        self.jobs.use_store_directory(store_dir.as_deref());
        let claims = claim::Table::of(self.conversation(), store_dir.as_deref());
        Ok(Settings { shared, claims })
    }
}
