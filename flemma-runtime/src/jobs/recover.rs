//! Orphan recovery and re-adoption (with the journal), and the listing of a
//! conversation's jobs.

use std::collections::HashSet;
use std::sync::Arc;

use flemma_ast::Document;
use flemma_ids::{JobId, ToolName, ToolUseId};
use tokio_util::sync::CancellationToken;

use super::JobState;
use super::host::JobHost;
use super::support::now_seconds;
use super::table::{Jobs, LiveJob};
use super::types::{JobError, JobInfo, Recovery};
use super::{JobJournal, JobRecord, JournalFiles as _, Recorded};
use crate::events::Event;
use flemma_builtins::process::ProcessRefExt as _;
use flemma_core::process::ProcessRef;

/// A job, its call and its tool.
type Reference = (JobId, ToolUseId, ToolName);

/// What became of a running job on opening.
enum Adoption {
    Adopted,
    Elsewhere,
    Lost,
}

impl Jobs {
    /// Looks at every job the conversation references: jobs whose process still
    /// runs are watched again, jobs that finished while no host ran, or whose delivery was
    /// interrupted, are queued and delivered; only jobs gone without a result are lost.
    pub(crate) async fn recover<H: JobHost>(
        self: &Arc<Self>,
        host: &H,
    ) -> Result<Recovery, H::Error> {
        let settings = host.settings().await?;
        let (references, job_results) = host
            .read(|doc| (job_references(doc), delivered_jobs(doc)))
            .await?;
        let journal = self.journal();
        let records = match &journal {
            Some(journal) => journal.list().await,
            None => Vec::new(),
        };
        let mut report = Recovery::default();
        let mut lost: Vec<Reference> = Vec::new();
        let mut seen = HashSet::new();
        if let Some(journal) = &journal {
            for record in records {
                seen.insert(record.job_id.clone());
                self.recover_record(host, &settings, journal, record, &mut report, &mut lost)
                    .await?;
            }
        }
        // Results that name a job nobody journaled (another host's transcript, an old one):
        // without a Job Result, they are lost (spec §8.8).
        for (job_id, tool_id, tool) in references {
            if !seen.contains(job_id.as_str())
                && !job_results.contains(job_id.as_str())
                && self.live_status(job_id.as_str()).is_none()
                && !lost.iter().any(|(j, ..)| j == &job_id)
            {
                lost.push((job_id, tool_id, tool));
            }
        }
        self.place_missing_placeholders(host, &report, &settings)
            .await?;
        for (job_id, tool_id, tool) in lost {
            self.queued(job_id.clone(), LiveJob::lost(tool_id, tool));
            report.lost.push(job_id);
        }
        if !(report.adopted.is_empty()
            && report.elsewhere.is_empty()
            && report.finished.is_empty()
            && report.lost.is_empty())
        {
            self.emit(Event::JobsRecovered(report.clone()));
        }
        self.drain(host).await?;
        Ok(report)
    }

    /// What one journal entry says on opening, into `report` (or `lost`).
    async fn recover_record<H: JobHost>(
        self: &Arc<Self>,
        host: &H,
        settings: &H::Settings,
        journal: &Arc<dyn JobJournal>,
        record: JobRecord,
        report: &mut Recovery,
        lost: &mut Vec<Reference>,
    ) -> Result<(), H::Error> {
        let job_id = record.job_id();
        if self.live_status(job_id.as_str()).is_some() {
            return Ok(());
        }
        // A live host (this process included: another executor of it; or a host of another
        // machine, as the journal knows it) delivers its own jobs; only a gone host's are
        // taken over.
        if matches!(record.state, JobState::Running | JobState::Completed)
            && journal.lives(&record, Recorded::Owner).await
        {
            report.elsewhere.push(job_id);
            return Ok(());
        }
        match record.state {
            // Its result is in the conversation: files of it left here (a host that died
            // between writing the Job Result and removing them, or a job another machine
            // answered lost while it ran here) have served their purpose.
            JobState::Delivered | JobState::Lost => {
                if journal.is_local(&record) {
                    journal.remove_files(&record.job_id).await;
                }
            }
            JobState::Completed => {
                let Some(outcome) = record.outcome.clone() else {
                    lost.push((job_id, record.tool_id(), record.tool()));
                    return Ok(());
                };
                self.queued(job_id.clone(), LiveJob::finished(&record, outcome));
                report.finished.push(job_id);
            }
            JobState::Running => match self.adopt(host, settings, journal, &record).await? {
                Adoption::Adopted => report.adopted.push(job_id),
                Adoption::Elsewhere => report.elsewhere.push(job_id),
                Adoption::Lost => lost.push((job_id, record.tool_id(), record.tool())),
            },
        }
        Ok(())
    }

