//! Background jobs in the executor (spec §8): entering the background, completion, the FIFO
//! delivery queue and its drain, orphan recovery and re-adoption through the journal (see
//! [`crate::jobs`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use flemma_ast::Document;
use flemma_ast::writer;
use flemma_ids::{JobId, ToolName, ToolUseId};
use flemma_store::Store;
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Executor, ExecutorError, Finished, Settings, run_one};
use crate::events::Event;
use crate::jobs::journal::{JobRecord, Journal, Outcome, ProcessRef};
use crate::jobs::{
    Delivered, DetachedEnding, JobInfo, JobState, Recovery, crash_point, new_job_id, now_seconds,
};
use crate::messages as msg;
use crate::output::ToolOutput;
use crate::tool::Tool;

/// One job this executor knows: running, or finished and waiting for delivery.
#[derive(Debug)]
struct LiveJob {
    tool_id: ToolUseId,
    tool: ToolName,
    started_at: f64,
    completed_at: Option<f64>,
    token: CancellationToken,
    outcome: Option<Outcome>,
    save_to: Option<String>,
    /// Ended without a result: delivery also marks the header `error job=…`.
    lost: bool,
}

#[derive(Debug, Default)]
struct Table {
    jobs: HashMap<JobId, LiveJob>,
    queue: VecDeque<JobId>,
}

/// A finished job taken off the queue.
struct Delivery {
    job_id: JobId,
    tool_id: ToolUseId,
    tool: ToolName,
    outcome: Outcome,
    save_to: Option<String>,
    lost: bool,
}

/// What `flemma.jobs.status` finds in the executor (lookups 1 and 2 of spec §8.7).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiveStatus {
    pub(crate) delivery_pending: bool,
    pub(crate) tool_id: ToolUseId,
    pub(crate) tool: ToolName,
    pub(crate) elapsed_seconds: f64,
}

/// The executor's jobs, shared with the tasks that watch them and with `flemma.jobs.status`.
#[derive(Debug)]
pub(crate) struct JobShared {
    table: Mutex<Table>,
    changed: Notify,
    events: Arc<crate::fanout::Fanout<Event>>,
    journal: Mutex<Option<Journal>>,
}

impl JobShared {
    pub(super) fn new(events: Arc<crate::fanout::Fanout<Event>>) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            changed: Notify::new(),
            events,
            journal: Mutex::new(None),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn set_journal(&self, journal: Option<Journal>) {
        *self.journal.lock().unwrap_or_else(PoisonError::into_inner) = journal;
    }

