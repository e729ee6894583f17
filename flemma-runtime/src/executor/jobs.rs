//! The executor's side of its background jobs (see [`crate::jobs`]): the executor is the
//! jobs' [`JobHost`], and its public job methods delegate to its [`Jobs`].

use std::sync::Arc;

use flemma_ast::writer::WriterOptions;
use flemma_ast::{Document, TextEdit};
use flemma_ids::{JobId, ToolName, ToolUseId};
use flemma_store::Store;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::complete::{Completion, StoreId};
use super::run::run_one;
use super::state::{Call, Executor, Finished, Settings, Started};
use super::types::ExecutorError;
use crate::events::Event;
use crate::jobs::host::{HostedCall, JobHost, RunFuture};
use crate::jobs::start::JobCall;
use crate::jobs::table::Delivery;
use crate::jobs::types::{Delivered, JobError, JobInfo, Recovery};
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolOutput;

impl JobHost for Executor {
    type Settings = Settings;
    type Error = ExecutorError;

    async fn settings(&self) -> Result<Settings, ExecutorError> {
        Executor::settings(self).await
    }

    fn transcript(&self) -> &crate::transcript::Transcript {
        &self.setup.transcript
    }

    fn writer(&self, settings: &Settings) -> WriterOptions {
        settings.shared.writer
    }

    fn tracks_jobs(&self, settings: &Settings) -> bool {
        let tools = self
            .setup
            .registry
            .tool_set(&settings.shared.evaluated.options);
        tools
            .iter()
            .any(|t| t.definition().name().as_str() == crate::jobs::status::NAME)
    }

    async fn read<T: Send>(
        &self,
        f: impl FnOnce(&Document) -> T + Send,
    ) -> Result<T, ExecutorError> {
        self.with_document(|doc, _| f(doc)).await
    }

    async fn edit(
        &self,
        f: impl FnMut(&Document) -> Result<Vec<TextEdit>, ExecutorError> + Send,
    ) -> Result<(), ExecutorError> {
        Executor::edit(self, f).await
    }

    async fn context(
        &self,
        settings: &Settings,
        id: &ToolUseId,
        tool: &ToolName,
        found: Option<&Arc<dyn Tool>>,
        token: CancellationToken,
    ) -> Result<ExecutionContext, ExecutorError> {
        match found {
            Some(found) => {
                Executor::context(self, id, tool, found.definition(), settings, token).await
            }
            None => Ok(ExecutionContext::builder(id.clone(), tool.clone())
                .options(Arc::clone(&settings.shared.evaluated.options))
                .cancellation(token)
                .build()?),
        }
    }

    fn tool(&self, name: &ToolName) -> Option<Arc<dyn Tool>> {
        self.setup.registry.get(name.as_str())
    }

    fn run(&self, c: HostedCall) -> RunFuture {
        let run = run_one(c.found, c.id, c.tool, c.input, c.ctx, c.token, None);
        Box::pin(async move { run.await.output })
    }

    async fn result_text(&self, settings: &Settings, item: &Delivery) -> (String, bool) {
        if item.lost {
            return (item.outcome.text.clone(), !item.outcome.success);
        }
        // A finished job's result passes through the PostToolUse hooks as a foreground
        // call's does.
        let output = if item.outcome.success {
            ToolOutput::text(item.outcome.text.clone())
        } else {
            ToolOutput::error(item.outcome.text.clone())
        };
        let output = self
            .post_tool_use(settings, &item.tool_id, &item.tool, output, false)
            .await;
        let item = Delivery {
            outcome: crate::jobs::Outcome::new(output.is_success(), output.result_text()),
            ..item.clone()
        };
        let text = match &settings.shared.store {
            Some(store) => self.store_job(store, &item, settings).await,
            None => item.outcome.text.clone(),
        };
        (text, !item.outcome.success)
    }
}

impl Executor {
    /// Starts a call as a background job: a job id (the one its
    /// result already names, when it ran before), the journal entry, the placeholder, then the
    /// task or detached process.
    pub(super) async fn start_job(
        &self,
        call: Call,
        found: Arc<dyn Tool>,
        settings: &Settings,
        save_to: Option<String>,
    ) -> Result<Started, ExecutorError> {
        let Call { id, tool, input } = call;
        let job = JobCall {
            id: id.clone(),
            tool: tool.clone(),
            input,
            save_to,
        };
        Ok(match self.jobs.start(self, settings, job, found).await? {
            crate::jobs::start::Started::Job => Started::Job,
            crate::jobs::start::Started::Finished(output) => Started::Finished(Finished {
                id,
                tool,
                output,
                save_to: None,
                overflow: None,
                overflow_error: None,
                deferred: None,
            }),
        })
    }

    /// Header `job=<id>` and the tracked or untracked placeholder text, one edit.
    pub(super) async fn write_job_placeholder(
        &self,
        id: &ToolUseId,
        job_id: &JobId,
        settings: &Settings,
    ) -> Result<(), ExecutorError> {
        self.jobs
            .write_placeholder(self, settings, id, job_id)
            .await
    }

