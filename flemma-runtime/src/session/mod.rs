//! [`Session`]: the agent loop over one conversation (the tool cycle's Phase 3, and autopilot).
//!
//! A run alternates the tool cycle (the [`Executor`]: placeholders through the approval
//! chain, approved calls run, results written) and requests to a [`Provider`] whose response
//! streams into the conversation as `.chat` text, until the conversation is idle, a call waits
//! for approval, `max_turns` is exceeded or the user cancels.

mod autopilot;
mod compact;
mod delegate;
mod error;
mod events;
mod hooked;
mod respond;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::transcript::Transcript;
use crate::{
    Conversation, CycleReport, Executor, ExecutorBuilder, ExecutorError, Refusal, ToolRegistry,
};
use flemma_ast::Role;
use flemma_providers::{MiniJinjaEngine, Provider, TemplateEngine};
use tokio_util::sync::CancellationToken;

pub use autopilot::{AutopilotState, Stop};
pub use error::SessionError;
pub use events::{SessionEvent, SessionEvents};

use autopilot::{Action, AtRest, Autopilot, Rest, Trigger};
use events::Subscribers;

/// What [`Session::cancel`] cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// The request in flight (the abort marker is written).
    Request,
    /// The running tools (`User aborted tool execution.`).
    Tools,
    /// The wait for background jobs and the resume it would schedule (the jobs go on; their
    /// results are delivered at the next cycle).
    Resume,
    /// Nothing was running.
    Nothing,
}

/// Builds a [`Session`]; see [`Session::builder`].
///
/// Everything about the tool cycle (the options below the frontmatter, the approval chain,
/// the approver, the sandbox backends, the conversation's store id) is set on the
/// [`ExecutorBuilder`] the session is built from ([`Session::from_executor`],
/// [`SessionBuilder::executor`]); this builder holds only what is the
/// session's own: the provider, the turn limit, the template engine, the flush interval,
/// the wait for background jobs and the event queue.
#[must_use]
pub struct SessionBuilder {
    executor: ExecutorBuilder,
    provider: Option<Arc<dyn Provider>>,
    max_turns: Option<u64>,
    engine: Arc<dyn TemplateEngine>,
    flush_interval: Duration,
    wait_for_jobs: bool,
    event_capacity: usize,
    /// The subagents the session's calls may start, and this session's depth among them.
    subagents: Option<(crate::agents::Subagents, u32)>,
    /// The models' prices and sizes.
    models: Arc<flemma_providers::ModelTable>,
    /// The session whose `agent` call this one runs, if any: its usage and budgets count
    /// this one's requests.
    parent: Option<std::sync::Weak<Inner>>,
    /// The host's budgets, besides the options' (`budget.*`).
    budget: flemma_config::BudgetOptions,
    /// The subagent this session runs (its definition's name), for its spans.
    agent: Option<String>,
}

impl std::fmt::Debug for SessionBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("provider", &self.provider)
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

impl SessionBuilder {
    fn new(executor: ExecutorBuilder, provider: Option<Arc<dyn Provider>>) -> Self {
        Self {
            executor,
            provider,
            max_turns: None,
            engine: Arc::new(MiniJinjaEngine::new()),
            flush_interval: Duration::from_millis(100),
            wait_for_jobs: true,
            event_capacity: crate::fanout::DEFAULT_CAPACITY,
            subagents: None,
            models: flemma_providers::ModelTable::builtin(),
            parent: None,
            budget: flemma_config::BudgetOptions::default(),
            agent: None,
        }
    }

