//! The typed events a UI follows: the library prints nothing, a host subscribes
//! with [`Executor::subscribe`](crate::Executor::subscribe) (or forwards them with
//! [`ExecutorBuilder::on_event`](crate::ExecutorBuilder::on_event)).
//!
//! Every subscriber has its own queue of [`fanout::DEFAULT_CAPACITY`](crate::fanout::DEFAULT_CAPACITY)
//! events ([`ExecutorBuilder::event_capacity`](crate::ExecutorBuilder::event_capacity)): one
//! that falls that far behind reads [`Event::Missed`] with the count of the events it missed;
//! nothing else is dropped (see [`fanout`](crate::fanout)).

use flemma_ast::ToolStatus;
use flemma_ids::{JobId, ToolName, ToolUseId};

use crate::jobs::types::{Delivered, Recovery};

/// Something the executor did or noticed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// Phase 1 wrote placeholders (one batch, one undo step).
    PlaceholdersPlaced(Vec<Placed>),
    /// Tool names with the legacy `:` separator were rewritten to `.` (one batch).
    NamesMigrated(Vec<(ToolName, ToolName)>),
    /// A pending call was put to the host's [`Approver`](flemma_core::Approver).
    ApprovalAsked {
        /// The call.
        id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// The rendered preview (`bash: $ make — building`).
        preview: String,
    },
    /// A call ended without a result ([`flemma_core::ExecutionContext::defer`]): its block is
    /// `(approved)` again and it runs again at the next cycle, once `reason` is settled (an
    /// `agent` call whose child waits for an approval: `reason` names the child's pending
    /// calls and the commands that decide them).
    CallDeferred {
        /// The call.
        id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// What it waits for.
        reason: String,
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
    /// ([`ExecutionContext::report_progress`](flemma_core::ExecutionContext::report_progress); an
    /// MCP server's `notifications/progress`).
    ToolProgress {
        /// The call.
        id: ToolUseId,
        /// The tool.
        tool: ToolName,
        /// How far.
        progress: flemma_core::ToolProgress,
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
    /// Something the user should know: the content-overwrite protection, a
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