    /// A host that died between journaling a job and writing its placeholder left the result
    /// without `job=`: a re-adopted job gets its placeholder now.
    async fn place_missing_placeholders<H: JobHost>(
        &self,
        host: &H,
        report: &Recovery,
        settings: &H::Settings,
    ) -> Result<(), H::Error> {
        let placeholders: Vec<(ToolUseId, JobId)> = host
            .read(|doc| {
                report
                    .adopted
                    .iter()
                    .chain(&report.finished)
                    .filter_map(|job| {
                        let live = self.live_status(job.as_str())?;
                        let result = flemma_ast::find_tool_result_by_id(doc, live.tool_id.as_str());
                        let named = result.is_some_and(|r| r.node.job_id() == Some(job.as_str()));
                        (!named).then(|| (live.tool_id, job.clone()))
                    })
                    .collect()
            })
            .await?;
        for (tool_id, job_id) in placeholders {
            self.write_placeholder(host, settings, &tool_id, &job_id)
                .await?;
        }
        Ok(())
    }

    /// Takes a running job over from a host that is gone, or leaves it to a live one.
    async fn adopt<H: JobHost>(
        self: &Arc<Self>,
        host: &H,
        settings: &H::Settings,
        journal: &Arc<dyn JobJournal>,
        record: &JobRecord,
    ) -> Result<Adoption, H::Error> {
        if !journal.is_local(record) {
            // Another machine's process: only a host there can watch it and read its
            // output. While that machine lives, the job is left to it; once it is gone, so is
            // the job's result.
            return Ok(
                if record.process.is_some() && journal.lives(record, Recorded::Process).await {
                    Adoption::Elsewhere
                } else {
                    Adoption::Lost
                },
            );
        }
        let journal = Arc::clone(journal);
        #[cfg(unix)]
        if let Some(process) = record.process {
            let exited = journal.exit_status(&record.job_id).await.is_some();
            if !exited && !journal.lives(record, Recorded::Process).await {
                return Ok(Adoption::Lost);
            }
            // Claimed under the journal's lock: another host may be opening the same
            // conversation.
            let claimed = journal
                .claim(&record.job_id, ProcessRef::current())
                .await
                .map_err(|source| JobError::Journal { source })?;
            let Some(record) = claimed else {
                return Ok(Adoption::Elsewhere);
            };
            let (id, tool) = (record.tool_id(), record.tool());
            let token = CancellationToken::new();
            let found = host.tool(&tool);
            let ctx = host
                .context(settings, &id, &tool, found.as_ref(), token.clone())
                .await?;
            let live = LiveJob::running(
                id,
                tool,
                record.started_at,
                token.clone(),
                record.save_to.clone(),
            );
            self.insert(record.job_id(), live);
            let watcher = super::watch::Watcher {
                record,
                journal,
                child: None,
                process,
            };
            tokio::spawn(watcher.run(found, ctx, token, Arc::clone(self)));
            return Ok(Adoption::Adopted);
        }
        #[cfg(not(unix))]
        let _ = (host, settings, record, journal);
        // An in-process job whose host is gone.
        Ok(Adoption::Lost)
    }

