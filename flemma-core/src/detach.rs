//! The port of a tool whose background calls run as processes of their own (the built-in
//! `bash`): the command to run detached, and the result from its output file.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::ExecutionContext;
use crate::ToolOutput;

/// A command a tool runs as a process of its own when its call goes to the background, so the
/// job survives the host (see `flemma_runtime::jobs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachedCommand {
    /// The command line, already wrapped by the sandbox.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The whole environment, later entries winning: the host's is not inherited, so a tool
    /// starts from [`ExecutionContext::environment`] (the host's under `tools.env`) and adds
    /// its own variables.
    pub env: Vec<(String, String)>,
    /// Stopped (with its output kept) when this passes; watched by whichever host watches the
    /// job.
    pub timeout: Option<Duration>,
}

/// How a detached command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetachedEnding {
    /// It exited with this code (`128 + n` when killed by signal `n`).
    Exited(i32),
    /// Its timeout passed and it was stopped.
    TimedOut,
    /// The job was cancelled.
    Cancelled,
}

/// A tool whose calls can run detached from the host in the background (the built-in `bash`):
/// the executor runs [`Detach::command`] as its own process with output to a file, records its
/// exit status, and turns that into the call's result with [`Detach::result`], possibly in
/// another process than the one that started it.
pub trait Detach: Send + Sync {
    /// The command for a call; `Err` is the call's result when it cannot run (no command, a
    /// sandbox error).
    ///
    /// # Errors
    ///
    /// The result to write instead of starting anything.
    fn command(&self, input: &Value, ctx: &ExecutionContext)
    -> Result<DetachedCommand, ToolOutput>;

    /// The call's result from its output file (everything the command wrote to standard
    /// output and standard error) and how it ended.
    fn result(
        &self,
        input: &Value,
        ctx: &ExecutionContext,
        output: &std::path::Path,
        ending: DetachedEnding,
    ) -> ToolOutput;
}
