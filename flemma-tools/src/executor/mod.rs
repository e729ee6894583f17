//! The executor: the three-phase cycle of spec §7.1 over one [`Conversation`].
//!
//! Phase 1 gives every tool use without a result a placeholder (`approved`, `pending`,
//! `denied`, or `aborted` in an interrupted response), all in one batch of edits. Phase 2
//! settles each lifecycle status: pasted results become final, denied, rejected and aborted
//! calls get their error texts, pending calls go to the host's [`Approver`] when it has one,
//! and approved calls run through the registry, at most `tools.max_concurrent` at a time,
//! each result written as soon as it is ready. Phase 3 (sending) is the caller's:
//! [`CycleReport::next`] says whether the conversation is ready to send.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use flemma_approval::{ApprovalContext, Chain, Decision, ToolCall};
use flemma_ast::writer::{self, ResultBody, WriterOptions};
use flemma_ast::{Document, IncrementalParser, Role, Segment, TextEdit, ToolStatus};
use flemma_config::{Config, OptionDiagnostic, Options};
use flemma_ids::{ToolName, ToolUseId};
use flemma_store::{SaveOutcome, Store};
use futures_util::FutureExt as _;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

mod claim;
mod jobs;
mod plan;
mod types;

pub(crate) use jobs::JobShared;

pub use claim::CallClaim;
pub use types::{Answer, Approver, Completed, CycleReport, ExecutorError, Next, PendingCall};

use crate::actions;
use crate::context::ExecutionContext;
use crate::conversation::{Conversation, ConversationError, Revision};
use crate::events::{Event, Placed};
use crate::messages as msg;
use crate::output::ToolOutput;
use crate::preview::{generic_preview, render_preview};
use crate::registry::ToolRegistry;
use crate::sandbox::{Sandbox, SandboxBackend, SandboxBackends, SandboxPolicy};
use crate::tool::Tool;
use plan::{Available, has_content, plan, tool_cwd};

/// How many times an edit is recomputed when the conversation keeps changing under it.
const EDIT_ATTEMPTS: usize = 8;
/// The width previews are rendered to in events.
const PREVIEW_WIDTH: usize = 120;

/// What an executor is made of: set by [`ExecutorBuilder`], kept by [`Executor`].
struct Setup {
    conversation: Arc<dyn Conversation>,
    registry: ToolRegistry,
    config: Config,
    chain: Option<Arc<Chain>>,
    approver: Option<Arc<dyn Approver>>,
    sandbox: SandboxBackends,
    conversation_id: String,
}

