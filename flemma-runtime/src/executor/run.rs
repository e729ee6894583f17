//! Phase 2's runner: approved calls started at most `tools.max_concurrent` at a
//! time, each in a task of its own that can be handed to the background, with its context,
//! its time limit and its cancellation.

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use flemma_ast::writer;
use flemma_ids::{ToolName, ToolUseId};
use futures_util::FutureExt as _;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::state::{Call, Claimed, Executor, Finished, Handoff, RunningCall, Settings, Started};
use super::types::{Completed, ExecutorError};
use crate::events::Event;
use crate::messages as msg;
use crate::transcript::TranscriptError;
use crate::transcript::tool_cwd;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolOutput;
use flemma_core::preview::{generic_preview, render_preview};

/// The width previews are rendered to in events.
const PREVIEW_WIDTH: usize = 120;

impl Executor {
    /// Runs approved calls in document order, never more than `tools.max_concurrent` at a
    /// time (0 = no limit), writing each result as soon as it is ready.
    pub(super) async fn run_calls(
        &self,
        mut queue: VecDeque<Call>,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let limit = match usize::try_from(settings.shared.evaluated.options.tools.max_concurrent) {
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
        // The claims of the calls running now, with the input each runs with; a claim left
        // here when the cycle ends early reads as its host's gone, so the next cycle answers
        // its call with an error.
        let mut held = HashMap::new();
        let locked = !queue.is_empty();
        if locked {
            self.conversation().set_locked(true).await;
        }
        let result = async {
            loop {
                // The calls that start now lose their `(approved)` suffix in one edit
                // (spec §7.5 step 7), then run.
                let free = limit.saturating_sub(tasks.len()).min(queue.len());
                let starting = queue.drain(..free).collect();
                self.start_calls(starting, &mut tasks, &mut held, settings)
                    .await?;
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
                let batch = self.batch(joined, &mut tasks, &mut held, settings).await;
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
            self.conversation().set_locked(false).await;
        }
        completed.sort_by_key(|c: &Completed| order.get(&c.id).copied());
        result.map(|()| completed)
    }

    /// Claims and starts `starting`: a call another host claimed is left to it; the rest
    /// lose their `(approved)` suffix in one edit, then run, each in a
    /// task of `tasks` holding its claim and the input it runs with in `held` (a call that
    /// became a job releases its claim: its journal keeps it).
    async fn start_calls(
        &self,
        starting: Vec<Call>,
        tasks: &mut JoinSet<Joined>,
        held: &mut HashMap<ToolUseId, Claimed>,
        settings: &Settings,
    ) -> Result<(), ExecutorError> {
        let starting = self.claim_calls(starting, settings).await?;
        let (starting, claims): (Vec<Call>, Vec<_>) = starting.into_iter().unzip();
        if !starting.is_empty() {
            self.clear_suffixes(&starting).await?;
            // The durable point before a call starts: the cleared suffixes are a durable
            // change, which made every buffered one before it (the response, the
            // placeholders) durable too; when there was nothing to clear, a sync does it.
            self.conversation()
                .sync()
                .await
                .map_err(TranscriptError::from)?;
        }
        for (call, claim) in starting.into_iter().zip(claims) {
            let id = call.id.clone();
            let input = call.input.clone();
            if let Some((task, moved)) = self.start(call, settings).await? {
                held.insert(id.clone(), Claimed { hold: claim, input });
                tasks.spawn(run_movable(id, task, moved));
            } else {
                self.release_claim(claim, settings).await;
            }
        }
        Ok(())
    }

    /// The calls that finished with `joined`: every other call that finished meanwhile is
    /// written with it, in one edit (one re-parse and one write of the conversation per
    /// batch, not per call). Only calls already finished join the batch, so no result waits
    /// for a slow one.
    async fn batch(
        &self,
        joined: Result<Joined, tokio::task::JoinError>,
        tasks: &mut JoinSet<Joined>,
        held: &mut HashMap<ToolUseId, Claimed>,
        settings: &Settings,
    ) -> Vec<(Finished, Option<Claimed>)> {
        let mut batch = Vec::new();
        let mut next = Some(joined);
        while let Some(joined) = next {
            // Tasks catch their tools' panics, so a join error means the runtime is shutting
            // down; nothing to write then.
            match joined {
                Ok(Joined::Done(finished)) => {
                    self.running_calls().remove(&finished.id);
                    let claimed = held.remove(&finished.id);
                    batch.push((finished, claimed));
                }
                Ok(Joined::Moved(id)) => {
                    let claim = held.remove(&id).and_then(|c| c.hold);
                    self.release_claim(claim, settings).await;
                }
                Err(_) => {}
                Ok(Joined::Failed(id)) => {
                    self.running_calls().remove(&id);
                }
            }
            next = tasks.try_join_next();
            if next.is_none() && !tasks.is_empty() {
                // Let calls that are ready to end, end (without waiting for any that are
                // not): they join this batch; stop when none did.
                tokio::task::yield_now().await;
                next = tasks.try_join_next();
            }
        }
        batch
    }

    /// Removes the `(approved)` suffix of calls about to start, in one edit.
    pub(super) async fn clear_suffixes(&self, calls: &[Call]) -> Result<(), ExecutorError> {
        self.edit_indexed(|doc, index| {
            let mut edits = Vec::with_capacity(calls.len());
            for call in calls {
                // A re-run keeps its job id, so its Job Result is replaced in place (§7.5 5).
                let job = index
                    .tool_result(doc, call.id.as_str())
                    .and_then(|r| r.node.job_id().map(|j| format!("job={j}")));
                let cleared = match &job {
                    Some(modeline) => {
                        writer::set_modeline_in(doc, index, call.id.as_str(), modeline)
                    }
                    None => writer::set_status_in(doc, index, call.id.as_str(), None),
                };
                match cleared {
                    Ok(edit) => edits.push(edit),
                    // The block went away: the result puts it back.
                    Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                    Err(error) => return Err(TranscriptError::Edit(error).into()),
                }
            }
            Ok(edits)
        })
        .await
    }

    /// Prepares one call: a result for unknown, unexecutable or duplicate calls,
    /// else the future that runs it.
    pub(super) async fn start(
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
            deferred: None,
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
            Some(t)
                if !t
                    .definition()
                    .is_available(&settings.shared.evaluated.options) =>
            {
                Some(refuse(msg::unavailable(tool.as_str())))
            }
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
            && !definition.has_capability(flemma_schema::Capability::DisablesBackground);
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
                Started::Job => Ok(None),
                Started::Finished(finished) => Ok(Some(ready(finished))),
            };
        }
        let call = Call { id, tool, input };
        self.start_foreground(call, found, directives.save_to, backgroundable, settings)
            .await
            .map(Some)
    }

