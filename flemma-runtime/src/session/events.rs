//! What a [`Session`](crate::Session) reports to a UI, and the receiving end.

use crate::fanout::{Fanout, Missed, Subscription};
use flemma_ids::{ToolName, ToolUseId};
use flemma_providers::StopReason;

use super::{AutopilotState, Stop};

/// Something the session did, for a UI. The library prints nothing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// The autopilot changed state.
    Autopilot(AutopilotState),
    /// A `UserPromptSubmit` hook blocked the send; the reason is for the user (the model
    /// never sees it, and the user's message stays as written).
    PromptBlocked {
        /// The hook's name.
        hook: String,
        /// Why.
        reason: String,
    },
    /// A request is about to be sent (`request:sending`); `turn` counts the requests of this
    /// run from 1.
    RequestSending {
        /// The request's number in this run.
        turn: u64,
    },
    /// A request failed and is retried after `delay` (`retrying in 3 s: HTTP 429 (attempt 2
    /// of 4)`); sent as the retry is scheduled, before the wait.
    Retrying(flemma_providers::Retry),
    /// Visible text of the response, as it streams.
    TextDelta(String),
    /// Thinking text of the response, as it streams.
    ThinkingDelta(String),
    /// The model began a tool call (progress only).
    ToolCallStarted {
        /// The call id, as the conversation will hold it (characters a header cannot carry
        /// become `_`).
        id: ToolUseId,
        /// The tool, wire name decoded (`flemma.jobs.status`), as the conversation will hold it.
        name: ToolName,
    },
    /// A complete tool call was written into the conversation.
    ToolCall {
        /// The call id, as the conversation holds it.
        id: ToolUseId,
        /// The tool, wire name decoded, as the conversation holds it.
        name: ToolName,
        /// Its input, as JSON text.
        input: String,
    },
    /// What a request used and cost, once its response ended (completed, cut or cancelled),
    /// when the provider reported usage; before [`TurnFinished`](Self::TurnFinished).
    Usage(crate::usage::RequestUsage),
    /// The next request would cross a budget; the run stops with
    /// [`Stop::BudgetReached`](crate::Stop::BudgetReached) before sending it.
    BudgetReached(crate::usage::BudgetReached),
    /// The conversation is being compacted: the request for its summary goes out (see
    /// [`compaction`](crate::compaction)).
    Compacting {
        /// What started it.
        trigger: crate::hooks::CompactTrigger,
        /// How many messages the summary is to stand for.
        messages: u64,
        /// About how many tokens they take in a request.
        tokens: u64,
    },
    /// The conversation was compacted: its `**Compaction:**` block is written.
    Compacted(crate::compaction::Compacted),
    /// The response ended (`request:finished`).
    TurnFinished {
        /// The request's number in this run.
        turn: u64,
        /// Why the provider stopped, when it said.
        stop: Option<StopReason>,
        /// The tool calls it asked for.
        tool_uses: usize,
    },
    /// The request was cancelled; the abort marker was written, or the empty `@Assistant:`
    /// removed when nothing had arrived.
    RequestAborted,
    /// What the tool cycle did: placeholders, approvals asked, tools running and completed.
    Tool(crate::Event),
    /// Something the user should know (`Autopilot stopped – exceeded 100 consecutive
    /// turns.`, a prompt warning, a stream warning).
    Warning(String),
    /// Background jobs were delivered at idle; the loop resumes after this delay unless
    /// another delivery restarts it or the user cancels (`autopilot:resume-scheduled`).
    ResumeScheduled {
        /// `tools.autopilot.resume_delay`, in milliseconds.
        delay_ms: u64,
    },
    /// The scheduled resume was cancelled (`autopilot:resume-cancelled`).
    ResumeCancelled,
    /// The loop resumed after job deliveries (`autopilot:resumed`).
    Resumed,
    /// The run returned.
    Stopped(Stop),
    /// An event of a subagent: the child session an `agent` call of this conversation started
    /// (a grandchild's events arrive nested once more).
    Subagent {
        /// The `agent` call that started the child.
        call: ToolUseId,
        /// The agent's name.
        agent: String,
        /// The child's event.
        event: Box<SessionEvent>,
    },
    /// This subscriber's queue was full: `count` events were missed here (see
    /// [`SessionEvents`]).
    Missed {
        /// How many.
        count: u64,
    },
}

/// The events of a session, in order, from the moment of [`Session::subscribe`](crate::Session::subscribe):
/// the session's own and every event of its executor (as [`SessionEvent::Tool`]), one stream
/// subscribed to the executor once, when the session was built, so none falls between two
/// cycles (a background job's `JobCompleted` included).
///
/// Each subscriber has its own queue of
/// [`event_capacity`](crate::SessionBuilder::event_capacity) events (default
/// [`DEFAULT_CAPACITY`](crate::fanout::DEFAULT_CAPACITY), 65,536): that bounds the
/// memory a stalled UI costs under a hostile burst. A subscriber that falls that far behind
/// reads one [`SessionEvent::Missed`] with the count of the events that did not fit, where
/// they would have been; nothing else is dropped. Read them with [`recv`](Self::recv) or as a
/// [`Stream`](futures_util::Stream).
#[derive(Debug)]
pub struct SessionEvents {
    receiver: Subscription<SessionEvent>,
}

impl SessionEvents {
    /// The next event; `None` once the session is gone and every event was read.
    pub async fn recv(&mut self) -> Option<SessionEvent> {
        self.receiver.recv().await
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<SessionEvent> {
        self.receiver.try_recv()
    }
}

impl futures_util::Stream for SessionEvents {
    type Item = SessionEvent;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<SessionEvent>> {
        self.receiver.poll_recv(cx)
    }
}

impl From<Missed> for SessionEvent {
    fn from(missed: Missed) -> Self {
        Self::Missed {
            count: missed.count,
        }
    }
}

/// The session's stream, fanned out to every subscriber.
pub(crate) type Subscribers = Fanout<SessionEvent>;

/// A new subscriber of `subscribers`.
pub(crate) fn subscribe(subscribers: &Subscribers) -> SessionEvents {
    SessionEvents {
        receiver: subscribers.subscribe(),
    }
}