    pub(crate) fn journal(&self) -> Option<Journal> {
        self.journal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn emit(&self, event: Event) {
        self.events.emit(event);
    }

    /// Whether a job of this executor still runs.
    pub(super) fn any_running(&self) -> bool {
        self.table().jobs.values().any(|j| j.outcome.is_none())
    }

    /// How many jobs still run.
    fn running(&self) -> usize {
        self.table()
            .jobs
            .values()
            .filter(|j| j.outcome.is_none())
            .count()
    }

    /// Whether a finished job waits for delivery.
    fn any_queued(&self) -> bool {
        !self.table().queue.is_empty()
    }

    /// The job running the call `tool_id`.
    pub(super) fn job_of(&self, tool_id: &str) -> Option<JobId> {
        self.table()
            .jobs
            .iter()
            .find(|(_, j)| j.tool_id == tool_id)
            .map(|(id, _)| id.clone())
    }

    /// Cancels the job running `tool_id`; whether there was one.
    pub(super) fn cancel_call(&self, tool_id: &str) -> bool {
        let table = self.table();
        let job = table
            .jobs
            .values()
            .find(|j| j.tool_id == tool_id && j.outcome.is_none());
        job.map(|j| j.token.cancel()).is_some()
    }

    /// Cancels the job `job_id`; whether it was running.
    pub(super) fn cancel_job(&self, job_id: &str) -> bool {
        let table = self.table();
        table
            .jobs
            .get(job_id)
            .filter(|j| j.outcome.is_none())
            .map(|j| j.token.cancel())
            .is_some()
    }

    pub(super) fn cancel_all(&self) {
        for job in self.table().jobs.values() {
            job.token.cancel();
        }
    }

    /// What the executor knows of `job_id`.
    pub(crate) fn live_status(&self, job_id: &str) -> Option<LiveStatus> {
        let table = self.table();
        let job = table.jobs.get(job_id)?;
        let end = job.completed_at.unwrap_or_else(now_seconds);
        Some(LiveStatus {
            delivery_pending: job.outcome.is_some(),
            tool_id: job.tool_id.clone(),
            tool: job.tool.clone(),
            elapsed_seconds: (end - job.started_at).max(0.0),
        })
    }

    fn insert(&self, job_id: JobId, job: LiveJob) {
        self.table().jobs.insert(job_id, job);
    }

    /// A job finished: its result goes to the journal (so it survives this host), then to
    /// the delivery queue.
    fn complete(&self, job_id: &JobId, output: &ToolOutput) {
        let outcome = Outcome {
            success: output.is_success(),
            text: output.result_text(),
        };
        let completed_at = now_seconds();
        if let Some(journal) = self.journal() {
            let written = journal.update(job_id.as_str(), |record| {
                if matches!(record.state, JobState::Delivered | JobState::Lost) {
                    return (false, ());
                }
                record.state = JobState::Completed;
                record.completed_at = Some(completed_at);
                record.outcome = Some(outcome.clone());
                (true, ())
            });
            if let Err(error) = written {
                tracing::warn!(job = %job_id, %error, "job result not journaled");
            }
        }
        crash_point("job-completed");
        self.finish(job_id, outcome, completed_at, false);
    }

    /// A job's process is gone without a recorded status.
    fn vanish(&self, job_id: &JobId) {
        let outcome = Outcome {
            success: false,
            text: msg::JOB_LOST.to_owned(),
        };
        self.finish(job_id, outcome, now_seconds(), true);
    }

    fn finish(&self, job_id: &JobId, outcome: Outcome, completed_at: f64, lost: bool) {
        let event = {
            let mut table = self.table();
            let Some(job) = table.jobs.get_mut(job_id) else {
                return;
            };
            if job.outcome.is_some() {
                return;
            }
            let success = outcome.success;
            job.outcome = Some(outcome);
            job.completed_at = Some(completed_at);
            job.lost = lost;
            let event = Event::JobCompleted {
                job_id: job_id.clone(),
                tool_id: job.tool_id.clone(),
                tool: job.tool.clone(),
                success,
            };
            table.queue.push_back(job_id.clone());
            event
        };
        self.emit(event);
        self.changed.notify_waiters();
    }

    fn pop(&self) -> Option<Delivery> {
        let table = &mut *self.table();
        while let Some(job_id) = table.queue.pop_front() {
            let Some(job) = table.jobs.get(&job_id) else {
                continue;
            };
            let Some(outcome) = job.outcome.clone() else {
                continue;
            };
            return Some(Delivery {
                tool_id: job.tool_id.clone(),
                tool: job.tool.clone(),
                save_to: job.save_to.clone(),
                lost: job.lost,
                outcome,
                job_id,
            });
        }
        None
    }

    fn requeue(&self, job_id: JobId) {
        self.table().queue.push_front(job_id);
    }

    fn delivered(&self, job_id: &JobId) {
        self.table().jobs.remove(job_id);
    }

    fn queued(&self, job_id: JobId, job: LiveJob) {
        let mut table = self.table();
        table.jobs.insert(job_id.clone(), job);
        table.queue.push_back(job_id);
    }
}

/// What starting a background call gave.
pub(super) enum Started {
    /// The job runs.
    Job,
    /// The call ended at once (no command, a sandbox error, a spawn failure).
    Finished(Finished),
}

impl Executor {
    /// Starts a call as a background job (spec §7.5 steps 5 and 8): a job id (the one its
    /// result already names, when it ran before), the journal entry, the placeholder, then the
    /// task or detached process.
    pub(super) async fn start_job(
        &self,
        call: super::Call,
        found: Arc<dyn Tool>,
        settings: &Settings,
        save_to: Option<String>,
    ) -> Result<Started, ExecutorError> {
        let super::Call { id, tool, input } = call;
        let job_id = self.job_id_for(&id, settings).await?;
        let token = CancellationToken::new();
        let ctx = self
            .context(&id, &tool, found.definition(), settings, token.clone())
            .await?;
        let mut record =
            JobRecord::running(&job_id, id.as_str(), &tool, input.clone(), save_to.clone());
        let started_at = record.started_at;
        let journal = settings.journal.clone();
        #[cfg(unix)]
        let mut spawned = None;
        #[cfg(unix)]
        if let (Some(detach), Some(journal)) = (found.detach(), journal.as_ref()) {
            let command = match detach.command(&input, &ctx) {
                Ok(command) => command,
                Err(output) => return Ok(Started::Finished(finished(id, tool, output))),
            };
            let marker = format!("{job_id}.{}.{started_at}", std::process::id());
            let output = journal.output_path(job_id.as_str());
            let exit = journal.exit_path(job_id.as_str());
            match crate::jobs::process::spawn(&command, &output, &exit, &marker) {
                Ok(process) => {
                    record.process = Some(process.process);
                    record.marker = Some(marker);
                    record.timeout_seconds = command.timeout.map(|t| t.as_secs_f64());
                    record.deadline = command.timeout.map(|t| started_at + t.as_secs_f64());
                    spawned = Some(process.child);
                }
                Err(error) => {
                    tracing::warn!(tool_id = %id, %error, "background command not started");
                    let output = ToolOutput::error(msg::JOB_START);
                    return Ok(Started::Finished(finished(id, tool, output)));
                }
            }
        }
        if let Some(journal) = &journal
            && let Err(error) = journal.write(&record)
        {
            self.emit(Event::Warning(format!(
                "job {job_id}: journal not written ({error}); the job will not survive this host"
            )));
        }
        crash_point("job-journaled");
        self.jobs.insert(
            job_id.clone(),
            LiveJob {
                tool_id: id.clone(),
                tool: tool.clone(),
                started_at,
                completed_at: None,
                token: token.clone(),
                outcome: None,
                save_to,
                lost: false,
            },
        );
        self.write_job_placeholder(&id, &job_id, settings).await?;
        self.emit(Event::JobSubmitted {
            job_id: job_id.clone(),
            tool_id: id.clone(),
            tool: tool.clone(),
        });
        let shared = Arc::clone(&self.jobs);
        #[cfg(unix)]
        if let (Some(process), Some(journal)) = (record.process, journal) {
            let watch = Watcher {
                record,
                journal,
                child: spawned,
            };
            tokio::spawn(watch.run(found, ctx, token, shared, process));
            return Ok(Started::Job);
        }
        tokio::spawn(async move {
            let done = run_one(found, id, tool, input, ctx, token, None).await;
            shared.complete(&job_id, &done.output);
        });
        Ok(Started::Job)
    }