/// Builds an [`Executor`]; see [`Executor::builder`].
#[must_use]
pub struct ExecutorBuilder {
    setup: Setup,
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
        self.setup.config = config;
        self
    }

    /// A fixed approval chain (default: the registry's, read at every decision, so resolvers
    /// registered later take part).
    pub fn chain(mut self, chain: Arc<Chain>) -> Self {
        self.setup.chain = Some(chain);
        self
    }

    /// Asks `approver` about pending calls instead of waiting for the transcript.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.setup.approver = Some(approver);
        self
    }

    /// The sandbox backends `sandbox.backend` selects from when `sandbox.enabled` is on
    /// (default: none, so commands run unsandboxed, as spec §14.3 `auto` does without a
    /// backend; [`SandboxBackends::with_builtins`] adds bubblewrap).
    pub fn sandbox_backends(mut self, backends: SandboxBackends) -> Self {
        self.setup.sandbox = backends;
        self
    }

    /// Adds one sandbox backend at [`DEFAULT_PRIORITY`](crate::sandbox::DEFAULT_PRIORITY),
    /// replacing a backend of the same name.
    pub fn sandbox_backend(mut self, backend: Arc<dyn SandboxBackend>) -> Self {
        let mut backends = SandboxBackends::new();
        for (name, priority) in self.setup.sandbox.names() {
            if let Some(kept) = self
                .setup
                .sandbox
                .get(&name)
                .filter(|_| name != backend.name())
            {
                // Names are unique in `self.setup.sandbox`, so this cannot fail.
                let _ = backends.register(Arc::clone(kept), priority);
            }
        }
        let _ = backends.register(backend, crate::sandbox::DEFAULT_PRIORITY);
        self.setup.sandbox = backends;
        self
    }

    /// The conversation's id for store paths (`bufnr`; default `1`).
    pub fn conversation_id(mut self, id: impl Into<String>) -> Self {
        self.setup.conversation_id = id.into();
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

    /// The executor.
    pub fn build(self) -> Executor {
        let events = Arc::new(crate::fanout::Fanout::new(self.event_capacity));
        for forward in self.forwards {
            events.forward(forward);
        }
        Executor {
            setup: self.setup,
            jobs: Arc::new(JobShared::new(Arc::clone(&events))),
            events,
            cache: tokio::sync::Mutex::new(None),
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
    /// The parsed text at a revision.
    cache: tokio::sync::Mutex<Option<(Revision, IncrementalParser)>>,
    /// Foreground calls running now, by id.
    running: Mutex<HashMap<ToolUseId, RunningCall>>,
    /// Background jobs.
    jobs: Arc<JobShared>,
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
            .field("conversation_id", &self.setup.conversation_id)
            .finish_non_exhaustive()
    }
}

/// Everything a cycle needs from the options of the moment.
struct Settings {
    /// The host's layers with the frontmatter (the approval chain reads its op logs).
    config: Config,
    options: Arc<Options>,
    /// What is wrong with the names the options give (checked once the registry is ready).
    diagnostics: Vec<OptionDiagnostic>,
    writer: WriterOptions,
    /// The conversation's file, absolute and resolved ([`flemma_config::conversation_path`]).
    chat: Option<PathBuf>,
    store: Option<Arc<Store>>,
    sandbox: Sandbox,
    sandbox_available: bool,
    /// The job journal under the store directory.
    journal: Option<crate::jobs::journal::Journal>,
    /// Where the conversation's call claims are kept.
    claims: claim::Table,
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
            setup: Setup {
                conversation,
                registry,
                config: Config::new(),
                chain: None,
                approver: None,
                sandbox: SandboxBackends::new(),
                conversation_id: "1".to_owned(),
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
        &self.setup.conversation
    }

    /// The conversation's store directory under `options` (what tools see as
    /// `$FLEMMA_TOOLS_STORE_PATH`); `None` when the store's path format does not render.
    pub fn store_directory(&self, options: &Options) -> Option<PathBuf> {
        let chat = self.setup.conversation.path();
        Store::new(&options.tools.store, chat, &self.setup.conversation_id)
            .ok()?
            .directory()
            .ok()
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
        let span = tracing::debug_span!("flemma.cycle", conversation = %self.setup.conversation_id);
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
        let writer = self.settings().await?.writer;
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
    /// document to `f`.
    async fn with_document<T>(
        &self,
        f: impl FnOnce(&Document, Revision) -> T,
    ) -> Result<T, ExecutorError> {
        let snapshot = self.setup.conversation.snapshot().await?;
        let mut cache = self.cache.lock().await;
        let parser = refresh(&mut cache, &snapshot);
        Ok(f(parser.document(), snapshot.revision))
    }

    /// Computes edits from the current document and applies them as one change, computing
    /// them again when the conversation changed in between.
    async fn edit(
        &self,
        mut f: impl FnMut(&Document) -> Result<Vec<TextEdit>, ExecutorError>,
    ) -> Result<(), ExecutorError> {
        self.edit_text(|doc, _| f(doc)).await
    }

    /// [`edit`](Self::edit) for edits that need the text as well.
    async fn edit_text(
        &self,
        mut f: impl FnMut(&Document, &str) -> Result<Vec<TextEdit>, ExecutorError>,
    ) -> Result<(), ExecutorError> {
        for _ in 0..EDIT_ATTEMPTS {
            let snapshot = self.setup.conversation.snapshot().await?;
            let mut cache = self.cache.lock().await;
            let parser = refresh(&mut cache, &snapshot);
            let edits = f(parser.document(), parser.text())?;
            if edits.is_empty() {
                return Ok(());
            }
            let revision = snapshot.revision;
            // Let go of the text, so a conversation holding the only other reference can edit
            // it in place.
            drop(snapshot);
            match self.setup.conversation.apply(revision, &edits).await {
                Ok(applied) => {
                    if let Some((cached, parser)) = cache.as_mut() {
                        // Both apply the same edits as the same splices, so the texts agree;
                        // the length check catches a conversation that applied them otherwise.
                        if parser.apply_edits(&edits).is_err()
                            || parser.text().len() != applied.text.len()
                        {
                            parser.update(&applied.text);
                        }
                        *cached = applied.revision;
                    }
                    return Ok(());
                }
                Err(ConversationError::Stale { .. }) => {}
                Err(ConversationError::Edit(error)) => return Err(ExecutorError::Edit(error)),
                Err(other) => return Err(other.into()),
            }
        }
        Err(ExecutorError::Busy)
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
        Ok(self.evaluated().await?.1)
    }

    /// The host's layers plus the frontmatter, evaluated against the registry.
    async fn evaluated(&self) -> Result<(Config, crate::Evaluation), ExecutorError> {
        let frontmatter = self
            .with_document(|doc, _| {
                doc.frontmatter
                    .as_ref()
                    .map(|fm| (fm.language.clone(), fm.code.clone(), fm.span.start_line + 1))
            })
            .await?;
        let mut config = self.setup.config.clone();
        if let Some((language, code, line)) = frontmatter {
            config.apply_frontmatter(&language, &code, line)?;
        }
        let evaluation = self.setup.registry.evaluate(&mut config)?;
        Ok((config, evaluation))
    }

    /// Stops on the errors of the options (spec §5.4-§5.6: a tool set other than the one
    /// asked for is never run); emits each warning once while it lasts.
    fn report_options(&self, diagnostics: &[OptionDiagnostic]) -> Result<(), ExecutorError> {
        use flemma_config::Severity;
        let (errors, warnings): (Vec<_>, Vec<_>) = diagnostics
            .iter()
            .cloned()
            .partition(|d| d.severity() == Severity::Error);
        if !errors.is_empty() {
            return Err(flemma_config::ConfigError::Finalize { errors }.into());
        }
        let mut shown = self
            .option_warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *shown != warnings {
            for warning in &warnings {
                self.emit(Event::Warning(warning.to_string()));
            }
            *shown = warnings;
        }
        Ok(())
    }

    /// The options of the moment: the host's layers plus the conversation's frontmatter.
    async fn settings(&self) -> Result<Settings, ExecutorError> {
        let (config, evaluation) = self.evaluated().await?;
        let crate::Evaluation {
            options,
            diagnostics,
            ..
        } = evaluation;
        let options = Arc::new(options);
        // The one place the conversation's file is resolved for a cycle: the tools' working
        // directory and paths, the store and the sandbox's writable set all start from it.
        let chat = self
            .setup
            .conversation
            .path()
            .map(flemma_config::conversation_path);
        let store = Store::new(
            &options.tools.store,
            chat.as_deref(),
            &self.setup.conversation_id,
        )?;
        let journal = store
            .directory()
            .ok()
            .map(|dir| crate::jobs::journal::Journal::new(&dir));
        self.jobs.set_journal(journal.clone());
        let claims = claim::Table::of(&self.setup.conversation, store.directory().ok().as_deref());
        let sandbox_available = self.setup.sandbox.is_available(&options.sandbox);
        // The policy is resolved with the sandbox off too: its read-only files (the
        // conversation's, the options files loaded) hold either way.
        let store_dir = store.directory().ok();
        let policy = SandboxPolicy::for_conversation(
            &options.sandbox,
            chat.as_deref(),
            store_dir.as_deref(),
        )
        .protecting(&options.sandbox, config.protected_files());
        let sandbox = self.setup.sandbox.sandbox(&options.sandbox, policy);
        Ok(Settings {
            config,
            diagnostics,
            writer: WriterOptions {
                compact_headers: options.editing.compact_headers,
            },
            options,
            chat,
            store: Some(Arc::new(store)),
            sandbox,
            sandbox_available,
            journal,
            claims,
        })
    }

    /// Rewrites tool names written with the legacy `:` separator to `.` (one batch).
    async fn migrate_names(&self) -> Result<(), ExecutorError> {
        let mut migrated = Vec::new();
        self.edit_text(|doc, text| {
            migrated.clear();
            let mut edits = Vec::new();
            for message in &doc.messages {
                for tool_use in message.tool_uses().filter(|u| u.name.is_legacy()) {
                    let new = tool_use.name.migrated();
                    if let Some(edit) = rename_in_header(text, tool_use, &new) {
                        edits.push(edit);
                        migrated.push((tool_use.name.clone(), new));
                    }
                }
            }
            Ok(edits)
        })
        .await?;
        if !migrated.is_empty() {
            self.emit(Event::NamesMigrated(migrated));
        }
        Ok(())
    }

    /// Phase 1: a placeholder for every tool use without a result, in one batch.
    async fn phase_one(&self, settings: &Settings) -> Result<Vec<Placed>, ExecutorError> {
        let unanswered: Vec<(ToolUseId, ToolName, Value, bool)> = self
            .with_document(|doc, _| {
                let answered: foldhash::HashSet<&str> = doc
                    .messages
                    .iter()
                    .flat_map(flemma_ast::Message::tool_results)
                    .map(|r| r.tool_use_id.as_str())
                    .collect();
                let mut calls: Vec<(ToolUseId, ToolName, Value, bool)> = Vec::new();
                let mut listed: foldhash::HashSet<&str> = foldhash::HashSet::default();
                for message in doc.messages.iter().filter(|m| m.role == Role::Assistant) {
                    let aborted = message
                        .segments
                        .iter()
                        .any(|s| matches!(s, Segment::Aborted(_)));
                    for tool_use in message.tool_uses() {
                        if !answered.contains(tool_use.id.as_str())
                            && listed.insert(tool_use.id.as_str())
                        {
                            calls.push((
                                tool_use.id.clone(),
                                tool_use.name.clone(),
                                Value::Object(tool_use.input().clone()),
                                aborted,
                            ));
                        }
                    }
                }
                calls
            })
            .await?;
        if unanswered.is_empty() {
            return Ok(Vec::new());
        }
        let chain = self
            .setup
            .chain
            .clone()
            .unwrap_or_else(|| self.setup.registry.approval_chain());
        let mut placed = Vec::with_capacity(unanswered.len());
        for (id, tool, input, aborted) in unanswered {
            let status = if aborted {
                ToolStatus::Aborted
            } else {
                let call = ToolCall {
                    name: &tool,
                    input: &input,
                    id: Some(&id),
                };
                let ctx = ApprovalContext {
                    config: &settings.config,
                    options: &settings.options,
                    tools: &self.setup.registry,
                    sandbox: &Available(settings.sandbox_available),
                };
                let outcome = chain.decide(&call, &ctx).await;
                for failure in &outcome.failures {
                    self.emit(Event::Warning(format!(
                        "approval: resolver '{}' error: {}",
                        failure.resolver,
                        failure.error.report()
                    )));
                }
                match outcome.decision {
                    Decision::Approve => ToolStatus::Approved,
                    Decision::RequireApproval => ToolStatus::Pending,
                    Decision::Deny { .. } => ToolStatus::Denied,
                }
            };
            placed.push(Placed { id, tool, status });
        }
        let writer = settings.writer;
        self.edit(|doc| {
            // The placeholder batch skips uses that got a result meanwhile; a use that went
            // away (the text changed) is left out and the batch computed again.
            let batch: Vec<(&str, ToolStatus)> =
                placed.iter().map(|p| (p.id.as_str(), p.status)).collect();
            match writer::insert_placeholders(doc, &batch, writer) {
                Err(flemma_ast::AstError::UnknownToolUse { .. }) => {
                    let present: Vec<(&str, ToolStatus)> = batch
                        .into_iter()
                        .filter(|(id, _)| flemma_ast::find_tool_use_by_id(doc, id).is_some())
                        .collect();
                    writer::insert_placeholders(doc, &present, writer).map_err(ExecutorError::Edit)
                }
                other => other.map_err(ExecutorError::Edit),
            }
        })
        .await?;
        self.emit(Event::PlaceholdersPlaced(placed.clone()));
        Ok(placed)
    }

    /// Phase 2: settles every lifecycle status and runs the approved calls.
    async fn phase_two(&self, settings: &Settings) -> Result<Vec<Completed>, ExecutorError> {
        let plan = self
            .with_document(|doc, _| plan(doc, &self.running_calls()))
            .await?;
        let mut completed = Vec::new();
        if plan.protected > 0 {
            self.emit(Event::Warning(msg::edited_approved(plan.protected)));
        }
        // Pasted results, denied, rejected and aborted calls: one batch.
        let writer = settings.writer;
        if !plan.settle.is_empty() {
            self.edit(|doc| {
                let mut edits = Vec::new();
                for (id, _, body) in &plan.settle {
                    let edit = match body {
                        None => writer::set_status(doc, id.as_str(), None),
                        Some(body) => writer::write_result(doc, id.as_str(), body, writer),
                    };
                    match edit {
                        Ok(edit) => edits.push(edit),
                        // The block went away meanwhile: nothing to settle.
                        Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                        Err(error) => return Err(ExecutorError::Edit(error)),
                    }
                }
                Ok(edits)
            })
            .await?;
            for (id, tool, body) in &plan.settle {
                let success = !matches!(body, Some(ResultBody::Error { .. }));
                self.emit(Event::ToolCompleted {
                    id: id.clone(),
                    tool: tool.clone(),
                    success,
                });
                completed.push(Completed {
                    id: id.clone(),
                    tool: tool.clone(),
                    success,
                });
            }
        }
        // Pending calls go to the approver, when there is one.
        let mut run: VecDeque<Call> = plan.approved.into();
        if let Some(approver) = &self.setup.approver {
            for call in plan.pending {
                let preview = self.preview(&call.tool, &call.input);
                self.emit(Event::ApprovalAsked {
                    id: call.id.clone(),
                    tool: call.tool.clone(),
                    preview: preview.clone(),
                });
                let question = PendingCall {
                    id: call.id.clone(),
                    tool: call.tool.clone(),
                    input: call.input.clone(),
                    preview,
                };
                match approver.ask(&question).await {
                    Answer::Approve => run.push_back(call),
                    Answer::Reject(reason) => {
                        // The host's reason reaches the model as `User feedback: <reason>`.
                        let message = reason.filter(|r| !r.trim().is_empty()).map_or_else(
                            || msg::REJECTED.to_owned(),
                            |r| actions::rejection_feedback(&r),
                        );
                        let body = ResultBody::Error {
                            message: Some(message),
                            partial_output: None,
                        };
                        self.write_final(&call.id, &body, writer).await?;
                        self.emit(Event::ToolCompleted {
                            id: call.id.clone(),
                            tool: call.tool.clone(),
                            success: false,
                        });
                        completed.push(Completed {
                            id: call.id,
                            tool: call.tool,
                            success: false,
                        });
                    }
                }
            }
        }
        completed.extend(self.run_calls(run, settings).await?);
        Ok(completed)
    }

    /// Runs approved calls in document order, never more than `tools.max_concurrent` at a
    /// time (0 = no limit), writing each result as soon as it is ready.
    async fn run_calls(
        &self,
        mut queue: VecDeque<Call>,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let limit = match usize::try_from(settings.options.tools.max_concurrent) {
            Ok(0) | Err(_) => usize::MAX,
            Ok(limit) => limit,
        };
        // Calls finish in any order; the report lists them in document order.
        let order: HashMap<ToolUseId, usize> = queue
            .iter()
            .enumerate()
            .map(|(i, call)| (call.id.clone(), i))
            .collect();
        let mut completed = Vec::new();
        let mut tasks: JoinSet<Joined> = JoinSet::new();
        // The claims of the calls running now; one left here when the cycle ends early reads
        // as its host's gone, so the next cycle answers its call with an error.
        let mut held = HashMap::new();
        let locked = !queue.is_empty();
        if locked {
            self.setup.conversation.set_locked(true).await;
        }
        let result = async {
            loop {
                // The calls that start now lose their `(approved)` suffix in one edit
                // (spec §7.5 step 7), then run.
                let free = limit.saturating_sub(tasks.len()).min(queue.len());
                // Each is claimed first: a call another host claimed is left to it.
                let starting = self
                    .claim_calls(queue.drain(..free).collect(), settings)
                    .await?;
                let (starting, claims): (Vec<Call>, Vec<_>) = starting.into_iter().unzip();
                if !starting.is_empty() {
                    self.clear_suffixes(&starting).await?;
                }
                for (call, claim) in starting.into_iter().zip(claims) {
                    let id = call.id.clone();
                    if let Some((task, moved)) = self.start(call, settings).await? {
                        held.insert(id.clone(), claim);
                        tasks.spawn(run_movable(id, task, moved));
                    } else {
                        // A job now, which its journal keeps.
                        self.release_claim(claim, settings).await;
                    }
                }
                if tasks.is_empty() {
                    // Calls that went to the background take no slot: start the next ones.
                    if queue.is_empty() {
                        break;
                    }
                    continue;
                }
                let Some(joined) = tasks.join_next().await else {
                    break;
                };
                // Every other call that finished meanwhile is written with it, in one edit:
                // one re-parse and one write of the conversation per batch, not per call. Only
                // calls already finished join the batch, so no result waits for a slow one.
                let mut batch = Vec::new();
                let mut next = Some(joined);
                while let Some(joined) = next {
                    // Tasks catch their tools' panics, so a join error means the runtime is
                    // shutting down; nothing to write then.
                    match joined {
                        Ok(Joined::Done(finished)) => {
                            self.running_calls().remove(&finished.id);
                            let claim = held.remove(&finished.id).flatten();
                            batch.push((finished, claim));
                        }
                        Ok(Joined::Moved(id)) => {
                            self.release_claim(held.remove(&id).flatten(), settings)
                                .await;
                        }
                        Err(_) => {}
                        Ok(Joined::Failed(id)) => {
                            self.running_calls().remove(&id);
                        }
                    }
                    next = tasks.try_join_next();
                    if next.is_none() && !tasks.is_empty() {
                        // Let calls that are ready to end, end (without waiting for any that
                        // are not): they join this batch; stop when none did.
                        tokio::task::yield_now().await;
                        next = tasks.try_join_next();
                    }
                }
                if !batch.is_empty() {
                    completed.extend(self.finish_all(batch, settings).await?);
                }
            }
            Ok::<(), ExecutorError>(())
        }
        .await;
        if result.is_err() {
            tasks.abort_all();
            self.running_calls().clear();
        }
        if locked {
            self.setup.conversation.set_locked(false).await;
        }
        completed.sort_by_key(|c: &Completed| order.get(&c.id).copied());
        result.map(|()| completed)
    }

    /// Removes the `(approved)` suffix of calls about to start, in one edit.
    async fn clear_suffixes(&self, calls: &[Call]) -> Result<(), ExecutorError> {
        self.edit(|doc| {
            let mut edits = Vec::with_capacity(calls.len());
            let index = flemma_ast::ToolIndex::new(doc);
            for call in calls {
                // A re-run keeps its job id, so its Job Result is replaced in place (§7.5 5).
                let job = index
                    .tool_result(doc, call.id.as_str())
                    .and_then(|r| r.node.job_id().map(|j| format!("job={j}")));
                let cleared = match &job {
                    Some(modeline) => {
                        writer::set_modeline_in(doc, &index, call.id.as_str(), modeline)
                    }
                    None => writer::set_status_in(doc, &index, call.id.as_str(), None),
                };
                match cleared {
                    Ok(edit) => edits.push(edit),
                    // The block went away: the result puts it back.
                    Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                    Err(error) => return Err(ExecutorError::Edit(error)),
                }
            }
            Ok(edits)
        })
        .await
    }

    /// Prepares one call (spec §7.5): a result for unknown, unexecutable or duplicate calls,
    /// else the future that runs it.
    async fn start(
        &self,
        call: Call,
        settings: &Settings,
    ) -> Result<Option<(CallFuture, Moved)>, ExecutorError> {
        let Call {
            id,
            tool,
            mut input,
        } = call;
        let directives = input
            .as_object_mut()
            .map(flemma_schema::strip_harness_parameters)
            .unwrap_or_default();
        let refuse = |error: String| Finished {
            id: id.clone(),
            tool: tool.clone(),
            output: ToolOutput::error(error),
            save_to: None,
            overflow: None,
            overflow_error: None,
        };
        // A call that runs as a job already (its block was put back to `approved`, by an undo
        // say) is re-adopted: it gets its placeholder again, and no second run (spec §7.5
        // step 3).
        if let Some(job_id) = self.jobs.job_of(id.as_str()) {
            self.write_job_placeholder(&id, &job_id, settings).await?;
            return Ok(None);
        }
        let found = self.setup.registry.get(tool.as_str());
        let early = match &found {
            _ if self.is_running(id.as_str()) => Some(refuse(msg::already_executing(id.as_str()))),
            None => Some(refuse(msg::unknown_tool(tool.as_str()))),
            Some(t) if !t.definition().is_executable() => {
                Some(refuse(msg::not_executable(tool.as_str())))
            }
            Some(_) => None,
        };
        if let Some(finished) = early {
            return Ok(Some(ready(finished)));
        }
        let Some(found) = found else {
            return Ok(None);
        };
        let definition = found.definition();
        let backgroundable = definition.is_async()
            && !definition.has_capability(crate::Capability::DisablesBackground);
        if directives.background && backgroundable {
            let call = Call {
                id: id.clone(),
                tool: tool.clone(),
                input,
            };
            return match self
                .start_job(call, found, settings, directives.save_to)
                .await?
            {
                jobs::Started::Job => Ok(None),
                jobs::Started::Finished(finished) => Ok(Some(ready(finished))),
            };
        }
        let token = CancellationToken::new();
        let (sender, moved) = tokio::sync::oneshot::channel();
        self.running_calls().insert(
            id.clone(),
            RunningCall {
                token: token.clone(),
                tool: tool.clone(),
                handoff: backgroundable.then(|| jobs::Handoff {
                    token: token.clone(),
                    save_to: directives.save_to.clone(),
                    sender,
                }),
            },
        );
        let preview = self.preview(&tool, &input);
        self.emit(Event::ToolExecuting {
            id: id.clone(),
            tool: tool.clone(),
            preview,
        });
        let ctx = self
            .context(&id, &tool, found.definition(), settings, token.clone())
            .await?;
        let save_to = directives.save_to;
        let span = tracing::debug_span!("flemma.tool", id = %id, tool = %tool);
        let future = tracing::Instrument::instrument(
            run_one(found, id, tool, input, ctx, token, save_to),
            span,
        );
        Ok(Some((Box::pin(future), moved)))
    }

    async fn context(
        &self,
        id: &ToolUseId,
        tool: &ToolName,
        definition: &crate::ToolDefinition,
        settings: &Settings,
        token: CancellationToken,
    ) -> Result<ExecutionContext, ExecutorError> {
        let chat = settings.chat.as_deref();
        let mut builder = ExecutionContext::builder(id.clone(), tool.clone())
            .options(Arc::clone(&settings.options))
            .sandbox(settings.sandbox.clone())
            .cancellation(token)
            .jobs(Arc::clone(&self.jobs));
        if let Some(defaults) = definition.config_defaults() {
            builder = builder.tool_defaults(defaults.clone());
        }
        if let Some(cwd) = tool_cwd(&settings.options, tool, chat) {
            builder = builder.cwd(cwd);
        }
        if let Some(chat) = chat {
            builder = builder.filename(chat);
        }
        if let Some(store) = &settings.store {
            builder = builder.store(Arc::clone(store));
        }
        let snapshot = self.setup.conversation.snapshot().await?;
        builder = builder.text(snapshot.text);
        Ok(builder.build()?)
    }

    /// Completion (spec §7.6) of calls that finished together: store materialisation or
    /// `flemma.save_to` for each, then their results in one edit, then their claims released.
    async fn finish_all(
        &self,
        batch: Vec<(Finished, Option<claim::Held>)>,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let mut results = Vec::with_capacity(batch.len());
        let mut done = Vec::with_capacity(batch.len());
        for (finished, claim) in batch {
            let (body, completed) = self.result_of(finished, settings);
            results.push((completed.id.clone(), body));
            done.push((completed, claim));
        }
        self.write_finals(&results, settings.writer).await?;
        let mut completed = Vec::with_capacity(done.len());
        for (call, claim) in done {
            self.emit(Event::ToolCompleted {
                id: call.id.clone(),
                tool: call.tool.clone(),
                success: call.success,
            });
            self.release_claim(claim, settings).await;
            completed.push(call);
        }
        Ok(completed)
    }

    /// The result block's body of a finished call (store materialisation or
    /// `flemma.save_to` done), and what the report says of it.
    fn result_of(&self, done: Finished, settings: &Settings) -> (ResultBody, Completed) {
        let Finished {
            id,
            tool,
            output,
            save_to,
            overflow,
            overflow_error,
        } = done;
        if let Some(error) = overflow_error {
            self.emit(Event::Warning(format!("full output not stored: {error}")));
        }
        let success = output.is_success();
        let mut body = None;
        if let Some(store) = &settings.store {
            match (&save_to, &output) {
                (Some(dest), ToolOutput::Success(result)) => {
                    let text = result.to_text();
                    let sandbox = settings.sandbox.save_to_check();
                    body = Some(ResultBody::Success(
                        match store.save_to(dest, &text, sandbox) {
                            SaveOutcome::Saved { stub, .. } => stub,
                            SaveOutcome::NotSaved { content, error } => {
                                self.emit(Event::Warning(format!("flemma.save_to: {error}")));
                                content
                            }
                        },
                    ));
                }
                _ if overflow.is_none() && store.materializes() => {
                    let text = output.result_text();
                    let stored = if success {
                        flemma_store::ResultBody::Success { output: &text }
                    } else {
                        // The error and its partial output, already joined canonically.
                        flemma_store::ResultBody::Error {
                            error: &text,
                            partial_output: None,
                        }
                    };
                    if let Err(error) = store.materialize(&id, Some(&tool), &stored) {
                        self.emit(Event::Warning(format!("result not stored: {error}")));
                    }
                }
                _ => {}
            }
        }
        let body = body.unwrap_or_else(|| output.into_result_body());
        (body, Completed { id, tool, success })
    }

    /// Writes a final result, placing a placeholder first when the block went away.
    async fn write_final(
        &self,
        id: &ToolUseId,
        body: &ResultBody,
        writer: WriterOptions,
    ) -> Result<(), ExecutorError> {
        self.write_finals(&[(id.clone(), body.clone())], writer)
            .await
    }

    /// Writes final results in one edit; a result whose block went away gets a placeholder
    /// first (the placeholders of all such results in one more edit), then its result.
    async fn write_finals(
        &self,
        results: &[(ToolUseId, ResultBody)],
        writer: WriterOptions,
    ) -> Result<(), ExecutorError> {
        let mut pending: Vec<&(ToolUseId, ResultBody)> = results.iter().collect();
        let mut placed_again = false;
        loop {
            let mut missing = Vec::new();
            self.edit(|doc| {
                missing.clear();
                let mut edits = Vec::with_capacity(pending.len());
                // One scan for the batch, not one per result.
                let index = flemma_ast::ToolIndex::new(doc);
                for &entry in &pending {
                    let (id, body) = entry;
                    match writer::write_result_in(doc, &index, id.as_str(), body, writer) {
                        Ok(edit) => edits.push(edit),
                        // Put back below (once); after that, nowhere to write.
                        Err(flemma_ast::AstError::UnknownToolResult { .. }) => {
                            missing.push(entry);
                        }
                        Err(error) => return Err(ExecutorError::Edit(error)),
                    }
                }
                Ok(edits)
            })
            .await?;
            if missing.is_empty() || placed_again {
                return Ok(());
            }
            placed_again = true;
            self.edit(|doc| {
                let batch: Vec<(&str, ToolStatus)> = missing
                    .iter()
                    .map(|(id, _)| (id.as_str(), ToolStatus::Approved))
                    .collect();
                match writer::insert_placeholders(doc, &batch, writer) {
                    // A tool use itself is gone: nowhere to write its result.
                    Err(flemma_ast::AstError::UnknownToolUse { .. }) => {
                        let present: Vec<(&str, ToolStatus)> = batch
                            .into_iter()
                            .filter(|(id, _)| flemma_ast::find_tool_use_by_id(doc, id).is_some())
                            .collect();
                        writer::insert_placeholders(doc, &present, writer)
                            .map_err(ExecutorError::Edit)
                    }
                    other => other.map_err(ExecutorError::Edit),
                }
            })
            .await?;
            pending = missing;
        }
    }

    fn preview(&self, tool: &ToolName, input: &Value) -> String {
        let width = PREVIEW_WIDTH.saturating_sub(tool.as_str().len() + 2);
        let preview = self
            .setup
            .registry
            .get(tool.as_str())
            .and_then(|t| t.preview(input, width))
            .unwrap_or_else(|| generic_preview(input, width));
        render_preview(tool.as_str(), &preview, PREVIEW_WIDTH)
    }

    /// What the host should do now.
    async fn next_step(&self) -> Result<Next, ExecutorError> {
        self.with_document(|doc, _| {
            // A lifecycle status blocks sending when its tool use exists; a result block no
            // tool use answers to is left alone.
            let waiting = doc.messages.iter().enumerate().any(|(index, message)| {
                message.tool_results().any(|result| {
                    result.status.is_some_and(ToolStatus::is_lifecycle)
                        && doc.messages[..=index]
                            .iter()
                            .rev()
                            .any(|m| m.tool_uses().any(|u| u.id == result.tool_use_id))
                })
            });
            if !self.running_calls().is_empty() {
                return Next::Running;
            }
            if waiting {
                return Next::AwaitApproval;
            }
            match doc.messages.last() {
                Some(last) if last.role == Role::You && has_content(last) => Next::Send,
                _ => Next::Idle,
            }
        })
        .await
    }
}

/// The parser for `snapshot`, brought up to date.
fn refresh<'c>(
    cache: &'c mut Option<(Revision, IncrementalParser)>,
    snapshot: &crate::conversation::Snapshot,
) -> &'c mut IncrementalParser {
    let (revision, parser) = cache.get_or_insert_with(|| {
        (
            snapshot.revision,
            IncrementalParser::new(snapshot.text.as_str().to_owned()),
        )
    });
    if *revision != snapshot.revision {
        if parser.text() != snapshot.text.as_str() {
            parser.update(&snapshot.text);
        }
        *revision = snapshot.revision;
    }
    parser
}

