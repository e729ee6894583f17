//! The provider-neutral events a streamed response decodes into.

use serde::Serialize;

use crate::sse::SseEvent;

/// The error a decoder reports when the stream ends before the response completed.
pub const STREAM_CUT: &str = "the stream ended before the response completed";

/// Why a response ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its turn.
    EndTurn,
    /// The model asked for tools.
    ToolUse,
    /// The output hit `max_tokens` (a truncation warning for the user).
    MaxTokens,
    /// The provider refused or filtered the response.
    Blocked,
    /// Anything else, as the provider named it.
    Other(String),
}

/// One decoded piece of a streamed response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// What the provider said about the response it is sending: its id and the model that
    /// answers (which may name a dated version of the model requested, or another model
    /// altogether). Sent at most once per response, as soon as the stream tells either; a
    /// stream that tells neither sends none.
    Response {
        /// The provider's id of the response (`msg_…`, `resp_…`, `chatcmpl-…`, Vertex's
        /// `responseId`).
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The model that answers, as the provider names it (`claude-sonnet-4-5-20250929`,
        /// Vertex's `modelVersion`).
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    /// Visible text, to append verbatim.
    Text {
        /// The delta.
        text: String,
    },
    /// Thinking text (written as a `<thinking>` block when the response ends).
    Thinking {
        /// The delta.
        text: String,
    },
    /// The signature of the response's thinking.
    ThinkingSignature {
        /// `anthropic`, `openai`, `vertex`.
        provider: String,
        /// The opaque signature.
        value: String,
    },
    /// Opaque redacted thinking data.
    RedactedThinking {
        /// The data.
        data: String,
    },
    /// A tool call began (progress only).
    ToolCallStart {
        /// The call id.
        id: String,
        /// The tool name as the provider sent it (wire-encoded).
        name: String,
    },
    /// More of a tool call's arguments arrived (progress only).
    ToolCallDelta {
        /// The call id.
        id: String,
        /// The arguments text that arrived.
        delta: String,
    },
    /// A complete tool call.
    ToolCall {
        /// The call id.
        id: String,
        /// The tool name as the provider sent it (wire-encoded).
        name: String,
        /// The arguments: a JSON object, as text.
        arguments: String,
    },
    /// The tokens the response used so far, as the provider reported them: each `Usage` of a
    /// response replaces the one before it (a provider may report the input at the start and
    /// the output at the end). A stream cut before its end still reports what it counted.
    Usage(crate::Usage),
    /// Something the user should know that does not stop the response (invalid tool JSON
    /// replaced by `{}`).
    Warning {
        /// The text.
        message: String,
    },
    /// The provider reported an error in the stream.
    Error {
        /// The provider's message.
        message: String,
    },
    /// The response is complete.
    Done {
        /// Why it ended.
        stop: StopReason,
    },
}

/// Turns one provider's SSE events into [`StreamEvent`]s.
///
/// Decoders are `Send` so that a streaming call can run on any task of a multi-threaded
/// runtime (`tokio::spawn`).
pub trait StreamDecoder: Send {
    /// Decodes one SSE event.
    fn decode(&mut self, event: &SseEvent) -> Vec<StreamEvent>;

    /// The stream ended. A decoder that saw no completion reports an error here; tool calls
    /// still open are dropped, never emitted as if complete.
    fn finish(&mut self) -> Vec<StreamEvent>;
}

/// Pushes the [`StreamEvent::Response`] of the id and model a stream told (an empty string
/// tells nothing) unless `described` says it was sent already; sets `described` once sent.
pub(crate) fn describe(
    described: &mut bool,
    id: Option<&str>,
    model: Option<&str>,
    out: &mut Vec<StreamEvent>,
) {
    let told = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_owned);
    let (id, model) = (told(id), told(model));
    if !*described && (id.is_some() || model.is_some()) {
        *described = true;
        out.push(StreamEvent::Response { id, model });
    }
}

/// What a decoder's `finish` yields: nothing after a completed response, else the
/// [`STREAM_CUT`] error.
pub(crate) fn cut_unless(done: bool) -> Vec<StreamEvent> {
    if done {
        Vec::new()
    } else {
        vec![StreamEvent::Error {
            message: STREAM_CUT.to_owned(),
        }]
    }
}

/// Parses a tool call's accumulated arguments into compact JSON object text; empty or
/// invalid input becomes `{}` with a warning.
pub(crate) fn compact_arguments(raw: &str, name: &str) -> (String, Option<StreamEvent>) {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(value @ serde_json::Value::Object(_)) => (value.to_string(), None),
        _ if raw.trim().is_empty() => ("{}".to_owned(), None),
        _ => (
            "{}".to_owned(),
            Some(StreamEvent::Warning {
                message: format!("tool call `{name}` had invalid JSON arguments; sent as {{}}"),
            }),
        ),
    }
}
