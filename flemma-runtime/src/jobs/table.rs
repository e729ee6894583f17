//! [`Jobs`]: one executor's background jobs. The table of the jobs it runs or has finished,
//! the FIFO delivery queue, the journal, and the events they cause; shared with the tasks
//! that watch the jobs and, as a [`JobLookup`], with `flemma.jobs.status`.
//!
//! The rest of the jobs' life is in the sibling modules, as methods of [`Jobs`]: entering the
//! background (`start`), delivery (`deliver`), recovery, adoption and the listing
//! (`recover`), each given the executor as its [`JobHost`](super::host::JobHost).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use flemma_ids::{JobId, ToolName, ToolUseId};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::JobState;
use super::journal::FileJournal;
use super::support::{crash_point, now_seconds};
use super::{JobJournal, JobRecord, Outcome, Recorded};
use crate::events::Event;
use crate::fanout::Fanout;
use crate::messages as msg;
use flemma_core::ToolOutput;
use flemma_core::{JobLookup, JobStatus};

/// One job this executor knows: running, or finished and waiting for delivery.
#[derive(Debug)]
pub(super) struct LiveJob {
    pub(super) tool_id: ToolUseId,
    pub(super) tool: ToolName,
    pub(super) started_at: f64,
    pub(super) completed_at: Option<f64>,
    pub(super) token: CancellationToken,
    pub(super) outcome: Option<Outcome>,
    pub(super) save_to: Option<String>,
    /// Ended without a result: delivery also marks the header `error job=…`.
    pub(super) lost: bool,
}

impl LiveJob {
    /// A job that starts (or is taken over) now.
    pub(super) fn running(
        tool_id: ToolUseId,
        tool: ToolName,
        started_at: f64,
        token: CancellationToken,
        save_to: Option<String>,
    ) -> Self {
        Self {
            tool_id,
            tool,
            started_at,
            completed_at: None,
            token,
            outcome: None,
            save_to,
            lost: false,
        }
    }

    /// A job that finished already (while no host ran it), queued for delivery.
    pub(super) fn finished(record: &JobRecord, outcome: Outcome) -> Self {
        Self {
            completed_at: record.completed_at,
            outcome: Some(outcome),
            ..Self::running(
                record.tool_id(),
                record.tool(),
                record.started_at,
                CancellationToken::new(),
                record.save_to.clone(),
            )
        }
    }

    /// A job gone without a result.
    pub(super) fn lost(tool_id: ToolUseId, tool: ToolName) -> Self {
        let now = now_seconds();
        Self {
            completed_at: Some(now),
            outcome: Some(Outcome::new(false, msg::JOB_LOST)),
            lost: true,
            ..Self::running(tool_id, tool, now, CancellationToken::new(), None)
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    jobs: HashMap<JobId, LiveJob>,
    queue: VecDeque<JobId>,
}

/// A finished job taken off the queue.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub(crate) job_id: JobId,
    pub(crate) tool_id: ToolUseId,
    pub(crate) tool: ToolName,
    pub(crate) outcome: Outcome,
    pub(crate) save_to: Option<String>,
    pub(crate) lost: bool,
}

/// What this executor knows of one of its jobs (the first two lookups of `flemma.jobs.status`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiveStatus {
    pub(crate) delivery_pending: bool,
    pub(crate) tool_id: ToolUseId,
    pub(crate) tool: ToolName,
    pub(crate) elapsed_seconds: f64,
}

/// One executor's background jobs (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct Jobs {
    table: Mutex<Table>,
    changed: Notify,
    events: Arc<Fanout<Event>>,
    /// The journal of the conversation's store directory, and that directory.
    journal: Mutex<Option<(PathBuf, Arc<dyn JobJournal>)>>,
}

