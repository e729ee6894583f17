//! Helpers shared by the decoders' unit tests.

use crate::event::{StreamDecoder, StreamEvent};
use crate::sse::SseDecoder;

/// Reads a recording from `../shared/fixtures/peer/`.
pub(crate) fn read_peer(name: &str) -> String {
    let path = format!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/fixtures/peer/{}"),
        name
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Decodes a whole SSE body in one piece through `decoder`, finish included.
pub(crate) fn decode_all(decoder: &mut dyn StreamDecoder, body: &str) -> Vec<StreamEvent> {
    let mut sse = SseDecoder::new();
    let mut events = sse.feed(body.as_bytes());
    events.extend(sse.finish());
    let mut out: Vec<StreamEvent> = events.iter().flat_map(|e| decoder.decode(e)).collect();
    out.extend(decoder.finish());
    out
}

/// The streamed text (or, with `thinking`, the streamed reasoning) joined.
pub(crate) fn collect(events: &[StreamEvent], thinking: bool) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Text { text } if !thinking => Some(text.as_str()),
            StreamEvent::Thinking { text } if thinking => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The tool calls as `(id, name, arguments)`.
pub(crate) fn calls(events: &[StreamEvent]) -> Vec<(&str, &str, &str)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCall {
                id,
                name,
                arguments,
            } => Some((id.as_str(), name.as_str(), arguments.as_str())),
            _ => None,
        })
        .collect()
}

/// Every tool-call argument delta, joined.
pub(crate) fn deltas(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

/// A [`Usage`](crate::Usage) of `input` and `output` tokens and nothing else.
pub(crate) fn tokens(input: u64, output: u64) -> crate::Usage {
    crate::Usage {
        input,
        output,
        ..crate::Usage::default()
    }
}

/// The [`StreamEvent::Response`]s as `(id, model)`.
pub(crate) fn responses(events: &[StreamEvent]) -> Vec<(Option<&str>, Option<&str>)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Response { id, model } => Some((id.as_deref(), model.as_deref())),
            _ => None,
        })
        .collect()
}
