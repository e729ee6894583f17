//! The types of the job machinery: a job's state, its listing, a delivery, a recovery, and
//! the error of a job action.

use flemma_ast::writer::JobPlacement;
use flemma_ids::{JobId, ToolName, ToolUseId};
use serde::Serialize;

use flemma_core::jobs::JobState;

/// A job action that does not apply, or a job journal that cannot be used: what
/// [`Executor::background`](crate::Executor::background) and the recovery of a conversation's
/// jobs refuse with (as [`ExecutorError::Job`](crate::ExecutorError::Job)). The messages are
/// the Flemma plugin's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The call is not running (no result is being produced for it here).
    #[error("Tool {id} is not currently executing")]
    NotExecuting {
        /// The call.
        id: String,
    },
    /// The call has its result already.
    #[error("Tool {id} has already completed")]
    AlreadyCompleted {
        /// The call.
        id: String,
    },
    /// The call runs as a job already.
    #[error("Tool {id} is already running in background")]
    AlreadyBackground {
        /// The call.
        id: String,
    },
    /// The tool is synchronous: it cannot run in the background (the Flemma
    /// plugin has no text for it).
    #[error("Tool '{tool}' is synchronous and cannot run in the background")]
    NotBackgroundable {
        /// The tool.
        tool: ToolName,
    },
    /// The conversation's job journal could not be read or written.
    #[error("job journal: {source}")]
    Journal {
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One job of a conversation, as [`Executor::jobs`](crate::Executor::jobs) lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobInfo {
    /// The job.
    pub job_id: JobId,
    /// The call it runs.
    pub tool_id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// Its state.
    pub state: JobState,
    /// Seconds since it started (until it completed, for a finished job); `None` when unknown.
    pub elapsed_seconds: Option<f64>,
}

/// One Job Result written by a delivery point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The job.
    pub job_id: JobId,
    /// The call it ran.
    pub tool_id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// Whether it succeeded.
    pub success: bool,
    /// Where its block went.
    pub placement: JobPlacement,
}

/// What opening a conversation found among its jobs ([`Executor::recover`](crate::Executor::recover)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Jobs whose process still runs, now watched by this host.
    pub adopted: Vec<JobId>,
    /// Jobs running in another live host, left to it.
    pub elsewhere: Vec<JobId>,
    /// Jobs that finished while no host delivered them, now queued for delivery.
    pub finished: Vec<JobId>,
    /// Jobs that are gone without a result: marked lost.
    pub lost: Vec<JobId>,
}
