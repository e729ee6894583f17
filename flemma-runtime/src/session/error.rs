//! [`SessionError`]: what goes wrong in a run.

use crate::transcript::TranscriptError;
use crate::{ConversationError, ExecutorError};
use flemma_config::{ConfigError, FrontmatterError};
use flemma_providers::SendError;

/// What went wrong in a run. A tool's failure is a result the model sees, not one of these.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A run was asked for while a request streams.
    #[error("A request is already in progress. Use <C-c> to cancel it first.")]
    RequestInFlight,
    /// A tool cycle was asked for while a request streams.
    #[error("Cannot execute tool while API request is in flight")]
    ToolWhileRequest,
    /// A run was asked for while another run executes tools.
    #[error("the session is already running its tool cycle")]
    AlreadyRunning,
    /// The tool cycle failed for a reason of its own: a job action or an approval that does
    /// not apply, the result store's options, an edit that does not fit. A failure of the
    /// conversation, its frontmatter or its options is never here: each has its own variant
    /// ([`Conversation`](Self::Conversation), [`Frontmatter`](Self::Frontmatter),
    /// [`Config`](Self::Config)), wherever in the run it happened.
    #[error("the tool cycle failed")]
    Executor(#[source] ExecutorError),
    /// The conversation could not be read or written.
    #[error("the conversation could not be read or written")]
    Conversation(#[from] ConversationError),
    /// The conversation's frontmatter does not evaluate.
    #[error("the frontmatter does not evaluate")]
    Frontmatter(#[from] FrontmatterError),
    /// The options do not resolve.
    #[error("the options do not resolve")]
    Config(#[from] ConfigError),
    /// A template in the conversation failed; nothing was sent.
    #[error("line {line}: {message}")]
    Template {
        /// The line of the template.
        line: u32,
        /// What failed.
        message: String,
    },
    /// The conversation has no message to send (no `@You:` or `@Assistant:` message with
    /// content: a file without role markers, or only markers that name no role, such as
    /// `@User:`, which are reported as warnings). Nothing was sent.
    #[error(
        "there is nothing to send: the conversation has no @You: or @Assistant: message (a message starts with a line @You:)"
    )]
    NothingToSend,
    /// The request could not be sent or its response not received.
    #[error("the {provider} request failed")]
    Send {
        /// The provider's name.
        provider: String,
        /// The cause.
        #[source]
        source: SendError,
    },
    /// A conversation budget is set and the conversation's usage log could not be read:
    /// what was spent is not known, so nothing is sent.
    #[error("the usage log could not be read for budget.conversation")]
    UsageLog(#[from] crate::usage::UsageLogError),
    /// The session has no model ([`Session::tools_only`](crate::Session::tools_only)): it
    /// cannot write a summary.
    #[error("the session has no model to write a summary with")]
    NoProvider,
    /// The user cancelled the operation ([`Session::cancel`](crate::Session::cancel)).
    #[error("cancelled")]
    Cancelled,
    /// The conversation changed above where a compaction cuts it while the summary was being
    /// written: nothing was written.
    #[error("the conversation changed above the compaction's cut while its summary was written")]
    CompactionConflict,
    /// The summary request's response held no text (only tool calls, or nothing): nothing was
    /// written.
    #[error("the {provider} response held no summary")]
    EmptySummary {
        /// The provider's name.
        provider: String,
    },
    /// The provider reported an error while streaming, or the stream broke or stalled; what
    /// had arrived stays in the conversation under the abort marker `<!-- flemma:aborted:
    /// Response incomplete: <message>. -->`, and the next run sends the request again.
    #[error("the {provider} response failed: {message}")]
    Stream {
        /// The provider's name.
        provider: String,
        /// The provider's message.
        message: String,
    },
}

impl SessionError {
    /// A short name of the failure, as tracing spans record it (`error.type`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::RequestInFlight => "request_in_flight",
            Self::ToolWhileRequest => "tool_while_request",
            Self::AlreadyRunning => "already_running",
            Self::Executor(_) => "executor",
            Self::Conversation(_) => "conversation",
            Self::Frontmatter(_) => "frontmatter",
            Self::Config(_) => "config",
            Self::Template { .. } => "template",
            Self::NothingToSend => "nothing_to_send",
            Self::Send { .. } => "send",
            Self::UsageLog(_) => "usage_log",
            Self::NoProvider => "no_provider",
            Self::Cancelled => "cancelled",
            Self::CompactionConflict => "compaction_conflict",
            Self::EmptySummary { .. } => "empty_summary",
            Self::Stream { .. } => "stream",
        }
    }
}

impl From<TranscriptError> for SessionError {
    fn from(error: TranscriptError) -> Self {
        match error {
            TranscriptError::Conversation(e) => Self::Conversation(e),
            TranscriptError::Frontmatter(e) => Self::Frontmatter(e),
            TranscriptError::Config(e) => Self::Config(e),
            other => Self::Executor(ExecutorError::Transcript(other)),
        }
    }
}

impl From<ExecutorError> for SessionError {
    /// One variant per failure: the executor's failures of the conversation, the frontmatter
    /// and the options are the session's own variants for them.
    fn from(error: ExecutorError) -> Self {
        match error {
            ExecutorError::Transcript(error) => error.into(),
            other => Self::Executor(other),
        }
    }
}