/// The edit that renames a tool use in its header line, keeping everything else on the line.
fn rename_in_header(
    text: &str,
    tool_use: &flemma_ast::ToolUse,
    new: &ToolName,
) -> Option<TextEdit> {
    let line_no = tool_use.span.start_line;
    let line = text
        .split('\n')
        .nth(usize::try_from(line_no).ok()?.checked_sub(1)?)?;
    let line = line.strip_suffix('\r').unwrap_or(line);
    let old = format!("`{}`", tool_use.name);
    let at = line.find(&old)?;
    let renamed = format!("{}`{new}`{}", &line[..at], &line[at + old.len()..]);
    Some(TextEdit::replace(line_no, line_no, vec![renamed]))
}

/// How long after its [`Tool::time_limit`] a call is given up on: time for a tool that stops
/// its own work at the limit (`bash`: `SIGTERM`, a grace, `SIGKILL`) to report.
const GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

/// Runs one call, ending with `User aborted tool execution.` when cancelled, with the panic's
/// text when the tool panics, and with `Tool timed out after <n> seconds.` when it is still
/// running [`GIVE_UP_AFTER`] past its time limit.
async fn run_one(
    tool: Arc<dyn Tool>,
    id: ToolUseId,
    name: ToolName,
    input: Value,
    ctx: ExecutionContext,
    token: CancellationToken,
    save_to: Option<String>,
) -> Finished {
    let limit = tool.time_limit(&input, &ctx);
    let output = {
        let execute = AssertUnwindSafe(tool.execute(input, &ctx)).catch_unwind();
        let give_up = async {
            match limit {
                Some(limit) => tokio::time::sleep(limit.saturating_add(GIVE_UP_AFTER)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = token.cancelled() => ToolOutput::error(msg::ABORTED),
            result = execute => result.unwrap_or_else(|panic| {
                ToolOutput::error(crate::registry::panic_payload_text(panic.as_ref()))
            }),
            () = give_up => {
                // Whatever the tool still runs that watches its token stops too.
                token.cancel();
                tracing::warn!(?limit, "the tool did not finish in time; the call was given up on");
                ToolOutput::error(msg::tool_timeout(limit.map_or(0.0, |l| l.as_secs_f64())))
            }
        }
    };
    Finished {
        id,
        tool: name,
        output,
        save_to,
        overflow: ctx.overflow_path(),
        overflow_error: ctx.overflow_error(),
    }
}

/// A call's future.
type CallFuture = std::pin::Pin<Box<dyn Future<Output = Finished> + Send + 'static>>;

/// Receives the hand-over to the background: what to do with the call's result then.
type Moved = tokio::sync::oneshot::Receiver<Box<dyn FnOnce(Finished) + Send>>;

/// A call that ends at once.
fn ready(finished: Finished) -> (CallFuture, Moved) {
    // The sender goes at once, so the call cannot be moved.
    let (_, moved) = tokio::sync::oneshot::channel();
    (Box::pin(std::future::ready(finished)), moved)
}

/// How a foreground call's task ended for the cycle.
enum Joined {
    /// It finished: write its result.
    Done(Finished),
    /// It went to the background: its result goes to the job queue.
    Moved(ToolUseId),
    /// Its task failed (the runtime is shutting down).
    Failed(ToolUseId),
}

/// Runs a call in a task of its own, so that it can be handed to the background while it
/// runs; dropping this future (the cycle gave up) stops the call.
async fn run_movable(id: ToolUseId, call: CallFuture, moved: Moved) -> Joined {
    let mut handle = tokio::spawn(call);
    let mut guard = AbortOnDrop(Some(handle.abort_handle()));
    tokio::select! {
        joined = &mut handle => {
            guard.0 = None;
            joined.map_or(Joined::Failed(id), Joined::Done)
        }
        Ok(complete) = moved => {
            guard.0 = None;
            tokio::spawn(async move {
                if let Ok(finished) = handle.await {
                    complete(finished);
                }
            });
            Joined::Moved(id)
        }
    }
}

/// Aborts a task when dropped while armed.
struct AbortOnDrop(Option<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}
