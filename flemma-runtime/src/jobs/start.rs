//! Entering the background: a job id, the journal entry, the
//! placeholder, then the task or the detached process.

use std::collections::HashSet;
use std::sync::Arc;

use flemma_ast::{Document, writer};
use flemma_ids::{JobId, ToolName, ToolUseId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::host::{HostedCall, JobHost};
use super::id::new_job_id;
use super::support::crash_point;
use super::table::{Jobs, LiveJob};
use super::{JobRecord, NewRecord as _};
use crate::events::Event;
use crate::messages as msg;
use flemma_core::Tool;
use flemma_core::ToolOutput;

/// A call that goes to the background.
#[derive(Debug)]
pub(crate) struct JobCall {
    pub(crate) id: ToolUseId,
    pub(crate) tool: ToolName,
    pub(crate) input: Value,
    pub(crate) save_to: Option<String>,
}

/// What starting a background call gave.
#[derive(Debug)]
pub(crate) enum Started {
    /// The job runs.
    Job,
    /// The call ended at once (no command, a sandbox error, a spawn failure): its result.
    Finished(ToolOutput),
}

impl Jobs {
    /// Starts `call` of `found` as a background job: a job id (the one its result already
    /// names, when it ran before), the journal entry, the placeholder, then the task or the
    /// detached process.
    pub(crate) async fn start<H: JobHost>(
        self: &Arc<Self>,
        host: &H,
        settings: &H::Settings,
        call: JobCall,
        found: Arc<dyn Tool>,
    ) -> Result<Started, H::Error> {
        let JobCall {
            id,
            tool,
            input,
            save_to,
        } = call;
        let job_id = self.job_id_for(host, &id).await?;
        let token = CancellationToken::new();
        let ctx = host
            .context(settings, &id, &tool, Some(&found), token.clone())
            .await?;
        let mut record =
            JobRecord::running(&job_id, id.as_str(), &tool, input.clone(), save_to.clone());
        let started_at = record.started_at;
        let journal = self.journal();
        record.machine = journal
            .as_ref()
            .and_then(|j| j.machine().map(str::to_owned));
        #[cfg(unix)]
        let mut spawned = None;
        #[cfg(unix)]
        if let (Some(detach), Some(journal)) = (found.detach(), journal.as_ref()) {
            match spawn_detached(detach, &input, &ctx, &**journal, &mut record) {
                Ok(child) => spawned = Some(child),
                Err(output) => return Ok(Started::Finished(output)),
            }
        }
        if let Some(journal) = &journal
            && let Err(error) = journal.put(&record).await
        {
            self.emit(Event::Warning(format!(
                "job {job_id}: journal not written ({error}); the job will not survive this host"
            )));
        }
        crash_point("job-journaled");
        let live = LiveJob::running(id.clone(), tool.clone(), started_at, token.clone(), save_to);
        self.insert(job_id.clone(), live);
        self.write_placeholder(host, settings, &id, &job_id).await?;
        self.emit(Event::JobSubmitted {
            job_id: job_id.clone(),
            tool_id: id.clone(),
            tool: tool.clone(),
        });
        let span = crate::telemetry::tool(
            host.transcript().conversation_id(),
            tool.as_str(),
            id.as_str(),
            ctx.filename(),
            Some(job_id.as_str()),
        );
        let capture = ctx.options().telemetry.capture_content && !span.is_disabled();
        if capture {
            crate::telemetry::content::record_arguments(&span, &input);
        }
        #[cfg(unix)]
        if let (Some(process), Some(journal)) = (record.process, journal) {
            let watcher = super::watch::Watcher {
                record,
                journal,
                child: spawned,
                process,
            };
            tokio::spawn(tracing::Instrument::instrument(
                watcher.run(Some(found), ctx, token, Arc::clone(self)),
                span,
            ));
            return Ok(Started::Job);
        }
        let run = host.run(HostedCall {
            found,
            id,
            tool,
            input,
            ctx,
            token,
        });
        let jobs = Arc::clone(self);
        tokio::spawn(tracing::Instrument::instrument(
            async move {
                let output = run.await;
                let span = tracing::Span::current();
                if matches!(output, flemma_core::ToolOutput::Failure { .. }) {
                    crate::telemetry::record_error(&span, "tool_error");
                }
                if capture {
                    crate::telemetry::content::record_result(&span, &output);
                }
                jobs.complete(&job_id, &output).await;
            },
            span,
        ));
        Ok(Started::Job)
    }

    /// Moves the running foreground call `tool_id` to the background (host-initiated): a job id,
    /// the journal entry and the placeholder; the host hands the call's result to
    /// [`Jobs::complete`] when it ends. The call keeps running in this host.
    pub(crate) async fn background<H: JobHost>(
        self: &Arc<Self>,
        host: &H,
        settings: &H::Settings,
        call: JobCall,
        token: CancellationToken,
    ) -> Result<JobId, H::Error> {
        let JobCall {
            id, tool, save_to, ..
        } = call;
        let job_id = self.job_id_for(host, &id).await?;
        let mut record =
            JobRecord::running(&job_id, id.as_str(), &tool, Value::Null, save_to.clone());
        if let Some(journal) = self.journal()
            && let Err(error) = {
                record.machine = journal.machine().map(str::to_owned);
                journal.put(&record).await
            }
        {
            tracing::warn!(job = %job_id, %error, "job not journaled");
        }
        let live = LiveJob::running(id.clone(), tool, record.started_at, token, save_to);
        self.insert(job_id.clone(), live);
        self.write_placeholder(host, settings, &id, &job_id).await?;
        Ok(job_id)
    }

    /// The job id for a call: the one its result names already, else a fresh one no other
    /// result, Job Result, or journal entry uses.
    async fn job_id_for<H: JobHost>(&self, host: &H, id: &ToolUseId) -> Result<JobId, H::Error> {
        let (taken, existing) = host
            .read(|doc| {
                let existing = flemma_ast::find_tool_result_by_id(doc, id.as_str())
                    .and_then(|r| r.node.job_id().map(JobId::sanitized));
                (referenced_jobs(doc), existing)
            })
            .await?;
        if let Some(existing) = existing {
            return Ok(existing);
        }
        let journaled: HashSet<String> = match self.journal() {
            Some(journal) => journal.list().await.into_iter().map(|r| r.job_id).collect(),
            None => HashSet::new(),
        };
        Ok(new_job_id(|candidate| {
            taken.contains(candidate)
                || journaled.contains(candidate)
                || self.live_status(candidate).is_some()
        }))
    }

    /// Header `job=<id>` and the tracked or untracked placeholder text, one edit;
    /// a result block the user removed is put back first.
    pub(crate) async fn write_placeholder<H: JobHost>(
        &self,
        host: &H,
        settings: &H::Settings,
        id: &ToolUseId,
        job_id: &JobId,
    ) -> Result<(), H::Error> {
        let text = if host.tracks_jobs(settings) {
            msg::job_executing_tracked(job_id.as_str())
        } else {
            msg::JOB_EXECUTING_UNTRACKED.to_owned()
        };
        let writer = host.writer(settings);
        let modeline = format!("job={job_id}");
        host.transcript()
            .edit_blocks(&[id.as_str()], writer, |doc, _, _, edits| {
                edits.push(writer::set_modeline(doc, id.as_str(), &modeline)?);
                edits.push(writer::rewrite_fence_body(doc, id.as_str(), &text, writer)?);
                Ok(())
            })
            .await?;
        Ok(())
    }
}

/// Starts a detached call's own process (its output and exit status in the journal's files)
/// and records it in `record`; the call's result instead when it cannot start.
#[cfg(unix)]
fn spawn_detached(
    detach: &dyn flemma_core::Detach,
    input: &Value,
    ctx: &flemma_core::ExecutionContext,
    journal: &dyn super::JobJournal,
    record: &mut JobRecord,
) -> Result<tokio::process::Child, ToolOutput> {
    let command = detach.command(input, ctx)?;
    let job_id = &record.job_id;
    let started_at = record.started_at;
    let marker = format!("{job_id}.{}.{started_at}", std::process::id());
    let output = journal.output_path(job_id);
    let exit = journal.exit_path(job_id);
    match super::detached::spawn(&command, &output, &exit, &marker) {
        Ok(process) => {
            record.process = Some(process.process);
            record.marker = Some(marker);
            record.timeout_seconds = command.timeout.map(|t| t.as_secs_f64());
            record.deadline = command.timeout.map(|t| started_at + t.as_secs_f64());
            Ok(process.child)
        }
        Err(error) => {
            tracing::warn!(tool_id = %record.tool_id, %error, "background command not started");
            Err(ToolOutput::error(msg::JOB_START))
        }
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