    /// The host's budgets for this session, besides the options' (`budget.run.*`,
    /// `budget.conversation.*`): a request must fit both, so neither the options nor a
    /// conversation can raise them. The run stops before a request that would cross one
    /// ([`Stop::BudgetReached`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flemma_config::BudgetOptions;
    /// use flemma_providers::{ScriptedProvider, ScriptedUsage, Turn};
    /// use flemma_runtime::{MemoryConversation, Session, Stop, ToolRegistry};
    ///
    /// let mut budget = BudgetOptions::default();
    /// budget.conversation.max_tokens = Some(1_000);
    /// let spent = Turn {
    ///     usage: Some(ScriptedUsage { input_tokens: Some(1_000), ..Default::default() }),
    ///     ..Turn::text("Hello.")
    /// };
    /// let chat = Arc::new(MemoryConversation::new("@You:\nHi.\n"));
    /// let provider = Arc::new(ScriptedProvider::new([spent, Turn::text("Again.")]));
    /// let session = Session::builder(chat.clone(), ToolRegistry::new(), provider)
    ///     .budget(budget)
    ///     .build();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// assert_eq!(runtime.block_on(session.run())?, Stop::Finished);
    /// chat.set_text(chat.text() + "More.\n");
    /// // The conversation spent its 1,000 tokens: the next request is not sent.
    /// assert_eq!(runtime.block_on(session.run())?, Stop::BudgetReached);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget(mut self, budget: flemma_config::BudgetOptions) -> Self {
        self.budget = budget;
        self
    }

    /// The session whose `agent` call this one runs (see [`Inner::parent`]), running the
    /// subagent `agent`.
    fn parent(mut self, parent: std::sync::Weak<Inner>, agent: &str) -> Self {
        self.parent = Some(parent);
        self.agent = Some(agent.to_owned());
        self
    }

    /// The table of models whose prices cost each request (default: the built-in table,
    /// [`ModelTable::builtin`](flemma_providers::ModelTable::builtin)); a host's prices go
    /// here ([`ModelTable::with_overrides`](flemma_providers::ModelTable::with_overrides)
    /// with `[models]` of `flemma.toml`).
    pub fn models(mut self, models: Arc<flemma_providers::ModelTable>) -> Self {
        self.models = models;
        self
    }

    /// Lends this session to the `agent` calls of its conversation: each runs a subagent of
    /// `subagents` as a child session, with this session's provider, its tools narrowed to the
    /// agent's within the conversation's, this conversation's approvals over its own (a call
    /// the parent would ask about is asked about; one it would deny is denied), this session's
    /// approver, hooks and limits. Register [`Subagents::tool`](crate::agents::Subagents::tool)
    /// in the registry for the model to see the tool.
    pub fn subagents(self, subagents: crate::agents::Subagents) -> Self {
        self.nested_subagents(subagents, 0)
    }

    /// [`subagents`](Self::subagents) for a session that is itself a child at `depth`.
    fn nested_subagents(mut self, subagents: crate::agents::Subagents, depth: u32) -> Self {
        self.subagents = Some((subagents, depth));
        self
    }

    /// Sets the executor's options (the options below the frontmatter, the approval chain,
    /// the approver, the sandbox backends, the conversation's store id, …) on its
    /// [`ExecutorBuilder`]: `.executor(|e| e.config(config).approver(approver))`. Without an
    /// approver, a run stops at the first empty `(pending)` block
    /// ([`Stop::AwaitingApproval`]) and the next run resumes once the transcript says
    /// `approved` or `rejected`.
    pub fn executor(mut self, configure: impl FnOnce(ExecutorBuilder) -> ExecutorBuilder) -> Self {
        self.executor = configure(self.executor);
        self
    }

    /// Adds a hook for this session's conversation alone
    /// ([`ExecutorBuilder::hook`]): `SessionStart`, `UserPromptSubmit`, `Stop` and
    /// `SessionEnd` hooks as well as the tool events'.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flemma_providers::{ScriptedProvider, Turn};
    /// use flemma_core::hooks::{PromptAnswer, on};
    /// use flemma_runtime::hooks::hook_fn;
    /// use flemma_runtime::{MemoryConversation, ToolRegistry};
    /// use flemma_runtime::{Session, Stop};
    ///
    /// let chat = Arc::new(MemoryConversation::new("@You:\nWhat is the password?\n"));
    /// let provider = Arc::new(ScriptedProvider::new([Turn::text("Never.")]));
    /// let no_secrets = hook_fn(on::UserPromptSubmit, |prompt| {
    ///     if prompt.prompt.contains("password") {
    ///         PromptAnswer::block("no secrets in this session")
    ///     } else {
    ///         PromptAnswer::pass()
    ///     }
    /// });
    /// let session = Session::builder(chat, ToolRegistry::new(), provider)
    ///     .hook(no_secrets.named("no-secrets")?)
    ///     .build();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// assert_eq!(runtime.block_on(session.run())?, Stop::PromptBlocked);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hook(self, hook: crate::hooks::HookRegistration) -> Self {
        self.executor(|executor| executor.hook(hook))
    }

    /// Overrides `tools.autopilot.max_turns`.
    pub fn max_turns(mut self, max_turns: u64) -> Self {
        self.max_turns = Some(max_turns);
        self
    }

    /// The engine of `{{ }}` / `{% %}` templates (default: minijinja).
    pub fn template_engine(mut self, engine: Arc<dyn TemplateEngine>) -> Self {
        self.engine = engine;
        self
    }

    /// How often complete lines of a streaming response are written to the conversation
    /// (default 100 ms; each write of a file conversation rewrites the file atomically).
    /// The UI gets every delta as a [`SessionEvent::TextDelta`] regardless.
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = interval;
        self
    }

    /// Whether a run that would end idle while background jobs run waits for them (default
    /// `true`): each delivery is written at once, and the loop resumes
    /// `tools.autopilot.resume_delay` after the last one, unless the autopilot
    /// is off or was disarmed. With `false` such a run returns [`Stop::Running`], and the host
    /// calls [`Session::run`] again when it likes (the cycle delivers what finished).
    pub fn wait_for_jobs(mut self, wait: bool) -> Self {
        self.wait_for_jobs = wait;
        self
    }

    /// How many events each [`subscribe`](Session::subscribe)r's queue holds before it
    /// misses some and reads [`SessionEvent::Missed`] in their place (default
    /// [`DEFAULT_CAPACITY`](crate::fanout::DEFAULT_CAPACITY), 65,536 events).
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// The session: its executor built from the [`ExecutorBuilder`], its events forwarded
    /// into the session's stream from the first one, and its cycles refused while a request
    /// is in flight ([`ExecutorError::Refused`] with [`Refusal::RequestInFlight`], the
    /// Flemma plugin's text), also when the host calls [`Session::executor`]`().cycle()` itself.
    pub fn build(self) -> Session {
        let subscribers = Arc::new(Subscribers::new(self.event_capacity));
        // The one subscription to the executor: every event it emits, a background job's
        // included, goes into the session's stream as it happens. Weak, so a job that
        // outlives the session does not keep its stream open.
        let stream = Arc::downgrade(&subscribers);
        let inner = Arc::new_cyclic(|session: &std::sync::Weak<Inner>| {
            let mut executor = self.executor;
            if let Some((subagents, depth)) = self.subagents {
                executor = executor.delegate(Arc::new(delegate::SessionDelegate {
                    session: session.clone(),
                    subagents,
                    depth,
                }));
            }
            let session = session.clone();
            let executor = executor
                .on_event(move |event: &crate::Event| {
                    if let Some(subscribers) = stream.upgrade() {
                        subscribers.emit(SessionEvent::Tool(event.clone()));
                    }
                })
                // The session's in-flight guard holds for every cycle of its executor.
                .cycle_guard(move || {
                    session
                        .upgrade()
                        .filter(|inner| inner.is_request_in_flight())
                        .map(|_| Refusal::RequestInFlight)
                })
                .build();
            Inner {
                executor: Arc::new(executor),
                provider: self.provider,
                engine: self.engine,
                max_turns: self.max_turns,
                flush_interval: self.flush_interval,
                wait_for_jobs: self.wait_for_jobs,
                pilot: Mutex::new(Autopilot::default()),
                control: Mutex::new(None),
                offered: Mutex::new(None),
                started: AtomicBool::new(false),
                subscribers,
                models: self.models,
                usage: Mutex::new(UsageState::default()),
                parent: self.parent,
                budget: self.budget,
                agent: self.agent,
            }
        });
        Session { inner }
    }
}

