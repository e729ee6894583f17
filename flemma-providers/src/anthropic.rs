//! The Anthropic Messages API stream.

use serde_json::Value;

use crate::event::{StopReason, StreamDecoder, StreamEvent, compact_arguments, describe};
use crate::sse::SseEvent;
use crate::usage::{Reported, count};

/// Decodes Anthropic `event:`/`data:` streams; `message_start` tells the response's id and
/// model.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    /// The response's id and model were told.
    described: bool,
    /// The tool block open at the given index: (index, id, name, arguments so far).
    tool: Option<(u64, String, String, String)>,
    signature: String,
    stop: Option<StopReason>,
    done: bool,
    usage: Reported,
}

impl AnthropicDecoder {
    /// A decoder at the start of a response.
    pub fn new() -> Self {
        Self::default()
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "refusal" | "sensitive" => StopReason::Blocked,
        other => StopReason::Other(other.to_owned()),
    }
}

/// Anthropic's counts: `input_tokens` leaves the cache out; `cache_creation` splits the
/// writes by retention (without it, `cache_creation_input_tokens` is the 5-minute write).
/// `message_delta` repeats the totals without the split, which is kept.
fn reported(value: &Value) -> Reported {
    let split = value.get("cache_creation").filter(|c| c.is_object());
    Reported {
        uncached: count(value, "/input_tokens"),
        cache_read: count(value, "/cache_read_input_tokens"),
        cache_write: split.and_then(|s| count(s, "/ephemeral_5m_input_tokens")),
        cache_write_1h: split.and_then(|s| count(s, "/ephemeral_1h_input_tokens")),
        cache_write_total: count(value, "/cache_creation_input_tokens"),
        output: count(value, "/output_tokens"),
        ..Reported::default()
    }
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl AnthropicDecoder {
    fn usage(&mut self, value: &Value, out: &mut Vec<StreamEvent>) {
        self.usage.merge(reported(value));
        if self.usage.any() {
            out.push(StreamEvent::Usage(self.usage.usage()));
        }
    }

    fn block_start(&mut self, data: &Value, out: &mut Vec<StreamEvent>) {
        let block = &data["content_block"];
        let index = data["index"].as_u64().unwrap_or_default();
        match block["type"].as_str() {
            Some("tool_use") => {
                let (id, name) = (text(block, "id"), text(block, "name"));
                out.push(StreamEvent::ToolCallStart {
                    id: id.clone(),
                    name: name.clone(),
                });
                self.tool = Some((index, id, name, String::new()));
            }
            Some("redacted_thinking") => out.push(StreamEvent::RedactedThinking {
                data: text(block, "data"),
            }),
            Some("text") if !text(block, "text").is_empty() => out.push(StreamEvent::Text {
                text: text(block, "text"),
            }),
            _ => {}
        }
    }

    fn block_delta(&mut self, delta: &Value, out: &mut Vec<StreamEvent>) {
        match delta["type"].as_str() {
            Some("text_delta") => out.push(StreamEvent::Text {
                text: text(delta, "text"),
            }),
            Some("thinking_delta") => out.push(StreamEvent::Thinking {
                text: text(delta, "thinking"),
            }),
            Some("signature_delta") => self.signature.push_str(&text(delta, "signature")),
            Some("input_json_delta") => {
                if let Some((_, id, _, json)) = &mut self.tool {
                    let partial = text(delta, "partial_json");
                    json.push_str(&partial);
                    if !partial.is_empty() {
                        out.push(StreamEvent::ToolCallDelta {
                            id: id.clone(),
                            delta: partial,
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

impl StreamDecoder for AnthropicDecoder {
    fn decode(&mut self, event: &SseEvent) -> Vec<StreamEvent> {
        let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        match data.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => {
                let field = |key| data.pointer(key).and_then(Value::as_str);
                let (id, model) = (field("/message/id"), field("/message/model"));
                describe(&mut self.described, id, model, &mut out);
                if let Some(u) = data.pointer("/message/usage") {
                    self.usage(u, &mut out);
                }
            }
            "content_block_start" => self.block_start(&data, &mut out),
            "content_block_delta" => self.block_delta(&data["delta"], &mut out),
            "content_block_stop" => {
                let index = data["index"].as_u64().unwrap_or_default();
                if self.tool.as_ref().is_some_and(|t| t.0 == index)
                    && let Some((_, id, name, json)) = self.tool.take()
                {
                    let (arguments, warning) = compact_arguments(&json, &name);
                    out.extend(warning);
                    out.push(StreamEvent::ToolCall {
                        id,
                        name,
                        arguments,
                    });
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason));
                }
                if let Some(u) = data.get("usage") {
                    self.usage(u, &mut out);
                }
            }
            "message_stop" => {
                if !self.signature.is_empty() {
                    out.push(StreamEvent::ThinkingSignature {
                        provider: "anthropic".to_owned(),
                        value: std::mem::take(&mut self.signature),
                    });
                }
                self.done = true;
                out.push(StreamEvent::Done {
                    stop: self.stop.take().unwrap_or(StopReason::EndTurn),
                });
            }
            "error" => {
                self.done = true;
                out.push(StreamEvent::Error {
                    message: data
                        .pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown error")
                        .to_owned(),
                });
            }
            _ => {}
        }
        out
    }

    fn finish(&mut self) -> Vec<StreamEvent> {
        self.tool = None;
        crate::event::cut_unless(self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{decode_all, read_peer, responses};

    fn run(name: &str) -> Vec<StreamEvent> {
        decode_all(&mut AnthropicDecoder::new(), &read_peer(name))
    }

    #[test]
    fn message_start_tells_the_response_id_and_model_first() {
        let events = run("anthropic_hello_success_stream.txt");
        assert_eq!(
            events[0],
            StreamEvent::Response {
                id: Some("msg_01Wq2chmRdH54Js2VjCQmmT4".into()),
                model: Some("claude-sonnet-4-5-20250929".into()),
            }
        );
        assert_eq!(responses(&events).len(), 1);

        // `model` before `id` in this recording's `message_start`.
        let events = run("anthropic_tool_use_streaming.txt");
        assert_eq!(
            responses(&events),
            [(
                Some("msg_01Gh9fPX6wbwdDapZRKvSPS2"),
                Some("claude-sonnet-4-20250514")
            )]
        );
        let events = run("anthropic_whitespace_before_thinking_stream.txt");
        assert_eq!(
            responses(&events),
            [(
                Some("msg_test_whitespace_thinking"),
                Some("claude-opus-4-6")
            )]
        );
    }

    #[test]
    fn a_message_start_without_id_or_model_tells_nothing() {
        let body = concat!(
            "event: message_start\n",
            "data: {\"type\":\"message_start\",\"message\":{\"id\":\"\",\"usage\":{\"input_tokens\":3}}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let events = decode_all(&mut AnthropicDecoder::new(), body);
        assert!(responses(&events).is_empty(), "{events:?}");

        let model_only = concat!(
            "data: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\"}}\n\n",
            "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"model\":\"claude-y\"}}\n\n",
        );
        let events = decode_all(&mut AnthropicDecoder::new(), model_only);
        assert_eq!(responses(&events), [(None, Some("claude-x"))]);
    }
}