    /// Starts a foreground call: registered as running (with its hand-over to the
    /// background when `backgroundable`), announced, its context built; the future that runs
    /// it.
    async fn start_foreground(
        &self,
        call: Call,
        found: Arc<dyn Tool>,
        save_to: Option<String>,
        backgroundable: bool,
        settings: &Settings,
    ) -> Result<(CallFuture, Moved), ExecutorError> {
        let Call { id, tool, input } = call;
        let token = CancellationToken::new();
        let (sender, moved) = tokio::sync::oneshot::channel();
        self.running_calls().insert(
            id.clone(),
            RunningCall {
                token: token.clone(),
                tool: tool.clone(),
                handoff: backgroundable.then(|| Handoff {
                    token: token.clone(),
                    save_to: save_to.clone(),
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
        let span = crate::telemetry::tool(
            self.setup.transcript.conversation_id(),
            tool.as_str(),
            id.as_str(),
            settings.shared.chat.as_deref(),
            None,
        );
        let capture =
            settings.shared.evaluated.options.telemetry.capture_content && !span.is_disabled();
        if capture {
            crate::telemetry::content::record_arguments(&span, &input);
        }
        let future = tracing::Instrument::instrument(
            async move {
                let finished = run_one(found, id, tool, input, ctx, token, save_to).await;
                if capture {
                    let span = tracing::Span::current();
                    crate::telemetry::content::record_result(&span, &finished.output);
                }
                finished
            },
            span,
        );
        Ok((Box::pin(future), moved))
    }

    pub(super) async fn context(
        &self,
        id: &ToolUseId,
        tool: &ToolName,
        definition: &flemma_core::ToolDefinition,
        settings: &Settings,
        token: CancellationToken,
    ) -> Result<ExecutionContext, ExecutorError> {
        let chat = settings.shared.chat.as_deref();
        let mut builder = ExecutionContext::builder(id.clone(), tool.clone())
            .options(Arc::clone(&settings.shared.evaluated.options))
            .sandbox(settings.shared.sandbox.clone())
            .cancellation(token)
            .jobs(Arc::clone(&self.jobs));
        if let Some(delegate) = &self.setup.delegate {
            builder = builder.delegate(Arc::clone(delegate));
        }
        let events = Arc::clone(&self.events);
        let (call, name) = (id.clone(), tool.clone());
        builder = builder.on_progress(move |progress| {
            events.emit(Event::ToolProgress {
                id: call.clone(),
                tool: name.clone(),
                progress,
            });
        });
        if let Some(defaults) = definition.config_defaults() {
            builder = builder.tool_defaults(defaults.clone());
        }
        if let Some(cwd) = tool_cwd(&settings.shared.evaluated.options, tool, chat) {
            builder = builder.cwd(cwd);
        }
        if let Some(chat) = chat {
            builder = builder.filename(chat);
        }
        if let Some(store) = &settings.shared.store {
            builder = builder.store(Arc::clone(store));
        }
        // The text the call starts from; the tool's document is the transcript's parse of it,
        // shared by every call started at its revision (no parse of its own).
        let snapshot = self.setup.transcript.snapshot().await?;
        builder = builder
            .text(snapshot.text)
            .transcript(&self.setup.transcript, snapshot.revision);
        Ok(builder.build()?)
    }

    pub(super) fn preview(&self, tool: &ToolName, input: &Value) -> String {
        let width = PREVIEW_WIDTH.saturating_sub(tool.as_str().len() + 2);
        let preview = self
            .setup
            .registry
            .get(tool.as_str())
            .and_then(|t| t.preview(input, width))
            .unwrap_or_else(|| generic_preview(input, width));
        render_preview(tool.as_str(), &preview, PREVIEW_WIDTH)
    }
}

/// How long after its [`Tool::time_limit`] a call is given up on: time for a tool that stops
/// its own work at the limit (`bash`: `SIGTERM`, a grace, `SIGKILL`) to report.
const GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

/// Runs one call, ending with `User aborted tool execution.` when cancelled, with the panic's
/// text when the tool panics, and with `Tool timed out after <n> seconds.` when it is still
/// running [`GIVE_UP_AFTER`] past its time limit.
pub(super) async fn run_one(
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
        tokio::pin!(execute);
        tokio::select! {
            biased;
            () = token.cancelled() => aborted(&mut execute).await,
            result = &mut execute => result.unwrap_or_else(|panic| {
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
    let failed = matches!(output, ToolOutput::Failure { .. });
    let span = tracing::Span::current();
    span.record("flemma.tool.status", if failed { "error" } else { "ok" });
    if failed {
        crate::telemetry::record_error(&span, "tool_error");
    }
    Finished {
        id,
        tool: name,
        output,
        save_to,
        overflow: ctx.overflow_path(),
        overflow_error: ctx.overflow_error(),
        // A call cancelled or given up on has its result, whatever the tool said before.
        deferred: ctx.deferred().filter(|_| !token.is_cancelled()),
    }
}

/// The result of a call cancelled while `execute` runs: the tool watches the same token, and
/// when it reports `User aborted tool execution.` itself within [`GIVE_UP_AFTER`] (`bash`
/// stops its processes and keeps the output so far), its report is the result, with the
/// partial output; anything else (a tool that does not stop, another text, a
/// panic) ends with the bare text.
async fn aborted<F>(execute: &mut std::pin::Pin<&mut F>) -> ToolOutput
where
    F: Future<Output = std::thread::Result<ToolOutput>>,
{
    match tokio::time::timeout(GIVE_UP_AFTER, execute).await {
        Ok(Ok(output)) if matches!(&output, ToolOutput::Failure { error, .. } if error == msg::ABORTED) => {
            output
        }
        _ => ToolOutput::error(msg::ABORTED),
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
