//! The Vertex AI / Gemini stream.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::event::{StopReason, StreamDecoder, StreamEvent, describe};
use crate::sse::SseEvent;
use crate::usage::{Reported, count};

/// Decodes Vertex `streamGenerateContent?alt=sse` streams: `data:` lines, each a
/// `GenerateContentResponse` (a `data:` line holding a JSON array of them is accepted too).
///
/// Thought parts become thinking, other text parts text (whitespace-only chunks are ignored),
/// and each `functionCall` part an immediate tool call with a synthetic id
/// `urn:flemma:tool:<name>:<hex time><4 hex>`; the last `thoughtSignature` is emitted just
/// before the end. Chunks repeat the response's `responseId` and `modelVersion`: the first
/// chunk that has them tells them.
pub struct VertexDecoder {
    /// The response's id and model were told.
    described: bool,
    /// Makes the id of a tool call from the tool name.
    id_source: Box<dyn FnMut(&str) -> String + Send>,
    signature: String,
    calls: usize,
    done: bool,
    /// The counts reported so far (each chunk may repeat or complete them).
    usage: Reported,
}

impl std::fmt::Debug for VertexDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VertexDecoder")
            .field("signature", &self.signature)
            .field("calls", &self.calls)
            .field("described", &self.described)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Default for VertexDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl VertexDecoder {
    /// A decoder at the start of a response, making tool call ids from the clock.
    pub fn new() -> Self {
        Self::with_id_source(synthetic_id)
    }

    /// A decoder whose tool call ids come from `id_source` (given the tool name), for
    /// deterministic output.
    ///
    /// ```
    /// use flemma_providers::{SseEvent, StreamDecoder, StreamEvent, VertexDecoder};
    /// let mut decoder = VertexDecoder::with_id_source(|name| format!("urn:flemma:tool:{name}:1"));
    /// let data = r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"calc","args":{}}}]}}]}"#;
    /// let events = decoder.decode(&SseEvent { event: None, data: data.into() });
    /// assert_eq!(events, [StreamEvent::ToolCall {
    ///     id: "urn:flemma:tool:calc:1".into(),
    ///     name: "calc".into(),
    ///     arguments: "{}".into(),
    /// }]);
    /// ```
    pub fn with_id_source(id_source: impl FnMut(&str) -> String + Send + 'static) -> Self {
        Self {
            id_source: Box::new(id_source),
            described: false,
            signature: String::new(),
            calls: 0,
            done: false,
            usage: Reported::default(),
        }
    }

    fn response(&mut self, data: &Value, out: &mut Vec<StreamEvent>) {
        if self.done {
            return;
        }
        let field = |key| data.get(key).and_then(Value::as_str);
        describe(
            &mut self.described,
            field("responseId"),
            field("modelVersion"),
            out,
        );
        if let Some(error) = data.get("error").filter(|e| !e.is_null()) {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            self.done = true;
            out.push(StreamEvent::Error { message });
            return;
        }
        let candidate = data.pointer("/candidates/0");
        let parts = candidate
            .and_then(|c| c.pointer("/content/parts"))
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.part(part, out);
        }
        if let Some(usage) = data.get("usageMetadata") {
            // The prompt includes the cached content; the candidates leave the thoughts out.
            let reported = Reported {
                input: count(usage, "/promptTokenCount"),
                cache_read: count(usage, "/cachedContentTokenCount"),
                output: count(usage, "/candidatesTokenCount"),
                reasoning: count(usage, "/thoughtsTokenCount"),
                output_excludes_reasoning: true,
                ..Reported::default()
            };
            let mut merged = self.usage;
            merged.merge(reported);
            if merged.any() && merged != self.usage {
                self.usage = merged;
                out.push(StreamEvent::Usage(merged.usage()));
            }
        }
        let reason = candidate
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str);
        // A blocked prompt has no candidates, only `promptFeedback.blockReason`.
        let blocked_prompt =
            candidate.is_none() && data.pointer("/promptFeedback/blockReason").is_some();
        let stop = match reason {
            Some("STOP") if self.calls > 0 => StopReason::ToolUse,
            Some("STOP") => StopReason::EndTurn,
            Some("MAX_TOKENS") => StopReason::MaxTokens,
            Some("SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII") => {
                StopReason::Blocked
            }
            Some(other) => StopReason::Other(other.to_owned()),
            None if blocked_prompt => StopReason::Blocked,
            None => return,
        };
        if !self.signature.is_empty() {
            out.push(StreamEvent::ThinkingSignature {
                provider: "vertex".to_owned(),
                value: std::mem::take(&mut self.signature),
            });
        }
        self.done = true;
        out.push(StreamEvent::Done { stop });
    }

    fn part(&mut self, part: &Value, out: &mut Vec<StreamEvent>) {
        if let Some(signature) = part
            .get("thoughtSignature")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            signature.clone_into(&mut self.signature);
        }
        if let Some(call) = part.get("functionCall") {
            let name = call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let arguments = match call.get("args") {
                Some(args @ Value::Object(_)) => args.to_string(),
                None | Some(Value::Null) => "{}".to_owned(),
                Some(_) => {
                    out.push(StreamEvent::Warning {
                        message: format!(
                            "tool call `{name}` had invalid JSON arguments; sent as {{}}"
                        ),
                    });
                    "{}".to_owned()
                }
            };
            let id = (self.id_source)(&name);
            self.calls += 1;
            out.push(StreamEvent::ToolCall {
                id,
                name,
                arguments,
            });
            return;
        }
        let Some(text) = part.get("text").and_then(Value::as_str) else {
            return;
        };
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            if !text.is_empty() {
                out.push(StreamEvent::Thinking {
                    text: text.to_owned(),
                });
            }
        } else if !text.trim().is_empty() {
            out.push(StreamEvent::Text {
                text: text.to_owned(),
            });
        }
    }
}