    /// The job id for a call: the one its result names already, else a fresh one no other
    /// result, Job Result, or journal entry uses (spec §8.2).
    async fn job_id_for(
        &self,
        id: &ToolUseId,
        settings: &Settings,
    ) -> Result<JobId, ExecutorError> {
        let (taken, existing) = self
            .with_document(|doc, _| {
                let existing = flemma_ast::find_tool_result_by_id(doc, id.as_str())
                    .and_then(|r| r.node.job_id().map(JobId::sanitized));
                (referenced_jobs(doc), existing)
            })
            .await?;
        if let Some(existing) = existing {
            return Ok(existing);
        }
        let journaled: HashSet<String> = settings
            .journal
            .as_ref()
            .map(|j| j.read_all().into_iter().map(|r| r.job_id).collect())
            .unwrap_or_default();
        Ok(new_job_id(|candidate| {
            taken.contains(candidate)
                || journaled.contains(candidate)
                || self.jobs.live_status(candidate).is_some()
        }))
    }

    /// Header `job=<id>` and the tracked or untracked placeholder text (spec §8.3), one edit.
    pub(super) async fn write_job_placeholder(
        &self,
        id: &ToolUseId,
        job_id: &JobId,
        settings: &Settings,
    ) -> Result<(), ExecutorError> {
        let tracked = self
            .setup
            .registry
            .tool_set(&settings.options)
            .iter()
            .any(|t| t.definition().name().as_str() == crate::jobs::status::NAME);
        let text = if tracked {
            msg::job_executing_tracked(job_id.as_str())
        } else {
            msg::JOB_EXECUTING_UNTRACKED.to_owned()
        };
        let writer = settings.writer;
        let modeline = format!("job={job_id}");
        let mut placed = false;
        loop {
            let mut missing = false;
            self.edit(|doc| {
                let header = match writer::set_modeline(doc, id.as_str(), &modeline) {
                    Ok(edit) => edit,
                    Err(flemma_ast::AstError::UnknownToolResult { .. }) if !placed => {
                        missing = true;
                        return writer::insert_placeholders(
                            doc,
                            &[(id.as_str(), flemma_ast::ToolStatus::Approved)],
                            writer,
                        )
                        .or_else(|e| match e {
                            flemma_ast::AstError::UnknownToolUse { .. } => Ok(Vec::new()),
                            other => Err(other),
                        })
                        .map_err(ExecutorError::Edit);
                    }
                    Err(flemma_ast::AstError::UnknownToolResult { .. }) => return Ok(Vec::new()),
                    Err(error) => return Err(ExecutorError::Edit(error)),
                };
                let body = writer::rewrite_fence_body(doc, id.as_str(), &text, writer)
                    .map_err(ExecutorError::Edit)?;
                Ok(vec![header, body])
            })
            .await?;
            if missing && !placed {
                placed = true;
                continue;
            }
            return Ok(());
        }
    }