/// The agent loop over one conversation: send, stream the response into the conversation,
/// run the tools it asks for, repeat (autopilot).
///
/// A `Session` is a cheap handle (clone it to cancel from another task). Follow it with
/// [`subscribe`](Self::subscribe); the library prints nothing.
///
/// ```
/// use std::sync::Arc;
/// use flemma_providers::{ScriptedProvider, Turn};
/// use flemma_runtime::{MemoryConversation, ToolRegistry};
/// use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
/// use flemma_runtime::{Session, Stop};
/// use serde_json::json;
///
/// let registry = ToolRegistry::new();
/// registry.register(tool_fn(
///     ToolDefinition::builder("shout", "Repeat the text in capitals.")?.build()?,
///     |input, _ctx| ToolOutput::text(input["text"].as_str().unwrap_or("").to_uppercase()),
/// ));
/// let provider = Arc::new(ScriptedProvider::new([
///     Turn::tool_use("shout", json!({"text": "hi"})),
///     Turn::text("It says HI."),
/// ]));
/// let chat = Arc::new(MemoryConversation::new(
///     "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"shout\"]}}}\n```\n@You:\nShout hi.\n",
/// ));
/// let session = Session::builder(chat.clone(), registry, provider).build();
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
/// assert_eq!(runtime.block_on(session.run())?, Stop::Finished);
/// assert!(chat.text().ends_with("```\nHI\n```\n\n@Assistant:\nIt says HI.\n\n@You:\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("provider", &self.inner.provider)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// `None`: a session that runs tool cycles only ([`Session::tools_only`]).
    provider: Option<Arc<dyn Provider>>,
    executor: Arc<Executor>,
    engine: Arc<dyn TemplateEngine>,
    max_turns: Option<u64>,
    flush_interval: Duration,
    wait_for_jobs: bool,
    pilot: Mutex<Autopilot>,
    control: Mutex<Option<Arc<Control>>>,
    subscribers: Arc<Subscribers>,
    /// The request options of the last request, tools included, with what they came from.
    offered: Mutex<Option<Offered>>,
    /// Whether the `SessionStart` hooks ran.
    started: AtomicBool,
    /// The models' prices and sizes.
    models: Arc<flemma_providers::ModelTable>,
    /// What the requests of the current (or last) run, and of the session, used.
    usage: Mutex<UsageState>,
    /// The session whose `agent` call runs this one: each request of this session counts in
    /// its usage and its log, and must fit its budgets too (a model cannot spend past its
    /// conversation's budget by starting subagents).
    parent: Option<std::sync::Weak<Inner>>,
    /// The host's budgets ([`SessionBuilder::budget`]), besides the options'.
    budget: flemma_config::BudgetOptions,
    /// The subagent this session runs, for its `invoke_agent` span (`flemma` otherwise).
    agent: Option<String>,
}

