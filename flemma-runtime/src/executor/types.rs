//! The executor's public data: its error, its refusals and what a cycle reports.

use flemma_ids::{ToolName, ToolUseId};

use crate::actions::ActionError;
use crate::conversation::ConversationError;
use crate::events::Placed;

use crate::transcript::TranscriptError;

/// Errors of the harness itself (a tool's failure is a result, not one of these).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecutorError {
    /// The conversation could not be read, evaluated or edited: it cannot be read or
    /// written, its frontmatter or options do not evaluate, the store options are unusable,
    /// it kept changing while an edit was computed, or an edit did not apply (the
    /// [`Transcript`](crate::transcript::Transcript)'s error, with its message and causes).
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// A user action does not apply (`Tool not found: <id>`, …).
    #[error(transparent)]
    Action(#[from] ActionError),
    /// A job action does not apply (`Tool <id> is not currently executing`, …), or the job
    /// journal cannot be used.
    #[error(transparent)]
    Job(#[from] crate::jobs::JobError),
    /// The host's [`cycle_guard`](super::ExecutorBuilder::cycle_guard) refused the cycle
    /// (a session while its request is in flight: [`Refusal::RequestInFlight`]).
    #[error(transparent)]
    Refused(Refusal),
    /// A person's approval of the call `id` could not be recorded in the conversation's
    /// ledger of placements ([`crate::placements`]); the call was not approved.
    #[error("the approval of {id} could not be recorded")]
    Placements {
        /// The call.
        id: flemma_ids::ToolUseId,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The transcript's causes, as an executor's error.
macro_rules! through_transcript {
    ($($error:ty),*) => {$(
        impl From<$error> for ExecutorError {
            fn from(error: $error) -> Self {
                Self::Transcript(error.into())
            }
        }
    )*};
}

through_transcript!(
    ConversationError,
    flemma_config::FrontmatterError,
    flemma_config::ConfigError,
    flemma_store::StoreError
);

/// What to do after a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Next {
    /// Every call has its result: send the conversation (Phase 3).
    Send,
    /// A call waits for a human decision (or an approved block holds edited content).
    AwaitApproval,
    /// Calls are still running.
    Running,
    /// Nothing to run or send: the conversation waits for the user. Also when a later
    /// `**Tool Use:**` repeats an earlier one's id: no result can answer it, so the cycle
    /// does not run it, reports it ([`Event::Warning`](crate::Event::Warning), naming the id
    /// and both lines) and does not send the conversation.
    Idle,
}

/// A completed call in a [`CycleReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The call.
    pub id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// Whether it succeeded.
    pub success: bool,
}

/// What one cycle did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleReport {
    /// Placeholders written by Phase 1.
    pub placed: Vec<Placed>,
    /// Results written by Phase 2 (executed calls, and denied, rejected, aborted ones).
    pub completed: Vec<Completed>,
    /// What the host should do next.
    pub next: Next,
}

/// Why a host's [`cycle_guard`](super::ExecutorBuilder::cycle_guard) refused a cycle
/// ([`ExecutorError::Refused`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A request of the conversation is streaming: a flemma `Session`'s
    /// guard while its request is in flight.
    #[error("Cannot execute tool while API request is in flight")]
    RequestInFlight,
    /// The host's own reason, its error kept with its causes.
    #[error(transparent)]
    Host(Box<dyn std::error::Error + Send + Sync>),
}