    /// Moves the running foreground call `id` to the background (spec §8.1, host-initiated):
    /// it gets a job id and its placeholder, and the cycle that started it stops waiting for
    /// it. The call itself keeps running in this host (a call already running cannot move to
    /// a process of its own), so it ends with the host.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Action`]-like texts of spec §8.1 as [`ExecutorError::Job`]:
    /// `Tool <id> is not currently executing`, `Tool <id> has already completed`,
    /// `Tool <id> is already running in background`, and synchronous tools.
    pub async fn background(&self, id: &str) -> Result<JobId, ExecutorError> {
        if self.jobs.job_of(id).is_some() {
            return Err(ExecutorError::Job(msg::already_background(id)));
        }
        let settings = self.settings().await?;
        let Some((tool, handoff)) = self.take_handoff(id) else {
            let final_result = self
                .with_document(|doc, _| {
                    flemma_ast::find_tool_result_by_id(doc, id)
                        .is_some_and(|r| r.node.status.is_none() && r.node.job_id().is_none())
                })
                .await?;
            return Err(ExecutorError::Job(if final_result {
                msg::already_completed(id)
            } else {
                msg::not_executing(id)
            }));
        };
        let Some(handoff) = handoff else {
            return Err(ExecutorError::Job(msg::sync_not_backgroundable(
                tool.as_str(),
            )));
        };
        let tool_id = ToolUseId::sanitized(id);
        let job_id = self.job_id_for(&tool_id, &settings).await?;
        let token = handoff.token.clone();
        let record = JobRecord::running(&job_id, id, &tool, Value::Null, handoff.save_to.clone());
        let started_at = record.started_at;
        if let Some(journal) = &settings.journal
            && let Err(error) = journal.write(&record)
        {
            tracing::warn!(job = %job_id, %error, "job not journaled");
        }
        self.jobs.insert(
            job_id.clone(),
            LiveJob {
                tool_id: tool_id.clone(),
                tool: tool.clone(),
                started_at,
                completed_at: None,
                token,
                outcome: None,
                save_to: handoff.save_to.clone(),
                lost: false,
            },
        );
        self.write_job_placeholder(&tool_id, &job_id, &settings)
            .await?;
        let shared = Arc::clone(&self.jobs);
        let job = job_id.clone();
        // The cycle hands the call's task over; its result goes to the queue.
        let _ = handoff.sender.send(Box::new(move |done: Finished| {
            shared.complete(&job, &done.output);
        }));
        self.emit(Event::JobSubmitted {
            job_id: job_id.clone(),
            tool_id,
            tool,
        });
        Ok(job_id)
    }

    /// Writes the Job Results of every finished job, first finished first (spec §8.5):
    /// store materialisation with `source = "job"` or the `flemma.save_to` redirect, the block
    /// placed by the delivery rules, then the journal marked `delivered`. Every cycle runs it
    /// when no foreground call is running; a host runs it at its own idle points and before a
    /// user's send.
    ///
    /// # Errors
    ///
    /// When the conversation cannot be written; the job stays queued then.
    pub async fn drain_jobs(&self) -> Result<Vec<Delivered>, ExecutorError> {
        let mut delivered = Vec::new();
        let Some(first) = self.jobs.pop() else {
            return Ok(delivered);
        };
        let settings = match self.settings().await {
            Ok(settings) => settings,
            Err(error) => {
                self.jobs.requeue(first.job_id);
                return Err(error);
            }
        };
        let mut next = Some(first);
        while let Some(item) = next.take() {
            let job_id = item.job_id.clone();
            match self.deliver(item, &settings).await {
                Ok(done) => delivered.push(done),
                Err(error) => {
                    self.jobs.requeue(job_id);
                    return Err(error);
                }
            }
            next = self.jobs.pop();
        }
        Ok(delivered)
    }