/// The request a budget check is for.
struct NextRequest<'a> {
    provider: &'a str,
    model: &'a str,
    /// The input of the last request of the run that sends it.
    last_input: u64,
    models: &'a flemma_providers::ModelTable,
}

impl Inner {
    /// Whether `request` would cross this session's budgets under `options`: its run's
    /// (what its runs spent, subagents' included) and its conversation's (its usage log, or
    /// this session's requests for a conversation without a file).
    fn over_budget(
        &self,
        options: &flemma_config::Options,
        request: &NextRequest<'_>,
    ) -> Result<Option<crate::usage::BudgetReached>, SessionError> {
        use crate::usage::{BudgetScope, UsageLog, budget_check};
        let budgets = [&options.budget, &self.budget];
        let run_set = budgets.iter().any(|b| b.run.is_set());
        let conversation_set = budgets.iter().any(|b| b.conversation.is_set());
        if !run_set && !conversation_set {
            return Ok(None);
        }
        let (run, session) = {
            let usage = self.lock_usage();
            (usage.run, usage.session)
        };
        let check = |limits, scope, spent: &crate::usage::UsageTotals| {
            budget_check(
                limits,
                scope,
                spent,
                request.last_input,
                request.models,
                request.provider,
                request.model,
            )
        };
        for budget in budgets {
            if let Some(reached) = check(&budget.run, BudgetScope::Run, &run) {
                return Ok(Some(reached));
            }
        }
        if !conversation_set {
            return Ok(None);
        }
        // A conversation with a file keeps its usage log in its store; one without counts
        // this session's requests.
        let transcript = self.transcript();
        let store = transcript
            .store_directory(options)
            .filter(|_| transcript.conversation().path().is_some());
        let spent = match store {
            Some(dir) => UsageLog::in_store(&dir).read()?.totals(),
            None => session,
        };
        Ok(budgets
            .iter()
            .find_map(|budget| check(&budget.conversation, BudgetScope::Conversation, &spent)))
    }
}

/// What a session's requests used.
#[derive(Debug, Default)]
struct UsageState {
    /// The current (or last) run's.
    run: crate::usage::UsageTotals,
    /// The input of the run's last request (the next one's is at least that); 0 before
    /// the first.
    last_input: u64,
    /// Every run's of this session.
    session: crate::usage::UsageTotals,
    /// The store directory of the conversation's usage log, once a request knew it (a
    /// subagent's requests are added to it).
    log: Option<std::path::PathBuf>,
}

/// Request options and the options they were built from (kept, so that their address names
/// them). The transcript evaluates the options again when the registry's tools change, so the
/// same options are the same tools.
struct Offered {
    options: Arc<flemma_config::Options>,
    request: Arc<flemma_providers::RequestOptions>,
}

/// The cancellation of one run and whether its request is in flight.
#[derive(Debug, Default)]
struct Control {
    token: CancellationToken,
    in_flight: AtomicBool,
    /// The run waits at idle for background jobs.
    awaiting_jobs: AtomicBool,
}

/// Clears the run's control when the run ends (also when its future is dropped).
struct Running<'a>(&'a Inner);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.lock_control().take();
    }
}

impl Inner {
    /// The request options under `options` (the transcript's evaluation), the offered tools
    /// included: those of the last request while the evaluation is the same (it is made
    /// again when the frontmatter or the registry's tools change), else built again
    /// ([`Provider::request_options`] and the registry's specs).
    fn request_options(
        &self,
        provider: &dyn Provider,
        options: &Arc<flemma_config::Options>,
    ) -> Arc<flemma_providers::RequestOptions> {
        let mut offered = self.offered.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(last) = offered.as_ref()
            && Arc::ptr_eq(&last.options, options)
        {
            return Arc::clone(&last.request);
        }
        let mut request = provider.request_options(options);
        // The conversation's id keys the provider's prompt cache (a UUID, not its path).
        request.cache_key = Some(self.executor.transcript().conversation_id().to_owned());
        request.tools = self
            .executor
            .transcript()
            .registry()
            .specs_for_prompt(options);
        let request = Arc::new(request);
        *offered = Some(Offered {
            options: Arc::clone(options),
            request: Arc::clone(&request),
        });
        request
    }

