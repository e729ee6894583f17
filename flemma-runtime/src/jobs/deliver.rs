//! Delivery: the finished jobs' Job Results, first finished first, at the host's
//! delivery points.

use flemma_ast::writer;

use super::JobState;
use super::host::JobHost;
use super::support::crash_point;
use super::table::{Delivery, Jobs};
use super::types::Delivered;
use super::{JobRecord, JournalFiles as _};
use crate::events::Event;

impl Jobs {
    /// Writes the Job Results of every finished job, first finished first; a job whose
    /// delivery fails stays queued.
    pub(crate) async fn drain<H: JobHost>(&self, host: &H) -> Result<Vec<Delivered>, H::Error> {
        let mut delivered = Vec::new();
        let Some(first) = self.pop() else {
            return Ok(delivered);
        };
        let settings = match host.settings().await {
            Ok(settings) => settings,
            Err(error) => {
                self.requeue(first.job_id);
                return Err(error);
            }
        };
        let mut next = Some(first);
        while let Some(item) = next.take() {
            let job_id = item.job_id.clone();
            match self.deliver(host, item, &settings).await {
                Ok(done) => delivered.push(done),
                Err(error) => {
                    self.requeue(job_id);
                    return Err(error);
                }
            }
            next = self.pop();
        }
        Ok(delivered)
    }

    /// One Job Result: its text (stored or saved), the block placed by the delivery rules
    /// (and a lost job's header marked), then the journal marked `delivered` or `lost`.
    async fn deliver<H: JobHost>(
        &self,
        host: &H,
        item: Delivery,
        settings: &H::Settings,
    ) -> Result<Delivered, H::Error> {
        let (text, is_error) = host.result_text(settings, &item).await;
        let writer = host.writer(settings);
        let block = writer::job_result_lines(&item.job_id, is_error, &text, writer);
        let mut placement = writer::JobPlacement::Appended;
        let error_modeline = format!("error job={}", item.job_id);
        host.edit(|doc| {
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
        if let Some(journal) = self.journal() {
            let state = if item.lost {
                JobState::Lost
            } else {
                JobState::Delivered
            };
            let change = Box::new(move |record: &mut JobRecord| {
                record.state = state;
                true
            });
            match journal.update(item.job_id.as_str(), change).await {
                // The result is in the conversation (and its overflow, if any, in the store):
                // a detached job's raw output and exit file have served their purpose.
                Ok(_) => journal.remove_files(item.job_id.as_str()).await,
                Err(error) => {
                    tracing::warn!(job = %item.job_id, %error, "job delivery not journaled");
                }
            }
        }
        self.delivered(&item.job_id);
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

    /// Waits for every job, delivering each as it finishes, until none runs.
    pub(crate) async fn wait<H: JobHost>(&self, host: &H) -> Result<Vec<Delivered>, H::Error> {
        let mut delivered = Vec::new();
        loop {
            let changed = self.changed().notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            delivered.extend(self.drain(host).await?);
            if !self.any_running() {
                return Ok(delivered);
            }
            changed.await;
        }
    }

    /// Waits until a job finishes (at once when none runs or one waits for delivery),
    /// without delivering it.
    pub(crate) async fn finished(&self) {
        let changed = self.changed().notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if self.any_running() && !self.any_queued() {
            changed.await;
        }
    }
}