    async fn deliver(
        &self,
        item: Delivery,
        settings: &Settings,
    ) -> Result<Delivered, ExecutorError> {
        let text = match &settings.store {
            Some(store) if !item.lost => self.store_job(store, &item, settings).await,
            _ => item.outcome.text.clone(),
        };
        let writer = settings.writer;
        let block = writer::job_result_lines(&item.job_id, !item.outcome.success, &text, writer);
        let mut placement = writer::JobPlacement::Appended;
        let error_modeline = format!("error job={}", item.job_id);
        self.edit(|doc| {
            let (edit, placed) = writer::place_job_result(doc, &item.job_id, block.clone());
            placement = placed;
            let mut edits = vec![edit];
            if item.lost
                && let Ok(header) =
                    writer::set_modeline(doc, item.tool_id.as_str(), &error_modeline)
            {
                edits.push(header);
            }
            Ok(edits)
        })
        .await?;
        crash_point("job-result-written");
        if let Some(journal) = &settings.journal {
            let state = if item.lost {
                JobState::Lost
            } else {
                JobState::Delivered
            };
            let marked = journal.update(item.job_id.as_str(), |record| {
                record.state = state;
                (true, ())
            });
            match marked {
                // The result is in the conversation (and its overflow, if any, in the store):
                // a detached job's raw output and exit file have served their purpose.
                Ok(_) => {
                    let _ = std::fs::remove_file(journal.output_path(item.job_id.as_str()));
                    let _ = std::fs::remove_file(journal.exit_path(item.job_id.as_str()));
                }
                Err(error) => {
                    tracing::warn!(job = %item.job_id, %error, "job delivery not journaled");
                }
            }
        }
        self.jobs.delivered(&item.job_id);
        let delivered = Delivered {
            job_id: item.job_id,
            tool_id: item.tool_id,
            tool: item.tool,
            success: item.outcome.success,
            placement,
        };
        self.emit(Event::JobDelivered(delivered.clone()));
        Ok(delivered)
    }

    /// Store materialisation (`source = "job"`) or the `flemma.save_to` redirect of a
    /// delivery; the text the Job Result holds.
    async fn store_job(&self, store: &Arc<Store>, item: &Delivery, settings: &Settings) -> String {
        let text = &item.outcome.text;
        let save = item.save_to.clone().filter(|_| item.outcome.success);
        let completion = super::complete::Completion {
            id: super::complete::StoreId::Job(item.job_id.clone()),
            tool: item.tool.clone(),
            materialize: (save.is_none() && store.materializes())
                .then(|| (text.clone(), item.outcome.success)),
            save: save.map(|dest| (dest, text.clone())),
        };
        self.store_output(store, &settings.sandbox, completion)
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
        let mut delivered = Vec::new();
        loop {
            let changed = self.jobs.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            delivered.extend(self.drain_jobs().await?);
            if !self.jobs.any_running() {
                return Ok(delivered);
            }
            changed.await;
        }
    }

    /// How many background jobs this executor runs now.
    pub fn running_jobs(&self) -> usize {
        self.jobs.running()
    }

    /// Waits until one of this executor's background jobs finishes (at once when none runs),
    /// without delivering it: a host that debounces deliveries (spec §7.10 `resume_delay`)
    /// waits on this, then calls [`Executor::drain_jobs`].
    pub async fn job_finished(&self) {
        let changed = self.jobs.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if self.jobs.any_running() && !self.jobs.any_queued() {
            changed.await;
        }
    }

    /// Cancels the background job `job_id`: its Job Result says `User aborted tool
    /// execution.` Returns whether it was running.
    pub fn cancel_job(&self, job_id: &str) -> bool {
        self.jobs.cancel_job(job_id)
    }