    /// The sessions whose `agent` calls run this one, nearest first.
    fn ancestors(&self) -> Vec<Arc<Inner>> {
        let mut out = Vec::new();
        let mut next = self.parent.as_ref().and_then(std::sync::Weak::upgrade);
        while let Some(inner) = next {
            next = inner.parent.as_ref().and_then(std::sync::Weak::upgrade);
            out.push(inner);
        }
        out
    }

    fn lock_usage(&self) -> std::sync::MutexGuard<'_, UsageState> {
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_control(&self) -> std::sync::MutexGuard<'_, Option<Arc<Control>>> {
        self.control.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_pilot(&self) -> std::sync::MutexGuard<'_, Autopilot> {
        self.pilot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_request_in_flight(&self) -> bool {
        self.lock_control()
            .as_ref()
            .is_some_and(|c| c.in_flight.load(Ordering::SeqCst))
    }

    /// The conversation's text, options and edits (the executor's).
    fn transcript(&self) -> &Transcript {
        self.executor.transcript()
    }
}

impl Session {
    /// Starts a session on `conversation` with the tools of `registry`, sending to
    /// `provider`: [`Session::from_executor`] with `Executor::builder(conversation,
    /// registry)`; set the executor's options with [`SessionBuilder::executor`].
    pub fn builder(
        conversation: Arc<dyn Conversation>,
        registry: ToolRegistry,
        provider: Arc<dyn Provider>,
    ) -> SessionBuilder {
        Self::from_executor(Executor::builder(conversation, registry), provider)
    }

