//! What a [`Session`](crate::Session) reports to a UI, and the receiving end.

use std::sync::{Mutex, PoisonError};

use flemma_providers::StopReason;
use tokio::sync::mpsc;

use super::{AutopilotState, Stop};

/// Something the session did, for a UI. The library prints nothing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SessionEvent {
    /// The autopilot changed state.
    Autopilot(AutopilotState),
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
        /// The call id.
        id: String,
        /// The tool, wire name decoded (`flemma.jobs.status`).
        name: String,
    },
    /// A complete tool call was written into the conversation.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool, wire name decoded.
        name: String,
        /// Its input, as JSON text.
        input: String,
    },
    /// Token counts, when the provider reports them.
    Usage {
        /// Input tokens.
        input_tokens: Option<u64>,
        /// Output tokens.
        output_tokens: Option<u64>,
    },
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
    Tool(flemma_tools::Event),
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
}

/// The events of a session, in order, from the moment of [`Session::subscribe`](crate::Session::subscribe).
/// Nothing is dropped: the queue grows until read. Read them with [`recv`](Self::recv) or as
/// a [`Stream`](futures_util::Stream).
#[derive(Debug)]
pub struct SessionEvents {
    receiver: mpsc::UnboundedReceiver<SessionEvent>,
}

impl SessionEvents {
    /// The next event; `None` once the session is gone and every event was read.
    pub async fn recv(&mut self) -> Option<SessionEvent> {
        self.receiver.recv().await
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<SessionEvent> {
        self.receiver.try_recv().ok()
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

/// The senders of every subscriber.
#[derive(Debug, Default)]
pub(crate) struct Subscribers {
    senders: Mutex<Vec<mpsc::UnboundedSender<SessionEvent>>>,
}

impl Subscribers {
    pub(crate) fn subscribe(&self) -> SessionEvents {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.lock().push(sender);
        SessionEvents { receiver }
    }

    pub(crate) fn emit(&self, event: SessionEvent) {
        let mut senders = self.lock();
        // A subscriber that went away is forgotten.
        if let Some((last, others)) = senders.split_last() {
            let mut gone: Vec<usize> = others
                .iter()
                .enumerate()
                .filter(|(_, s)| s.send(event.clone()).is_err())
                .map(|(i, _)| i)
                .collect();
            if last.send(event).is_err() {
                gone.push(others.len());
            }
            for index in gone.into_iter().rev() {
                senders.swap_remove(index);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<mpsc::UnboundedSender<SessionEvent>>> {
        self.senders.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