    /// Moves the running foreground call `id` to the background (host-initiated):
    /// it gets a job id and its placeholder, and the cycle that started it stops waiting for
    /// it. The call itself keeps running in this host (a call already running cannot move to
    /// a process of its own), so it ends with the host.
    ///
    /// # Errors
    ///
    /// The Flemma plugin's [`ExecutorError::Action`]-like texts as [`ExecutorError::Job`]:
    /// `Tool <id> is not currently executing`, `Tool <id> has already completed`,
    /// `Tool <id> is already running in background`, and synchronous tools.
    pub async fn background(&self, id: &str) -> Result<JobId, ExecutorError> {
        if self.jobs.job_of(id).is_some() {
            return Err(JobError::AlreadyBackground { id: id.to_owned() }.into());
        }
        let settings = self.settings().await?;
        let Some((tool, handoff)) = self.take_handoff(id) else {
            let final_result = self
                .with_document(|doc, _| {
                    flemma_ast::find_tool_result_by_id(doc, id)
                        .is_some_and(|r| r.node.status.is_none() && r.node.job_id().is_none())
                })
                .await?;
            let id = id.to_owned();
            return Err(if final_result {
                JobError::AlreadyCompleted { id }
            } else {
                JobError::NotExecuting { id }
            }
            .into());
        };
        let Some(handoff) = handoff else {
            return Err(JobError::NotBackgroundable { tool: tool.clone() }.into());
        };
        let tool_id = ToolUseId::sanitized(id);
        let call = JobCall {
            id: tool_id.clone(),
            tool: tool.clone(),
            input: Value::Null,
            save_to: handoff.save_to.clone(),
        };
        let job_id = self
            .jobs
            .background(self, &settings, call, handoff.token.clone())
            .await?;
        let jobs = Arc::clone(&self.jobs);
        let job = job_id.clone();
        // The cycle hands the call's task over; its result goes to the queue.
        let _ = handoff.sender.send(Box::new(move |done: Finished| {
            tokio::spawn(async move { jobs.complete(&job, &done.output).await });
        }));
        self.emit(Event::JobSubmitted {
            job_id: job_id.clone(),
            tool_id,
            tool,
        });
        Ok(job_id)
    }

    /// Writes the Job Results of every finished job, first finished first:
    /// store materialisation with `source = "job"` or the `flemma.save_to` redirect, the block
    /// placed by the delivery rules, then the journal marked `delivered`. Every cycle runs it
    /// when no foreground call is running; a host runs it at its own idle points and before a
    /// user's send.
    ///
    /// # Errors
    ///
    /// When the conversation cannot be written; the job stays queued then.
    pub async fn drain_jobs(&self) -> Result<Vec<Delivered>, ExecutorError> {
        self.jobs.drain(self).await
    }

    /// Store materialisation (`source = "job"`) or the `flemma.save_to` redirect of a
    /// delivery; the text the Job Result holds.
    async fn store_job(&self, store: &Arc<Store>, item: &Delivery, settings: &Settings) -> String {
        let text = &item.outcome.text;
        let save = item.save_to.clone().filter(|_| item.outcome.success);
        let completion = Completion {
            id: StoreId::Job(item.job_id.clone()),
            tool: item.tool.clone(),
            materialize: (save.is_none() && store.materializes())
                .then(|| (text.clone(), item.outcome.success)),
            save: save.map(|dest| (dest, text.clone())),
        };
        self.store_output(store, &settings.shared.sandbox, completion)
            .await
            .unwrap_or_else(|| text.clone())
    }

    /// Waits for every job this executor runs, delivering each as it finishes, until none
    /// runs (`flemma cycle --wait`).
    ///
    /// # Errors
    ///
    /// As [`Executor::drain_jobs`].
    pub async fn wait_jobs(&self) -> Result<Vec<Delivered>, ExecutorError> {
        self.jobs.wait(self).await
    }

    /// How many background jobs this executor runs now.
    pub fn running_jobs(&self) -> usize {
        self.jobs.running()
    }

    /// Waits until one of this executor's background jobs finishes (at once when none runs),
    /// without delivering it: a host that debounces deliveries (`tools.autopilot.resume_delay`)
    /// waits on this, then calls [`Executor::drain_jobs`].
    pub async fn job_finished(&self) {
        self.jobs.finished().await;
    }

    /// Cancels the background job `job_id`: its Job Result says `User aborted tool
    /// execution.` Returns whether it was running.
    pub fn cancel_job(&self, job_id: &str) -> bool {
        self.jobs.cancel_job(job_id)
    }

    /// Orphan recovery and re-adoption (with the journal): run when a conversation
    /// is opened (the first cycle does it). Jobs whose process still runs are watched again;
    /// jobs that finished while no host was running, or whose delivery was interrupted, are
    /// queued and delivered; only jobs gone without a result are marked lost (header
    /// `error job=…`, Job Result `Job lost: session ended before completion.`).
    ///
    /// # Errors
    ///
    /// When the conversation cannot be read or written.
    pub async fn recover(&self) -> Result<Recovery, ExecutorError> {
        self.recovered
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.jobs.recover(self).await
    }

    /// The conversation's jobs: the journal's, this executor's, and those the transcript
    /// names without either. Of those: one whose Job Result is in the transcript
    /// was delivered (by another host), unless it is the lost marker recovery writes (the
    /// call's header `error job=J`); one without a Job Result is lost.
    ///
    /// # Errors
    ///
    /// When the conversation cannot be read or the options do not evaluate.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>, ExecutorError> {
        // The options of the moment choose the store directory, so the journal.
        Executor::settings(self).await?;
        self.jobs.list(self).await
    }
}
