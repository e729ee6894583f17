//! Background jobs as the journal records them: the state a hover shows, the diagnostics of
//! results whose job runs, finished or was lost, and the watch that notices a job finishing in
//! another process.

use std::collections::BTreeMap;
use std::path::PathBuf;

use flemma_ast::Document;
use flemma_core::jobs::JobState;
use flemma_runtime::jobs::JobInfo;
use lsp_types::{DiagnosticSeverity, Uri};

use crate::checks::{Evaluated, Found};

/// The store directory of the conversation `uri` under its options: where its journal is
/// (`<store>/jobs`), as `flemma cycle` and `flemma run` compute it for the file.
pub(crate) fn store_dir(evaluated: &Evaluated, uri: &Uri) -> Option<PathBuf> {
    let path = crate::navigation::uri_path(uri)?;
    let chat = flemma_config::conversation_path(&path);
    let store = flemma_store::Store::new(
        &evaluated.options.tools.store,
        Some(&chat),
        &flemma_runtime::transcript::file_conversation_id(&chat),
    )
    .ok()?;
    store.directory().ok()
}

/// The jobs of one conversation's journal, by id.
pub(crate) type States = BTreeMap<String, JobInfo>;

/// Reads the journal under `dir`.
pub(crate) fn read(runtime: &tokio::runtime::Runtime, dir: &std::path::Path) -> States {
    runtime
        .block_on(flemma_runtime::jobs::journaled(dir))
        .into_iter()
        .map(|job| (job.job_id.as_str().to_owned(), job))
        .collect()
}

/// What a hover says of a job's state.
pub(crate) fn describe(job: &JobInfo) -> String {
    let elapsed = job
        .elapsed_seconds
        .map(|s| format!(" {s:.1}s"))
        .unwrap_or_default();
    match job.state {
        JobState::Running => format!("running{elapsed}"),
        JobState::Completed => format!("completed{elapsed} (delivery pending)"),
        JobState::Delivered => format!("delivered{elapsed}"),
        JobState::Lost => "lost".to_owned(),
    }
}

/// Whether the document names any job (a tool result with `job=`).
pub(crate) fn names_jobs(doc: &Document) -> bool {
    doc.messages
        .iter()
        .flat_map(flemma_ast::Message::tool_results)
        .any(|r| r.job_id().is_some())
}

/// A diagnostic on each tool result whose job runs, finished without its Job Result in the
/// document yet, or was lost.
pub(crate) fn diagnostics(doc: &Document, states: &States, found: &mut Vec<Found>) {
    for result in doc
        .messages
        .iter()
        .flat_map(flemma_ast::Message::tool_results)
    {
        let Some(job) = result.job_id() else {
            continue;
        };
        let Some(info) = states.get(job) else {
            continue;
        };
        let delivered = flemma_ast::find_job_result(doc, job).is_some();
        let (severity, message) = match info.state {
            JobState::Running => (
                DiagnosticSeverity::INFORMATION,
                format!("Job `{job}` is running"),
            ),
            JobState::Completed if !delivered => (
                DiagnosticSeverity::INFORMATION,
                format!(
                    "Job `{job}` completed; its Job Result is written by the next `flemma cycle` or `flemma run`"
                ),
            ),
            JobState::Lost if !delivered => (
                DiagnosticSeverity::WARNING,
                format!("Job `{job}` was lost: its process or host ended without a result"),
            ),
            _ => continue,
        };
        found.push(Found {
            line: result.span.start_line,
            severity,
            code: "job",
            message,
        });
    }
}