    /// Orphan recovery and re-adoption (spec §8.8, with the journal): run when a conversation
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
        let settings = self.settings().await?;
        let (references, job_results) = self
            .with_document(|doc, _| (job_references(doc), delivered_jobs(doc)))
            .await?;
        let records = settings
            .journal
            .as_ref()
            .map(Journal::read_all)
            .unwrap_or_default();
        let me = ProcessRef::current();
        let mut report = Recovery::default();
        let mut lost: Vec<(JobId, ToolUseId, ToolName)> = Vec::new();
        let mut seen = HashSet::new();
        for record in records {
            let job_id = record.job_id();
            seen.insert(job_id.as_str().to_owned());
            if self.jobs.live_status(job_id.as_str()).is_some() {
                continue;
            }
            // A live host (this process included: another executor of it) delivers its own
            // jobs; only a gone host's are taken over.
            if matches!(record.state, JobState::Running | JobState::Completed)
                && record.owner.is_some_and(|owner| owner.is_alive())
            {
                report.elsewhere.push(job_id);
                continue;
            }
            match record.state {
                JobState::Delivered | JobState::Lost => {}
                JobState::Completed => {
                    let Some(outcome) = record.outcome.clone() else {
                        lost.push((job_id, record.tool_id(), record.tool()));
                        continue;
                    };
                    self.requeue_record(&record, outcome);
                    report.finished.push(job_id);
                }
                JobState::Running => match self.adopt(&record, me, &settings).await? {
                    Adoption::Adopted => report.adopted.push(job_id),
                    Adoption::Elsewhere => report.elsewhere.push(job_id),
                    Adoption::Lost => lost.push((job_id, record.tool_id(), record.tool())),
                },
            }
        }
        // Results that name a job nobody journaled (another host's transcript, an old one):
        // without a Job Result, they are lost (spec §8.8).
        for (job_id, tool_id, tool) in references {
            if !seen.contains(job_id.as_str())
                && !job_results.contains(job_id.as_str())
                && self.jobs.live_status(job_id.as_str()).is_none()
                && !lost.iter().any(|(j, ..)| j == &job_id)
            {
                lost.push((job_id, tool_id, tool));
            }
        }
        self.place_missing_placeholders(&report, &settings).await?;
        for (job_id, tool_id, tool) in lost {
            self.jobs.queued(
                job_id.clone(),
                LiveJob {
                    tool_id,
                    tool,
                    started_at: now_seconds(),
                    completed_at: Some(now_seconds()),
                    token: CancellationToken::new(),
                    outcome: Some(Outcome {
                        success: false,
                        text: msg::JOB_LOST.to_owned(),
                    }),
                    save_to: None,
                    lost: true,
                },
            );
            report.lost.push(job_id);
        }
        if !(report.adopted.is_empty()
            && report.elsewhere.is_empty()
            && report.finished.is_empty()
            && report.lost.is_empty())
        {
            self.emit(Event::JobsRecovered(report.clone()));
        }
        self.drain_jobs().await?;
        Ok(report)
    }

    /// A host that died between journaling a job and writing its placeholder left the result
    /// without `job=`: a re-adopted job gets its placeholder now (spec §7.5 step 3).
    async fn place_missing_placeholders(
        &self,
        report: &Recovery,
        settings: &Settings,
    ) -> Result<(), ExecutorError> {
        let placeholders: Vec<(ToolUseId, JobId)> = self
            .with_document(|doc, _| {
                report
                    .adopted
                    .iter()
                    .chain(&report.finished)
                    .filter_map(|job| {
                        let live = self.jobs.live_status(job.as_str())?;
                        let result = flemma_ast::find_tool_result_by_id(doc, live.tool_id.as_str());
                        let named = result.is_some_and(|r| r.node.job_id() == Some(job.as_str()));
                        (!named).then(|| (live.tool_id, job.clone()))
                    })
                    .collect()
            })
            .await?;
        for (tool_id, job_id) in placeholders {
            self.write_job_placeholder(&tool_id, &job_id, settings)
                .await?;
        }
        Ok(())
    }

    fn requeue_record(&self, record: &JobRecord, outcome: Outcome) {
        self.jobs.queued(
            record.job_id(),
            LiveJob {
                tool_id: record.tool_id(),
                tool: record.tool(),
                started_at: record.started_at,
                completed_at: record.completed_at,
                token: CancellationToken::new(),
                outcome: Some(outcome),
                save_to: record.save_to.clone(),
                lost: false,
            },
        );
    }

    /// Takes a running job over from a host that is gone, or leaves it to a live one.
    async fn adopt(
        &self,
        record: &JobRecord,
        me: Option<ProcessRef>,
        settings: &Settings,
    ) -> Result<Adoption, ExecutorError> {
        let Some(journal) = settings.journal.clone() else {
            return Ok(Adoption::Lost);
        };
        #[cfg(unix)]
        if let Some(process) = record.process {
            let exited = journal.exit_status(&record.job_id).is_some();
            if !exited && !process.is_alive() {
                return Ok(Adoption::Lost);
            }
            // Claim it under the journal's lock: another host may be opening the same
            // conversation.
            let claimed = journal
                .update(&record.job_id, |current| {
                    let taken = current.owner.is_some_and(|owner| owner.is_alive());
                    if taken || current.state != JobState::Running {
                        return (false, None);
                    }
                    current.owner = me;
                    (true, Some(current.clone()))
                })
                .map_err(|error| ExecutorError::Job(format!("job journal: {error}")))?
                .flatten();
            let Some(record) = claimed else {
                return Ok(Adoption::Elsewhere);
            };
            let id = record.tool_id();
            let tool = record.tool();
            let token = CancellationToken::new();
            let found = self.setup.registry.get(tool.as_str());
            let ctx = match &found {
                Some(found) => {
                    self.context(&id, &tool, found.definition(), settings, token.clone())
                        .await?
                }
                None => crate::context::ExecutionContext::builder(id.clone(), tool.clone())
                    .options(Arc::clone(&settings.options))
                    .cancellation(token.clone())
                    .build()?,
            };
            self.jobs.insert(
                record.job_id(),
                LiveJob {
                    tool_id: id,
                    tool,
                    started_at: record.started_at,
                    completed_at: None,
                    token: token.clone(),
                    outcome: None,
                    save_to: record.save_to.clone(),
                    lost: false,
                },
            );
            let watcher = Watcher {
                record,
                journal,
                child: None,
            };
            tokio::spawn(watcher.run_adopted(found, ctx, token, Arc::clone(&self.jobs), process));
            return Ok(Adoption::Adopted);
        }
        // An in-process job whose host is gone.
        Ok(Adoption::Lost)
    }

