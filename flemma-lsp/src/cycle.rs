//! The `flemma.cycle` command: the tool cycle of a conversation run on the editor's text, on a
//! thread of its own (tools take their time; the server keeps answering), its result sent back
//! to the client as one edit of the version it started from.

use std::path::PathBuf;

use crossbeam_channel::Sender;
use flemma_config::Config;
use flemma_runtime::{MemoryConversation, Session, ToolRegistry};
use lsp_types::Uri;

use crate::error::report;

/// A cycle that ended.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) uri: Uri,
    /// The version of the text it ran on.
    pub(crate) version: i32,
    /// That text.
    pub(crate) old: String,
    /// The text after it, or why it failed.
    pub(crate) new: Result<String, String>,
}

/// What a cycle runs with.
#[derive(Debug)]
pub(crate) struct Job {
    pub(crate) uri: Uri,
    pub(crate) version: i32,
    pub(crate) text: String,
    /// The conversation's file (where its store, its journal and its tools' directory are).
    pub(crate) chat: PathBuf,
    pub(crate) config: Config,
    pub(crate) registry: ToolRegistry,
}

/// Runs `job`'s cycle on a thread, as `flemma cycle` runs it on the file (the same store id,
/// the built-in sandbox backends), and sends what it left to `done`.
pub(crate) fn spawn(job: Job, done: Sender<Finished>) {
    std::thread::spawn(move || {
        let new = run(&job);
        let _ = done.send(Finished {
            uri: job.uri,
            version: job.version,
            old: job.text,
            new,
        });
    });
}

fn run(job: &Job) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let conversation =
        std::sync::Arc::new(MemoryConversation::new(job.text.clone()).with_path(&job.chat));
    let session = Session::tools_only(conversation.clone(), job.registry.clone())
        .executor(|executor| {
            executor
                .config(job.config.clone())
                .sandbox_backends(flemma_builtins::sandbox_backends())
        })
        .build();
    runtime.block_on(async {
        session.executor().recover().await.map_err(|e| report(&e))?;
        session.cycle().await.map_err(|e| report(&e))
    })?;
    Ok(conversation.text())
}
