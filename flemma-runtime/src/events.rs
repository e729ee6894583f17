//! The typed events a UI follows (spec §7.11): the library prints nothing, a host subscribes
//! with [`Executor::subscribe`](crate::Executor::subscribe) (or forwards them with
//! [`ExecutorBuilder::on_event`](crate::ExecutorBuilder::on_event)).
//!
//! Every subscriber has its own queue of [`fanout::DEFAULT_CAPACITY`](crate::fanout::DEFAULT_CAPACITY)
//! events ([`ExecutorBuilder::event_capacity`](crate::ExecutorBuilder::event_capacity)): one
//! that falls that far behind reads [`Event::Missed`] with the count of the events it missed;
//! nothing else is dropped (see [`fanout`](crate::fanout)).

use flemma_ast::ToolStatus;
use flemma_ids::{JobId, ToolName, ToolUseId};

use crate::jobs::{Delivered, Recovery};

/// Something the executor did or noticed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// Phase 1 wrote placeholders (one batch, one undo step).
    PlaceholdersPlaced(Vec<Placed>),
    /// Tool names with the legacy `:` separator were rewritten to `.` (one batch).
    NamesMigrated(Vec<(ToolName, ToolName)>),
    /// A pending call was put to the host's [`Approver`](crate::Approver).
    ApprovalAsked {
        /// The call.
        id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// The rendered preview (`bash: $ make — building`).
        preview: String,
    },
    /// A call started (`tool:executing`).
    ToolExecuting {
        /// The call.
        id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// The rendered preview.
        preview: String,
    },
    /// A running call reported how far it got
    /// ([`ExecutionContext::report_progress`](crate::ExecutionContext::report_progress); an
    /// MCP server's `notifications/progress`).
    ToolProgress {
        /// The call.
        id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// How far.
        progress: ToolProgress,
    },
    /// A call's result was written (`tool:completed`).
    ToolCompleted {
        /// The call.
        id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// Whether it succeeded.
        success: bool,
    },
    /// Something the user should know: the content-overwrite protection (spec §7.3), a
    /// result that could not be stored, a registry warning.
    Warning(String),
    /// Nothing left to run or send until the user acts (`conversation:idle`).
    ConversationIdle,
    /// A call went to the background (`job:submitted`).
    JobSubmitted {
        /// The job.
        job_id: JobId,
        /// The call.
        tool_id: ToolUseId,
        /// The tool.
        tool: ToolName,
    },
    /// A job finished; its Job Result waits for the next delivery point.
    JobCompleted {
        /// The job.
        job_id: JobId,
        /// The call.
        tool_id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// Whether it succeeded.
        success: bool,
    },
    /// A Job Result was written (`job:completed`).
    JobDelivered(Delivered),
    /// Opening the conversation found jobs to re-adopt, deliver or mark lost.
    JobsRecovered(Recovery),
    /// This subscriber's queue was full: `count` events were missed here (only a subscriber
    /// sees this, never a forward).
    Missed {
        /// How many.
        count: u64,
    },
}

impl From<crate::fanout::Missed> for Event {
    fn from(missed: crate::fanout::Missed) -> Self {
        Self::Missed {
            count: missed.count,
        }
    }
}

/// How far a running call got, as its tool reports it with
/// [`ExecutionContext::report_progress`](crate::ExecutionContext::report_progress); the
/// executor forwards it as [`Event::ToolProgress`].
///
/// ```
/// use flemma_runtime::ToolProgress;
///
/// let step = ToolProgress::new(2.0).with_total(5.0).with_message("2 of 5 steps");
/// assert_eq!(step.total, Some(5.0));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolProgress {
    /// The progress so far (increasing; its unit is the tool's).
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A short text for the user.
    pub message: Option<String>,
}

impl ToolProgress {
    /// Progress `progress`, with no total and no message.
    pub fn new(progress: f64) -> Self {
        Self {
            progress,
            total: None,
            message: None,
        }
    }

    /// With the total.
    #[must_use]
    pub fn with_total(mut self, total: f64) -> Self {
        self.total = Some(total);
        self
    }

    /// With a message.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// One placeholder of Phase 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The call.
    pub id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// `approved`, `pending`, `denied` or `aborted`.
    pub status: ToolStatus,
}