    /// The conversation's jobs: the journal's, this executor's, and those the transcript
    /// names without either.
    pub(crate) async fn list<H: JobHost>(&self, host: &H) -> Result<Vec<JobInfo>, H::Error> {
        let (references, job_results, marked_lost) = host
            .read(|doc| (job_references(doc), delivered_jobs(doc), lost_jobs(doc)))
            .await?;
        let journal = self.journal();
        let records = match &journal {
            Some(journal) => journal.list().await,
            None => Vec::new(),
        };
        let mut jobs: Vec<JobInfo> = Vec::with_capacity(records.len());
        for record in &records {
            jobs.push(self.journaled_info(record, journal.as_deref()).await);
        }
        for (job_id, tool_id, tool) in references {
            if jobs.iter().any(|j| j.job_id == job_id) {
                continue;
            }
            let state = if marked_lost.contains(job_id.as_str()) {
                JobState::Lost
            } else if job_results.contains(job_id.as_str()) {
                JobState::Delivered
            } else {
                match self.live_status(job_id.as_str()) {
                    Some(live) if live.delivery_pending => JobState::Completed,
                    Some(_) => JobState::Running,
                    None => JobState::Lost,
                }
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

    /// A journaled job as listed: this executor's view of it first.
    async fn journaled_info(
        &self,
        record: &JobRecord,
        journal: Option<&dyn JobJournal>,
    ) -> JobInfo {
        let live = self.live_status(&record.job_id);
        let state = match (&live, record.state) {
            (Some(live), _) if live.delivery_pending => JobState::Completed,
            (Some(_), _) => JobState::Running,
            (None, JobState::Running) => running_state(record, journal).await,
            (None, state) => state,
        };
        let end = match state {
            JobState::Running => Some(now_seconds()),
            _ => record.completed_at,
        };
        JobInfo {
            job_id: record.job_id(),
            tool_id: record.tool_id(),
            tool: record.tool(),
            state,
            elapsed_seconds: live
                .map(|l| l.elapsed_seconds)
                .or_else(|| end.map(|end| (end - record.started_at).max(0.0))),
        }
    }
}

/// The jobs the journal under `store_dir` (a conversation's store directory) records, as a
/// process that watches none of them sees them: one the journal says runs is running while its
/// process or its host lives, completed once its process exited, lost otherwise. Nothing is
/// written. A reader outside any executor (a language server's hover) uses it;
/// [`Executor::jobs`](crate::Executor::jobs) adds an executor's own view and the transcript's.
pub async fn journaled(store_dir: &std::path::Path) -> Vec<JobInfo> {
    let journal = super::journal::FileJournal::new(store_dir);
    let records = journal.list().await;
    let mut out = Vec::with_capacity(records.len());
    for record in &records {
        let state = match record.state {
            JobState::Running => running_state(record, Some(&journal)).await,
            state => state,
        };
        let end = match state {
            JobState::Running => Some(now_seconds()),
            _ => record.completed_at,
        };
        out.push(JobInfo {
            job_id: record.job_id(),
            tool_id: record.tool_id(),
            tool: record.tool(),
            state,
            elapsed_seconds: end.map(|end| (end - record.started_at).max(0.0)),
        });
    }
    out
}

/// The state of a journaled job that says `running` and that this executor does not watch.
async fn running_state(record: &JobRecord, journal: Option<&dyn JobJournal>) -> JobState {
    let Some(journal) = journal else {
        return JobState::Lost;
    };
    let which = if record.process.is_some() {
        if journal.is_local(record) && journal.exit_status(&record.job_id).await.is_some() {
            return JobState::Completed;
        }
        Recorded::Process
    } else {
        Recorded::Owner
    };
    if journal.lives(record, which).await {
        JobState::Running
    } else {
        JobState::Lost
    }
}

/// The jobs tool results name, with their calls and tools (from the tool uses; `unknown`).
fn job_references(doc: &Document) -> Vec<Reference> {
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

/// The jobs whose call's header says `error job=J`: what recovery writes for a lost job, next to
/// its Job Result `Job lost: …`.
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