/// `urn:flemma:tool:<name>:<seconds since the epoch in hex><4 hex digits>`; the 4 digits mix
/// the clock's nanoseconds with a process-wide counter, so ids made in the same second differ.
fn synthetic_id(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mixed = (u64::from(now.subsec_nanos()) ^ count.wrapping_mul(0x9E37_79B9))
        .wrapping_add(count)
        & 0xffff;
    format!("urn:flemma:tool:{name}:{:x}{mixed:04x}", now.as_secs())
}

impl StreamDecoder for VertexDecoder {
    fn decode(&mut self, event: &SseEvent) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        match serde_json::from_str::<Value>(&event.data) {
            Ok(Value::Array(responses)) => {
                for response in &responses {
                    self.response(response, &mut out);
                }
            }
            Ok(response) => self.response(&response, &mut out),
            Err(_) => {}
        }
        out
    }

    fn finish(&mut self) -> Vec<StreamEvent> {
        crate::event::cut_unless(self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{collect, read_peer, responses, tokens};

    fn thought(mut usage: crate::Usage, reasoning: u64) -> crate::Usage {
        usage.reasoning = reasoning;
        usage
    }

    fn decode_all(body: &str) -> Vec<StreamEvent> {
        let mut decoder =
            VertexDecoder::with_id_source(|name| format!("urn:flemma:tool:{name}:test"));
        crate::test_support::decode_all(&mut decoder, body)
    }

    fn run(name: &str) -> Vec<StreamEvent> {
        decode_all(&read_peer(name))
    }

    fn calculator(expression: &str) -> StreamEvent {
        StreamEvent::ToolCall {
            id: "urn:flemma:tool:calculator:test".into(),
            name: "calculator".into(),
            arguments: format!(r#"{{"expression":"{expression}"}}"#),
        }
    }

    fn signature(value: &str) -> StreamEvent {
        StreamEvent::ThinkingSignature {
            provider: "vertex".into(),
            value: value.into(),
        }
    }

    /// The last two events: the signature, then the stop.
    fn tail(events: &[StreamEvent]) -> &[StreamEvent] {
        &events[events.len().saturating_sub(2)..]
    }

    fn response(id: &str) -> StreamEvent {
        StreamEvent::Response {
            id: Some(id.into()),
            model: Some("gemini-3-flash-preview".into()),
        }
    }

    #[test]
    fn function_call() {
        let events = run("vertex_function_call_streaming.txt");
        assert_eq!(collect(&events, false), "");
        assert_eq!(events[0], response("-Z5jabrIHeSy2fMPlMOTSA"));
        assert_eq!(events[1], calculator("15 * 7"));
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, StreamEvent::ToolCall { .. }))
                .count(),
            1
        );
        // Thoughts are output: 84 in, 11 + 27 out, the stream's `totalTokenCount` of 122.
        assert!(events.contains(&StreamEvent::Usage(thought(tokens(84, 38), 27))));
        let StreamEvent::ThinkingSignature { value, .. } = &tail(&events)[0] else {
            panic!("{events:?}")
        };
        assert!(value.starts_with("CiQBjz1rX5JIlnkYKHfjpgrg") && value.ends_with("lN3oF0W0NQ=="));
        assert_eq!(
            tail(&events)[1],
            StreamEvent::Done {
                stop: StopReason::ToolUse
            }
        );
    }

    #[test]
    fn function_call_with_thought_signature() {
        let events = run("vertex_function_call_with_thought_signature_streaming.txt");
        assert_eq!(
            collect(&events, true),
            "The user wants me to calculate 15 * 7. I'll use the calculator tool."
        );
        assert_eq!(collect(&events, false), "I'll calculate that for you.");
        // This recording's chunks have no `responseId` nor `modelVersion`.
        assert!(responses(&events).is_empty());
        assert!(events.contains(&calculator("15 * 7")));
        // 84 in, 15 + 25 out: the stream's `totalTokenCount` of 124.
        assert!(events.contains(&StreamEvent::Usage(thought(tokens(84, 40), 25))));
        assert_eq!(
            tail(&events),
            [
                signature("test-thought-signature-abc123"),
                StreamEvent::Done {
                    stop: StopReason::ToolUse
                }
            ]
        );
    }

    #[test]
    fn text_before_function() {
        let events = run("vertex_text_before_function_streaming.txt");
        assert_eq!(collect(&events, false), "I will calculate 23 + 45.\n");
        // Both chunks tell the response's id and model: told once, first.
        assert_eq!(events[0], response("_Z5jaaj5CKmX-eQP1o6OoQk"));
        assert_eq!(responses(&events).len(), 1);
        assert_eq!(events[2], calculator("23 + 45"));
        // The first chunk's usage has only `trafficType`: no usage event for it.
        let usages: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Usage { .. }))
            .collect();
        assert_eq!(usages, [&StreamEvent::Usage(thought(tokens(95, 48), 24))]);
        assert!(
            matches!(&tail(&events)[0], StreamEvent::ThinkingSignature { value, .. } if value.starts_with("CiQBjz1rX6DR42eI"))
        );
        assert_eq!(
            tail(&events)[1],
            StreamEvent::Done {
                stop: StopReason::ToolUse
            }
        );
    }

    #[test]
    fn final_response() {
        let events = run("vertex_final_response_streaming.txt");
        assert_eq!(collect(&events, false), "15 multiplied by 7 is 105.");
        assert_eq!(events[0], response("_J5jae71BoeQmNAP8YXCqQU"));
        assert_eq!(responses(&events).len(), 1);
        assert!(!events.iter().any(|e| matches!(
            e,
            StreamEvent::ToolCall { .. } | StreamEvent::ThinkingSignature { .. }
        )));
        assert!(events.contains(&StreamEvent::Usage(tokens(96, 12))));
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::EndTurn
            })
        );
    }

    #[test]
    fn cut_before_the_function_call_chunk() {
        let body = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/peer/vertex_text_before_function_streaming.txt"
        ))
        .unwrap();
        // The call arrives whole; a stream cut inside its chunk never delivers it.
        let cut = body.find("\"functionCall\"").unwrap();
        let events = decode_all(&body[..cut]);
        assert_eq!(collect(&events, false), "I will calculate 23 + 45.\n");
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, StreamEvent::ToolCall { .. } | StreamEvent::Done { .. }))
        );
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Error {
                message: crate::event::STREAM_CUT.to_owned()
            })
        );
    }

    #[test]
    fn whitespace_finish_reasons_arrays_and_errors() {
        let body = concat!(
            "data: not json\n\n",
            "data: [{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"  \\n\"},{\"text\":\"Hi\"},{\"functionCall\":{\"name\":\"now\"}}]}}]},",
            "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\",\"thoughtSignature\":\"sig\"}]},\"finishReason\":\"MAX_TOKENS\"}]}]\n\n",
        );
        let events = decode_all(body);
        assert_eq!(
            events,
            [
                StreamEvent::Text { text: "Hi".into() },
                StreamEvent::ToolCall {
                    id: "urn:flemma:tool:now:test".into(),
                    name: "now".into(),
                    arguments: "{}".into()
                },
                signature("sig"),
                StreamEvent::Done {
                    stop: StopReason::MaxTokens
                },
            ]
        );
        let stop = |reason: &str| {
            let events = decode_all(&format!(
                "data: {{\"candidates\":[{{\"finishReason\":\"{reason}\"}}]}}\n\n"
            ));
            events.last().cloned()
        };
        assert_eq!(
            stop("SAFETY"),
            Some(StreamEvent::Done {
                stop: StopReason::Blocked
            })
        );
        assert_eq!(
            stop("PROHIBITED_CONTENT"),
            Some(StreamEvent::Done {
                stop: StopReason::Blocked
            })
        );
        assert_eq!(
            stop("MALFORMED_FUNCTION_CALL"),
            Some(StreamEvent::Done {
                stop: StopReason::Other("MALFORMED_FUNCTION_CALL".into())
            })
        );
        let error =
            decode_all("data: {\"error\":{\"code\":429,\"message\":\"Resource exhausted\"}}\n\n");
        assert_eq!(
            error,
            [StreamEvent::Error {
                message: "Resource exhausted".into()
            }]
        );
    }

    #[test]
    fn the_first_chunk_that_tells_them_tells_the_response_id_and_model() {
        let body = concat!(
            "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]}}]}\n\n",
            "data: [{\"candidates\":[],\"modelVersion\":\"gemini-x\"},",
            "{\"candidates\":[{\"finishReason\":\"STOP\"}],\"responseId\":\"r-2\",\"modelVersion\":\"gemini-y\"}]\n\n",
        );
        let events = decode_all(body);
        assert_eq!(
            events,
            [
                StreamEvent::Text { text: "Hi".into() },
                StreamEvent::Response {
                    id: None,
                    model: Some("gemini-x".into())
                },
                StreamEvent::Done {
                    stop: StopReason::EndTurn
                },
            ]
        );
    }

    #[test]
    fn synthetic_ids_have_the_urn_shape() {
        let id = synthetic_id("calculator");
        let suffix = id.strip_prefix("urn:flemma:tool:calculator:").unwrap();
        assert!(
            suffix.len() >= 12 && suffix.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
    }
}