    /// The conversation's jobs: the journal's, this executor's, and those the transcript
    /// names without either. Of those (spec §8.8): one whose Job Result is in the transcript
    /// was delivered (by another host), unless it is the lost marker recovery writes (the
    /// call's header `error job=J`); one without a Job Result is lost.
    ///
    /// # Errors
    ///
    /// When the conversation cannot be read or the options do not evaluate.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>, ExecutorError> {
        let settings = self.settings().await?;
        let (references, job_results, marked_lost) = self
            .with_document(|doc, _| (job_references(doc), delivered_jobs(doc), lost_jobs(doc)))
            .await?;
        let now = now_seconds();
        let mut jobs: Vec<JobInfo> = Vec::new();
        let records = settings
            .journal
            .as_ref()
            .map(Journal::read_all)
            .unwrap_or_default();
        for record in &records {
            let live = self.jobs.live_status(&record.job_id);
            let state = match (&live, record.state) {
                (Some(live), _) if live.delivery_pending => JobState::Completed,
                (Some(_), _) => JobState::Running,
                (None, JobState::Running) => running_state(record, settings.journal.as_ref()),
                (None, state) => state,
            };
            let end = match state {
                JobState::Running => Some(now),
                _ => record.completed_at,
            };
            jobs.push(JobInfo {
                job_id: record.job_id(),
                tool_id: record.tool_id(),
                tool: record.tool(),
                state,
                elapsed_seconds: live
                    .map(|l| l.elapsed_seconds)
                    .or_else(|| end.map(|end| (end - record.started_at).max(0.0))),
            });
        }
        for (job_id, tool_id, tool) in references {
            if jobs.iter().any(|j| j.job_id == job_id) {
                continue;
            }
            let state = if marked_lost.contains(job_id.as_str()) {
                JobState::Lost
            } else if job_results.contains(job_id.as_str()) {
                JobState::Delivered
            } else if let Some(live) = self.jobs.live_status(job_id.as_str()) {
                if live.delivery_pending {
                    JobState::Completed
                } else {
                    JobState::Running
                }
            } else {
                JobState::Lost
            };
            jobs.push(JobInfo {
                job_id,
                tool_id,
                tool,
                state,
                elapsed_seconds: None,
            });
        }
        Ok(jobs)
    }
}

/// The state of a journaled job that says `running` and that this executor does not watch.
fn running_state(record: &JobRecord, journal: Option<&Journal>) -> JobState {
    if let Some(process) = record.process {
        if journal.is_some_and(|j| j.exit_status(&record.job_id).is_some()) {
            return JobState::Completed;
        }
        if process.is_alive() {
            return JobState::Running;
        }
        return JobState::Lost;
    }
    if record.owner.is_some_and(|owner| owner.is_alive()) {
        JobState::Running
    } else {
        JobState::Lost
    }
}

enum Adoption {
    Adopted,
    Elsewhere,
    Lost,
}

/// The hand-over of a running foreground call to the background.
pub(super) struct Handoff {
    pub(super) token: CancellationToken,
    pub(super) save_to: Option<String>,
    pub(super) sender: tokio::sync::oneshot::Sender<Box<dyn FnOnce(Finished) + Send>>,
}

/// Watches a detached job until it ends, then records and queues its result.
#[cfg(unix)]
struct Watcher {
    record: JobRecord,
    journal: Journal,
    child: Option<tokio::process::Child>,
}

