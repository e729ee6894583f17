//! Watching a detached job until it ends, then recording and queueing its result.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::detached::{Watch, Watched, watch};
use super::table::Jobs;
use super::{JobJournal, JobRecord};
use crate::messages as msg;
use flemma_core::DetachedEnding;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolOutput;
use flemma_core::process::ProcessRef;

/// A detached job to watch: its entry, its journal, its process (and the child handle when
/// this host started it).
pub(super) struct Watcher {
    pub(super) record: JobRecord,
    pub(super) journal: Arc<dyn JobJournal>,
    pub(super) child: Option<tokio::process::Child>,
    pub(super) process: ProcessRef,
}

impl Watcher {
    /// Waits for the job, then completes it with its tool's result (`tool`, when registered
    /// in this host) or its plain output.
    pub(super) async fn run(
        self,
        tool: Option<Arc<dyn Tool>>,
        ctx: ExecutionContext,
        token: CancellationToken,
        jobs: Arc<Jobs>,
    ) {
        let exit = self.journal.exit_path(&self.record.job_id);
        let watched = watch(
            Watch {
                process: self.process,
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
                jobs.vanish(&job_id);
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
        jobs.complete(&job_id, &output).await;
    }
}

/// The result of a detached job whose tool is not registered in this host: its output, and
/// the exit code when it failed.
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