    /// Starts a session on `conversation` with the tools of `registry` and no provider: it
    /// runs the tool cycle and never sends. [`Session::cycle`] is an editor's "execute" or a
    /// served call; [`Session::run`] runs the cycle, delivers background jobs as a run does,
    /// and stops with [`Stop::NoProvider`] where a session with a provider would send. The
    /// language server and `flemma mcp serve` run their calls through such sessions.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flemma_runtime::{MemoryConversation, Session, Stop, ToolRegistry};
    ///
    /// let chat = Arc::new(MemoryConversation::new("@You:\nHi.\n"));
    /// let session = Session::tools_only(chat, ToolRegistry::new()).build();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// assert_eq!(runtime.block_on(session.run())?, Stop::NoProvider);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tools_only(
        conversation: Arc<dyn Conversation>,
        registry: ToolRegistry,
    ) -> SessionBuilder {
        SessionBuilder::new(Executor::builder(conversation, registry), None)
    }

    /// Starts a session whose tool cycle is `executor`'s (the session builds it, so that its
    /// events reach the session's stream from the first one), sending to `provider`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flemma_providers::{ScriptedProvider, Turn};
    /// use flemma_runtime::{Executor, MemoryConversation, ToolRegistry};
    /// use flemma_runtime::{Session, Stop};
    ///
    /// let chat = Arc::new(MemoryConversation::new("@You:\nHi.\n"));
    /// let executor = Executor::builder(chat.clone(), ToolRegistry::new())
    ///     .config(flemma_config::Config::new())
    ///     .conversation_id("notes");
    /// let provider = Arc::new(ScriptedProvider::new([Turn::text("Hello.")]));
    /// let session = Session::from_executor(executor, provider).max_turns(3).build();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// assert_eq!(runtime.block_on(session.run())?, Stop::Finished);
    /// assert!(chat.text().ends_with("@Assistant:\nHello.\n\n@You:\n"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_executor(executor: ExecutorBuilder, provider: Arc<dyn Provider>) -> SessionBuilder {
        SessionBuilder::new(executor, Some(provider))
    }

    /// Follows the session from now on: its events and its executor's, in order (see
    /// [`SessionEvents`]).
    pub fn subscribe(&self) -> SessionEvents {
        events::subscribe(&self.inner.subscribers)
    }

    fn emit(&self, event: SessionEvent) {
        self.inner.subscribers.emit(event);
    }

    /// What the requests of the current run used and cost (the last run's once it ended).
    pub fn usage(&self) -> crate::usage::UsageTotals {
        self.inner.lock_usage().run
    }

    /// The autopilot's state.
    pub fn state(&self) -> AutopilotState {
        self.inner.lock_pilot().state
    }

    /// The executor running the tool cycle (approve, reject, cancel one call). Its
    /// [`cycle`](Executor::cycle) is refused while a request is in flight, as
    /// [`Session::cycle`] is.
    pub fn executor(&self) -> &Executor {
        &self.inner.executor
    }

    /// The conversation.
    pub fn conversation(&self) -> &Arc<dyn Conversation> {
        self.inner.executor.conversation()
    }

    /// Whether a request is streaming now.
    pub fn is_request_in_flight(&self) -> bool {
        self.inner.is_request_in_flight()
    }

    /// Cancels what runs (like Ctrl-C in the Flemma plugin): the request in flight (the abort
    /// marker is written, or the empty `@Assistant:` removed), else the wait for background jobs
    /// (the jobs go on), else the running tools. The run stops and the autopilot is disarmed.
    pub fn cancel(&self) -> Cancelled {
        let control = self.inner.lock_control().clone();
        if let Some(control) = control {
            let request = control.in_flight.load(Ordering::SeqCst);
            let awaiting_jobs = control.awaiting_jobs.load(Ordering::SeqCst);
            control.token.cancel();
            if request {
                return Cancelled::Request;
            }
            if awaiting_jobs {
                return Cancelled::Resume;
            }
            self.inner.executor.cancel_all();
            return Cancelled::Tools;
        }
        self.inner.executor.cancel_all();
        Cancelled::Nothing
    }

    /// Cancels everything: the request, every running tool (the double Ctrl-C).
    pub fn cancel_all(&self) {
        if let Some(control) = self.inner.lock_control().clone() {
            control.token.cancel();
        }
        self.inner.executor.cancel_all();
    }

    /// Applies `trigger` to the autopilot, announcing a state change.
    fn transition(&self, trigger: Trigger) -> (Action, Option<String>) {
        let (before, after, outcome) = {
            let mut pilot = self.inner.lock_pilot();
            let before = pilot.state;
            let outcome = pilot.on(trigger);
            (before, pilot.state, outcome)
        };
        if before != after {
            self.emit(SessionEvent::Autopilot(after));
        }
        outcome
    }

    /// Runs the loop ("send or execute", then autopilot): the tool cycle, then, when
    /// every call has its result, a request whose response streams into the conversation;
    /// again while the responses ask for tools.
    ///
    /// # Errors
    ///
    /// [`SessionError::RequestInFlight`] when a run is streaming a request,
    /// [`SessionError::AlreadyRunning`] when one runs tools; the errors of the cycle, the
    /// options and the provider (the autopilot is disarmed then).
    pub async fn run(&self) -> Result<Stop, SessionError> {
        let control = self.claim()?;
        let _running = Running(&self.inner);
        {
            let mut usage = self.inner.lock_usage();
            usage.run = crate::usage::UsageTotals::default();
            usage.last_input = 0;
        }
        let span = self.agent_span();
        match tracing::Instrument::instrument(self.drive(&control), span.clone()).await {
            Ok(stop) => {
                self.emit(SessionEvent::Stopped(stop));
                Ok(stop)
            }
            Err(error) => {
                crate::telemetry::record_error(&span, error.kind());
                self.transition(Trigger::Error);
                Err(error)
            }
        }
    }

    /// Takes the session's control for a run or a manual compaction: refused while another
    /// holds it (a request streaming, or tools running).
    fn claim(&self) -> Result<Arc<Control>, SessionError> {
        let mut slot = self.inner.lock_control();
        if let Some(running) = slot.as_ref() {
            return Err(if running.in_flight.load(Ordering::SeqCst) {
                SessionError::RequestInFlight
            } else {
                SessionError::AlreadyRunning
            });
        }
        let control = Arc::new(Control::default());
        *slot = Some(Arc::clone(&control));
        Ok(control)
    }

    /// A conversation without a `@You:` or `@Assistant:` message (no marker at all, or only
    /// markers such as `@User:`) has nothing a run could send: each unknown marker is a
    /// warning, and the run fails with [`SessionError::NothingToSend`] before any hook or tool.
    async fn refuse_nothing_to_send(&self) -> Result<(), SessionError> {
        let unknown = self
            .inner
            .transcript()
            .read(|doc, _| {
                let sendable = doc
                    .messages
                    .iter()
                    .any(|m| matches!(m.role, Role::You | Role::Assistant));
                (!sendable).then(|| flemma_ast::unknown_roles(doc))
            })
            .await?;
        let Some(unknown) = unknown else {
            return Ok(());
        };
        for diagnostic in unknown {
            self.emit(SessionEvent::Warning(format!(
                "line {}: {}",
                diagnostic.line, diagnostic.message
            )));
        }
        Err(SessionError::NothingToSend)
    }

    async fn drive(&self, control: &Control) -> Result<Stop, SessionError> {
        self.refuse_nothing_to_send().await?;
        self.start_hooks().await;
        let (mut action, _) = self.transition(Trigger::Run);
        let mut turn = 0;
        loop {
            action = match action {
                Action::Stop(stop @ (Stop::Finished | Stop::Idle)) => {
                    let jobs_running = self.inner.executor.running_jobs() > 0;
                    if stop == Stop::Idle && !jobs_running {
                        return Ok(stop);
                    }
                    let autopilot = self.autopilot_options().await?;
                    let facts = AtRest {
                        jobs_running,
                        wait_for_jobs: self.inner.wait_for_jobs,
                        enabled: autopilot.enabled,
                        max_turns: self.inner.max_turns.unwrap_or(autopilot.max_turns),
                    };
                    let rest = self.inner.lock_pilot().at_rest(stop, facts);
                    match rest {
                        Rest::Return(stop) => return Ok(stop),
                        Rest::AwaitJobs => {
                            let delay = Duration::from_millis(autopilot.resume_delay);
                            control.awaiting_jobs.store(true, Ordering::SeqCst);
                            let resume = self.await_jobs(&control.token, delay).await;
                            control.awaiting_jobs.store(false, Ordering::SeqCst);
                            match resume? {
                                Resume::Resumed => self.transition(Trigger::JobsDelivered).0,
                                Resume::Cancelled => self.transition(Trigger::Cancel).0,
                                Resume::Nothing => return Ok(stop),
                            }
                        }
                        Rest::AskStopHooks { again } => {
                            if self.stop_hooks(again).await? {
                                self.transition(Trigger::KeptGoing).0
                            } else {
                                return Ok(Stop::Finished);
                            }
                        }
                    }
                }
                Action::Stop(stop) => return Ok(stop),
                Action::Cycle => {
                    let report = self.cycle_until(&control.token).await?;
                    if control.token.is_cancelled() {
                        self.transition(Trigger::Cancel).0
                    } else {
                        let mut next = report.next;
                        // A response the stream cut: its request is sent again.
                        if next == crate::Next::Idle && self.drop_incomplete_response().await? {
                            next = crate::Next::Send;
                        }
                        self.transition(Trigger::ToolsComplete(next)).0
                    }
                }
                Action::Send => match self.inner.provider.clone() {
                    None => self.transition(Trigger::NoProvider).0,
                    Some(provider) => {
                        // A request that would fill too much of the context window is
                        // compacted first (its own request counts in the budgets below).
                        self.compact_if_needed(provider.as_ref(), &control.token, turn + 1)
                            .await?;
                        if let Some(reached) = self.over_budget(provider.as_ref()).await? {
                            self.emit(SessionEvent::BudgetReached(reached));
                            self.transition(Trigger::Cancel);
                            return Ok(Stop::BudgetReached);
                        }
                        if !self.prompt_hooks().await? {
                            self.transition(Trigger::Cancel);
                            return Ok(Stop::PromptBlocked);
                        }
                        turn += 1;
                        self.send(provider.as_ref(), control, turn).await?
                    }
                },
            };
        }
    }

    /// The `invoke_agent` span of a run ([`crate::telemetry`]).
    fn agent_span(&self) -> tracing::Span {
        let transcript = self.inner.transcript();
        let chat = transcript
            .conversation()
            .path()
            .map(flemma_config::conversation_path);
        crate::telemetry::agent(
            self.inner.agent.as_deref().unwrap_or("flemma"),
            transcript.conversation_id(),
            self.inner.provider.as_deref().map(Provider::name),
            chat.as_deref(),
        )
    }

    /// The budget the next request to `provider` would cross, if any (see
    /// [`budget_check`](crate::usage::budget_check)): this session's run and conversation
    /// budgets, then those of each session whose `agent` call runs this one (their requests
    /// and this one's add up there).
    async fn over_budget(
        &self,
        provider: &dyn Provider,
    ) -> Result<Option<crate::usage::BudgetReached>, SessionError> {
        let transcript = self.inner.transcript();
        let evaluated = transcript.evaluated().await?;
        let options = evaluated.options();
        let model = self.inner.request_options(provider, options).model.clone();
        let last_input = self.inner.lock_usage().last_input;
        let request = NextRequest {
            provider: provider.name(),
            model: &model,
            last_input,
            models: &self.inner.models,
        };
        if let Some(reached) = self.inner.over_budget(options, &request)? {
            return Ok(Some(reached));
        }
        for ancestor in self.inner.ancestors() {
            let evaluated = ancestor.transcript().evaluated().await?;
            if let Some(reached) = ancestor.over_budget(evaluated.options(), &request)? {
                return Ok(Some(reached));
            }
        }
        Ok(None)
    }

    /// Sends the conversation to `provider` and streams the response into it; what the loop
    /// does next.
    async fn send(
        &self,
        provider: &dyn Provider,
        control: &Control,
        turn: u64,
    ) -> Result<Action, SessionError> {
        Ok(match self.respond(provider, control, turn).await? {
            respond::Response::Cancelled => self.transition(Trigger::Cancel).0,
            respond::Response::Complete {
                tool_uses,
                autopilot,
            } => {
                let max_turns = self.inner.max_turns.unwrap_or(autopilot.max_turns);
                let (action, warning) = self.transition(Trigger::ResponseComplete {
                    tool_uses: tool_uses > 0,
                    enabled: autopilot.enabled,
                    max_turns,
                });
                if let Some(warning) = warning {
                    self.emit(SessionEvent::Warning(warning));
                }
                if tool_uses > 0 && action != Action::Cycle {
                    // No cycle makes the response durable: the run stops here.
                    self.inner.executor.conversation().sync().await?;
                }
                action
            }
        })
    }

    /// Waits at idle for background jobs: each one that finishes is delivered at
    /// once; the loop resumes `delay` after the last delivery (a new delivery restarts the
    /// wait), or not at all when `cancel` fires.
    async fn await_jobs(
        &self,
        cancel: &CancellationToken,
        delay: Duration,
    ) -> Result<Resume, SessionError> {
        let executor = &self.inner.executor;
        tokio::select! {
            () = executor.job_finished() => {}
            () = cancel.cancelled() => return Ok(Resume::Cancelled),
        }
        let mut delivered = self.deliver_jobs().await?;
        loop {
            if delivered > 0 {
                self.emit(SessionEvent::ResumeScheduled {
                    delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                });
            }
            let more = executor.running_jobs() > 0;
            tokio::select! {
                () = tokio::time::sleep(delay), if delivered > 0 => break,
                () = executor.job_finished(), if more => {
                    delivered += self.deliver_jobs().await?;
                }
                () = cancel.cancelled() => {
                    if delivered > 0 {
                        self.emit(SessionEvent::ResumeCancelled);
                    }
                    return Ok(Resume::Cancelled);
                }
            }
            if delivered == 0 && executor.running_jobs() == 0 {
                // Nothing finished that could be delivered (another host took it).
                return Ok(Resume::Nothing);
            }
        }
        self.emit(SessionEvent::Resumed);
        Ok(Resume::Resumed)
    }

    /// Delivers the finished jobs (their events reach the stream as they happen); how many.
    async fn deliver_jobs(&self) -> Result<usize, SessionError> {
        Ok(self.inner.executor.drain_jobs().await?.len())
    }

    /// `tools.autopilot` of the conversation as it is now (the transcript's evaluation).
    async fn autopilot_options(&self) -> Result<flemma_config::AutopilotOptions, SessionError> {
        let evaluated = self.inner.transcript().evaluated().await?;
        Ok(evaluated.options().tools.autopilot.clone())
    }

    /// One tool cycle outside a run (a user's "execute"), its events forwarded.
    ///
    /// # Errors
    ///
    /// [`SessionError::ToolWhileRequest`] while a request is in flight; the cycle's errors.
    pub async fn cycle(&self) -> Result<CycleReport, SessionError> {
        if self.is_request_in_flight() {
            return Err(SessionError::ToolWhileRequest);
        }
        match self.cycle_until(&CancellationToken::new()).await {
            // A request started in between: the executor's guard refused the cycle.
            Err(SessionError::Executor(ExecutorError::Refused(Refusal::RequestInFlight))) => {
                Err(SessionError::ToolWhileRequest)
            }
            other => other,
        }
    }

    /// Runs the cycle (its events reach the stream as they happen); `cancel` cancels the
    /// running calls (they end with `User aborted tool execution.`).
    async fn cycle_until(&self, cancel: &CancellationToken) -> Result<CycleReport, SessionError> {
        let executor = &self.inner.executor;
        let cycle = executor.cycle();
        tokio::pin!(cycle);
        let report = tokio::select! {
            biased;
            () = cancel.cancelled() => {
                executor.cancel_all();
                cycle.await
            }
            report = &mut cycle => report,
        };
        Ok(report?)
    }
}

/// How a wait for background jobs ended.
enum Resume {
    /// Jobs were delivered and the resume delay passed.
    Resumed,
    /// The user cancelled.
    Cancelled,
    /// The jobs ended with nothing to deliver here.
    Nothing,
}