#[cfg(unix)]
impl Watcher {
    async fn run(
        self,
        tool: Arc<dyn Tool>,
        ctx: crate::context::ExecutionContext,
        token: CancellationToken,
        shared: Arc<JobShared>,
        process: ProcessRef,
    ) {
        self.run_adopted(Some(tool), ctx, token, shared, process)
            .await;
    }

    async fn run_adopted(
        self,
        tool: Option<Arc<dyn Tool>>,
        ctx: crate::context::ExecutionContext,
        token: CancellationToken,
        shared: Arc<JobShared>,
        process: ProcessRef,
    ) {
        use crate::jobs::process::{Watch, Watched, watch};
        let exit = self.journal.exit_path(&self.record.job_id);
        let watched = watch(
            Watch {
                process,
                child: self.child,
                exit: &exit,
                deadline: self.record.deadline,
                marker: self.record.marker.as_deref(),
            },
            &token,
        )
        .await;
        let job_id = self.record.job_id();
        let ending = match watched {
            Watched::Exited(code) => DetachedEnding::Exited(code),
            Watched::TimedOut => DetachedEnding::TimedOut,
            Watched::Cancelled => DetachedEnding::Cancelled,
            Watched::Vanished => {
                shared.vanish(&job_id);
                return;
            }
        };
        let output_path = self.journal.output_path(&self.record.job_id);
        let input = self.record.input.clone();
        let output =
            tokio::task::spawn_blocking(move || match tool.as_ref().and_then(|t| t.detach()) {
                Some(detach) => detach.result(&input, &ctx, &output_path, ending),
                None => plain_result(&output_path, ending),
            })
            .await
            .unwrap_or_else(|error| ToolOutput::error(error.to_string()));
        shared.complete(&job_id, &output);
    }
}

/// The result of a detached job whose tool is not registered in this host: its output, and
/// the exit code when it failed.
#[cfg(unix)]
fn plain_result(output: &Path, ending: DetachedEnding) -> ToolOutput {
    let text = std::fs::read(output)
        .map(|bytes| String::from_utf8_lossy(&bytes).trim_end().to_owned())
        .unwrap_or_default();
    let text = if text.is_empty() {
        msg::NO_OUTPUT.to_owned()
    } else {
        text
    };
    match ending {
        DetachedEnding::Exited(0) => ToolOutput::text(text),
        DetachedEnding::Exited(code) => {
            ToolOutput::error(format!("{text}\n\n{}", msg::exit_code(code)))
        }
        DetachedEnding::TimedOut | DetachedEnding::Cancelled => {
            ToolOutput::error(msg::ABORTED).with_partial_output(text)
        }
    }
}

fn finished(id: ToolUseId, tool: ToolName, output: ToolOutput) -> Finished {
    Finished {
        id,
        tool,
        output,
        save_to: None,
        overflow: None,
        overflow_error: None,
    }
}

/// Every job id the document references: `meta.job` of tool results and Job Result ids.
fn referenced_jobs(doc: &Document) -> HashSet<String> {
    let mut ids = HashSet::new();
    for message in &doc.messages {
        for result in message.tool_results() {
            if let Some(job) = result.job_id() {
                ids.insert(job.to_owned());
            }
        }
        for job in message.job_results() {
            ids.insert(job.job_id.as_str().to_owned());
        }
    }
    ids
}

/// The jobs tool results name, with their calls and tools (from the tool uses; `unknown`).
fn job_references(doc: &Document) -> Vec<(JobId, ToolUseId, ToolName)> {
    let mut out = Vec::new();
    for message in &doc.messages {
        for result in message.tool_results() {
            if let Some(job) = result.job_id() {
                let tool = flemma_ast::find_tool_use_by_id(doc, result.tool_use_id.as_str())
                    .map_or_else(|| ToolName::sanitized("unknown"), |u| u.node.name.clone());
                out.push((JobId::sanitized(job), result.tool_use_id.clone(), tool));
            }
        }
    }
    out
}

/// The jobs whose call's header says `error job=J`: what recovery writes for a lost job
/// (spec §8.8), next to its Job Result `Job lost: …`.
fn lost_jobs(doc: &Document) -> HashSet<String> {
    doc.messages
        .iter()
        .flat_map(flemma_ast::Message::tool_results)
        .filter(|r| r.status == Some(flemma_ast::ToolStatus::Error))
        .filter_map(|r| r.job_id().map(str::to_owned))
        .collect()
}

/// The ids of the Job Results in the document.
fn delivered_jobs(doc: &Document) -> HashSet<String> {
    doc.messages
        .iter()
        .flat_map(flemma_ast::Message::job_results)
        .map(|j| j.job_id.as_str().to_owned())
        .collect()
}