impl Jobs {
    /// No jobs yet; their events go to `events`.
    pub(crate) fn new(events: Arc<Fanout<Event>>) -> Self {
        Self {
            table: Mutex::new(Table::default()),
            changed: Notify::new(),
            events,
            journal: Mutex::new(None),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Journals jobs under `store_dir` from now on (the store directory of the options of the
    /// moment): in the journal `conversation` keeps there, or in files; none without one.
    pub(crate) fn use_store_directory(
        &self,
        store_dir: Option<&Path>,
        conversation: &dyn crate::Conversation,
    ) {
        let mut journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
        match (store_dir, journal.as_ref()) {
            (Some(dir), Some((current, _))) if current == dir => {}
            (Some(dir), _) => {
                let kept = conversation.job_journal(dir).unwrap_or_else(|| {
                    let file: Arc<dyn JobJournal> = Arc::new(FileJournal::new(dir));
                    file
                });
                *journal = Some((dir.to_owned(), kept));
            }
            (None, _) => *journal = None,
        }
    }

    /// The journal, when the conversation has a store directory.
    pub(crate) fn journal(&self) -> Option<Arc<dyn JobJournal>> {
        let journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
        journal.as_ref().map(|(_, j)| Arc::clone(j))
    }

    pub(super) fn emit(&self, event: Event) {
        self.events.emit(event);
    }

    /// Notified whenever a job finishes.
    pub(super) fn changed(&self) -> &Notify {
        &self.changed
    }

    /// Whether a job of this executor still runs.
    pub(crate) fn any_running(&self) -> bool {
        self.table().jobs.values().any(|j| j.outcome.is_none())
    }

    /// How many jobs still run.
    pub(crate) fn running(&self) -> usize {
        let table = self.table();
        table.jobs.values().filter(|j| j.outcome.is_none()).count()
    }

    /// Whether a finished job waits for delivery.
    pub(crate) fn any_queued(&self) -> bool {
        !self.table().queue.is_empty()
    }

    /// The job running the call `tool_id`.
    pub(crate) fn job_of(&self, tool_id: &str) -> Option<JobId> {
        let table = self.table();
        let mut found = table.jobs.iter().filter(|(_, j)| j.tool_id == tool_id);
        found.next().map(|(id, _)| id.clone())
    }

    /// Cancels the job running `tool_id`; whether there was one.
    pub(crate) fn cancel_call(&self, tool_id: &str) -> bool {
        let table = self.table();
        let mut job = table.jobs.values();
        job.find(|j| j.tool_id == tool_id && j.outcome.is_none())
            .map(|j| j.token.cancel())
            .is_some()
    }

    /// Cancels the job `job_id`; whether it was running.
    pub(crate) fn cancel_job(&self, job_id: &str) -> bool {
        let table = self.table();
        let job = table.jobs.get(job_id).filter(|j| j.outcome.is_none());
        job.map(|j| j.token.cancel()).is_some()
    }

    /// Cancels every job.
    pub(crate) fn cancel_all(&self) {
        for job in self.table().jobs.values() {
            job.token.cancel();
        }
    }

    /// What this executor knows of `job_id`.
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

    pub(super) fn insert(&self, job_id: JobId, job: LiveJob) {
        self.table().jobs.insert(job_id, job);
    }

    /// A job finished: its result goes to the journal (so it survives this host), then to
    /// the delivery queue.
    pub(crate) async fn complete(&self, job_id: &JobId, output: &ToolOutput) {
        let outcome = Outcome::new(output.is_success(), output.result_text());
        let completed_at = now_seconds();
        if let Some(journal) = self.journal() {
            let journaled = outcome.clone();
            let change = Box::new(move |record: &mut JobRecord| {
                if matches!(record.state, JobState::Delivered | JobState::Lost) {
                    return false;
                }
                record.state = JobState::Completed;
                record.completed_at = Some(completed_at);
                record.outcome = Some(journaled.clone());
                true
            });
            if let Err(error) = journal.update(job_id.as_str(), change).await {
                tracing::warn!(job = %job_id, %error, "job result not journaled");
            }
        }
        crash_point("job-completed");
        self.finish(job_id, outcome, completed_at, false);
    }

    /// A job's process is gone without a recorded status.
    pub(super) fn vanish(&self, job_id: &JobId) {
        let outcome = Outcome::new(false, msg::JOB_LOST);
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

    /// The first finished job in the queue.
    pub(super) fn pop(&self) -> Option<Delivery> {
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

    /// Puts a job whose delivery failed back at the head of the queue.
    pub(super) fn requeue(&self, job_id: JobId) {
        self.table().queue.push_front(job_id);
    }

    pub(super) fn delivered(&self, job_id: &JobId) {
        self.table().jobs.remove(job_id);
    }

    /// A finished job, queued for delivery.
    pub(super) fn queued(&self, job_id: JobId, job: LiveJob) {
        let mut table = self.table();
        table.jobs.insert(job_id.clone(), job);
        table.queue.push_back(job_id);
    }
}

#[async_trait::async_trait]
impl JobLookup for Jobs {
    async fn job_status(&self, job_id: &str) -> Option<JobStatus> {
        if let Some(live) = self.live_status(job_id) {
            return Some(JobStatus {
                delivery_pending: live.delivery_pending,
                tool_id: live.tool_id.as_str().to_owned(),
                tool: live.tool.as_str().to_owned(),
                elapsed_seconds: live.elapsed_seconds,
            });
        }
        let journal = self.journal()?;
        let record = journal.get(job_id).await?;
        // Running in another live host; or, on another machine, left to that machine while it
        // lives (as recovery leaves it).
        let running = record.state == JobState::Running
            && (journal.lives(&record, Recorded::Owner).await
                || (!journal.is_local(&record)
                    && record.process.is_some()
                    && journal.lives(&record, Recorded::Process).await));
        if !running && record.state != JobState::Completed {
            return None;
        }
        let end = record.completed_at.unwrap_or_else(now_seconds);
        Some(JobStatus {
            delivery_pending: !running,
            elapsed_seconds: end - record.started_at,
            tool_id: record.tool_id,
            tool: record.tool,
        })
    }
}
