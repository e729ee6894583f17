//! The OpenAI Responses API stream.

use std::collections::HashMap;

use serde_json::Value;

use crate::event::{StopReason, StreamDecoder, StreamEvent, compact_arguments, describe};
use crate::sse::SseEvent;
use crate::usage::{Reported, count};

/// Decodes OpenAI Responses `event:`/`data:` streams; the JSON `type` field is authoritative.
///
/// Text deltas become text, reasoning summary deltas thinking, each finished `function_call`
/// item a tool call (its `arguments` kept verbatim when they are a JSON object), and the
/// finished reasoning item the thinking signature (provider `openai`, base64 of its JSON).
/// The response's id and model come from the first event whose `response` object tells
/// them (`response.created`).
#[derive(Debug, Default)]
pub struct OpenAiResponsesDecoder {
    /// The response's id and model were told.
    described: bool,
    /// Function calls announced and not yet finished: item id → call id.
    open: HashMap<String, String>,
    /// The same calls by `output_index` (argument deltas carry both).
    open_by_index: HashMap<u64, String>,
    /// The reasoning summary part thinking text last came from: (item id, summary index).
    summary_part: Option<(String, u64)>,
    signature_sent: bool,
    calls: usize,
    done: bool,
}

impl OpenAiResponsesDecoder {
    /// A decoder at the start of a response.
    pub fn new() -> Self {
        Self::default()
    }

    fn call_id_for(&self, data: &Value) -> Option<String> {
        data.get("item_id")
            .and_then(Value::as_str)
            .and_then(|item| self.open.get(item))
            .or_else(|| {
                data.get("output_index")
                    .and_then(Value::as_u64)
                    .and_then(|i| self.open_by_index.get(&i))
            })
            .cloned()
    }

    fn forget(&mut self, item_id: &str, output_index: Option<u64>) {
        self.open.remove(item_id);
        if let Some(index) = output_index {
            self.open_by_index.remove(&index);
        }
    }

    fn output_item_done(&mut self, data: &Value, out: &mut Vec<StreamEvent>) {
        let item = &data["item"];
        match item["type"].as_str() {
            Some("function_call") => {
                let item_id = str_field(item, "id");
                self.forget(&item_id, data.get("output_index").and_then(Value::as_u64));
                let id = str_field(item, "call_id");
                let name = str_field(item, "name");
                let raw = str_field(item, "arguments");
                let arguments =
                    if matches!(serde_json::from_str::<Value>(&raw), Ok(Value::Object(_))) {
                        raw
                    } else {
                        let (arguments, warning) = compact_arguments(&raw, &name);
                        out.extend(warning);
                        arguments
                    };
                self.calls += 1;
                out.push(StreamEvent::ToolCall {
                    id,
                    name,
                    arguments,
                });
            }
            Some("reasoning") if !self.signature_sent => {
                self.signature_sent = true;
                out.push(StreamEvent::ThinkingSignature {
                    provider: "openai".to_owned(),
                    value: base64(item.to_string().as_bytes()),
                });
            }
            _ => {}
        }
    }

    fn finish_with(&mut self, stop: StopReason, out: &mut Vec<StreamEvent>) {
        self.open.clear();
        self.open_by_index.clear();
        self.done = true;
        out.push(StreamEvent::Done { stop });
    }
}

fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The Responses API's counts: the input includes the cached tokens, the output the
/// reasoning.
fn usage(response: &Value) -> Option<StreamEvent> {
    let usage = response.get("usage").filter(|u| u.is_object())?;
    let reported = Reported {
        input: count(usage, "/input_tokens"),
        cache_read: count(usage, "/input_tokens_details/cached_tokens"),
        output: count(usage, "/output_tokens"),
        reasoning: count(usage, "/output_tokens_details/reasoning_tokens"),
        ..Reported::default()
    };
    reported.any().then(|| StreamEvent::Usage(reported.usage()))
}

/// The message of an `error` event (`{message}` or `{error:{message}}`) or of a failed
/// response (`{response:{error:{message}}}`).
fn error_message(data: &Value) -> String {
    [
        data.get("message"),
        data.pointer("/error/message"),
        data.pointer("/response/error/message"),
    ]
    .into_iter()
    .flatten()
    .find_map(Value::as_str)
    .unwrap_or("the response failed")
    .to_owned()
}

/// Standard base64 (RFC 4648 alphabet, `=` padding).
fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl StreamDecoder for OpenAiResponsesDecoder {
    fn decode(&mut self, event: &SseEvent) -> Vec<StreamEvent> {
        let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(event.event.as_deref())
            .unwrap_or_default();
        // `response.created` carries the response object first; `response.in_progress`,
        // `.completed`, `.incomplete` and `.failed` repeat it.
        if kind.starts_with("response.")
            && let Some(response) = data.get("response")
        {
            let field = |key| response.get(key).and_then(Value::as_str);
            describe(&mut self.described, field("id"), field("model"), &mut out);
        }
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                let text = str_field(&data, "delta");
                if !text.is_empty() {
                    out.push(StreamEvent::Text { text });
                }
            }
            "response.reasoning_summary_text.delta" => {
                let text = str_field(&data, "delta");
                if !text.is_empty() {
                    let part = (
                        str_field(&data, "item_id"),
                        data["summary_index"].as_u64().unwrap_or_default(),
                    );
                    // A new summary part after earlier thinking starts a new paragraph.
                    if self.summary_part.as_ref().is_some_and(|p| *p != part) {
                        out.push(StreamEvent::Thinking {
                            text: "\n\n".to_owned(),
                        });
                    }
                    self.summary_part = Some(part);
                    out.push(StreamEvent::Thinking { text });
                }
            }
            "response.output_item.added" => {
                let item = &data["item"];
                if item["type"].as_str() == Some("function_call") {
                    let (id, name) = (str_field(item, "call_id"), str_field(item, "name"));
                    self.open.insert(str_field(item, "id"), id.clone());
                    if let Some(index) = data.get("output_index").and_then(Value::as_u64) {
                        self.open_by_index.insert(index, id.clone());
                    }
                    out.push(StreamEvent::ToolCallStart { id, name });
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = str_field(&data, "delta");
                if let Some(id) = self.call_id_for(&data)
                    && !delta.is_empty()
                {
                    out.push(StreamEvent::ToolCallDelta { id, delta });
                }
            }
            "response.output_item.done" => self.output_item_done(&data, &mut out),
            "response.completed" => {
                out.extend(usage(&data["response"]));
                let stop = if self.calls > 0 {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                };
                self.finish_with(stop, &mut out);
            }
            "response.incomplete" => {
                out.extend(usage(&data["response"]));
                let reason = data
                    .pointer("/response/incomplete_details/reason")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown");
                out.push(StreamEvent::Warning {
                    message: format!("the response is incomplete ({reason})"),
                });
                let stop = if reason == "max_output_tokens" {
                    StopReason::MaxTokens
                } else {
                    StopReason::Other(reason.to_owned())
                };
                self.finish_with(stop, &mut out);
            }
            "error" | "response.failed" => {
                self.open.clear();
                self.open_by_index.clear();
                self.done = true;
                out.push(StreamEvent::Error {
                    message: error_message(&data),
                });
            }
            _ => {}
        }
        out
    }

    fn finish(&mut self) -> Vec<StreamEvent> {
        self.open.clear();
        self.open_by_index.clear();
        crate::event::cut_unless(self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{calls, decode_all, deltas, read_peer, responses, tokens};

    fn run(name: &str) -> Vec<StreamEvent> {
        decode_all(&mut OpenAiResponsesDecoder::new(), &read_peer(name))
    }

    fn text(events: &[StreamEvent]) -> String {
        crate::test_support::collect(events, false)
    }

    fn signature(events: &[StreamEvent]) -> Vec<&str> {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ThinkingSignature { provider, value } => {
                    assert_eq!(provider, "openai");
                    Some(value.as_str())
                }
                _ => None,
            })
            .collect()
    }

    fn errors(events: &[StreamEvent]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Error { .. }))
            .count()
    }

    #[test]
    fn tool_use() {
        let events = run("openai_tool_use_streaming.txt");
        assert_eq!(text(&events), "");
        assert_eq!(
            calls(&events),
            [(
                "call_KXAyUFOnxWTpzW3JS6qKZ7mI",
                "calculator",
                r#"{"expression":"15 * 7"}"#
            )]
        );
        assert!(events.contains(&StreamEvent::ToolCallStart {
            id: "call_KXAyUFOnxWTpzW3JS6qKZ7mI".into(),
            name: "calculator".into()
        }));
        assert_eq!(deltas(&events), r#"{"expression":"15 * 7"}"#);
        assert!(events.contains(&StreamEvent::Usage(tokens(119, 9))));
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::ToolUse
            })
        );
        assert_eq!(errors(&events), 0);
    }

    #[test]
    fn text_before_tool() {
        let events = run("openai_text_before_tool_streaming.txt");
        assert_eq!(text(&events), "I will calculate the sum of 23 and 45.");
        assert_eq!(
            calls(&events),
            [(
                "call_o5Vcs8kz2HGQP5btOFGHNG9L",
                "calculator",
                r#"{"expression":"23 + 45"}"#
            )]
        );
        let first_call = events
            .iter()
            .position(|e| matches!(e, StreamEvent::ToolCall { .. }));
        let last_text = events
            .iter()
            .rposition(|e| matches!(e, StreamEvent::Text { .. }));
        assert!(last_text < first_call);
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::ToolUse
            })
        );
    }

    #[test]
    fn final_response() {
        let events = run("openai_final_response_streaming.txt");
        assert_eq!(text(&events), "15 multiplied by 7 is 105.");
        assert!(calls(&events).is_empty());
        assert!(events.contains(&StreamEvent::Usage(tokens(68, 10))));
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::EndTurn
            })
        );
    }

    #[test]
    fn hello() {
        let events = run("openai_hello_success_stream.txt");
        assert_eq!(text(&events), "Hello! How can I help you today?");
        assert!(signature(&events).is_empty());
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::EndTurn
            })
        );
    }

    #[test]
    fn response_created_tells_the_response_id_and_model_once() {
        // `response.in_progress` and `response.completed` repeat them: told once, first.
        let events = run("openai_hello_success_stream.txt");
        assert_eq!(
            events[0],
            StreamEvent::Response {
                id: Some("resp_0adfb20353bc8a4001698e3592d4d8819590df108fcce25dae".into()),
                model: Some("gpt-4o-mini-2024-07-18".into()),
            }
        );
        assert_eq!(responses(&events).len(), 1);
        assert_eq!(
            responses(&run("openai_reasoning_tool_call_stream.txt")),
            [(
                Some("resp_0f523439ef4cfa0e01698ed191fba08194a13183bf8a0952f5"),
                Some("o4-mini-2025-04-16")
            )]
        );
        // An incomplete response tells them too.
        assert_eq!(
            responses(&run("openai_incomplete_stream.txt")),
            [(
                Some("resp_0f7d483a772176c101698ed19429f08194a674c1e25da8ea34"),
                Some("gpt-4o-mini-2024-07-18")
            )]
        );
    }

    #[test]
    fn the_first_response_object_that_tells_them_does() {
        let body = concat!(
            "data: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\"}}\n\n",
            "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
            "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"model\":\"gpt-x\"}}\n\n",
        );
        let events = decode_all(&mut OpenAiResponsesDecoder::new(), body);
        assert_eq!(responses(&events), [(Some("resp_1"), Some("gpt-x"))]);
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::EndTurn
            })
        );

        let failed = "data: {\"type\":\"response.failed\",\"response\":{\"id\":\"resp_2\",\"error\":{\"message\":\"it failed\"}}}\n\n";
        let events = decode_all(&mut OpenAiResponsesDecoder::new(), failed);
        assert_eq!(
            events,
            [
                StreamEvent::Response {
                    id: Some("resp_2".into()),
                    model: None
                },
                StreamEvent::Error {
                    message: "it failed".into()
                }
            ]
        );
    }

    /// The reasoning item of the recording's `response.output_item.done`, as compact JSON.
    fn done_reasoning_item(name: &str) -> String {
        let path = format!(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/fixtures/peer/{}"),
            name
        );
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|d| d["type"] == "response.output_item.done" && d["item"]["type"] == "reasoning")
            .unwrap()["item"]
            .to_string()
    }

    #[test]
    fn reasoning() {
        // The recording's reasoning item has an empty summary: no thinking text, only the
        // signature.
        let events = run("openai_reasoning_stream.txt");
        assert_eq!(text(&events), "105.");
        let signatures = signature(&events);
        assert_eq!(signatures.len(), 1);
        assert_eq!(
            signatures[0],
            base64(done_reasoning_item("openai_reasoning_stream.txt").as_bytes())
        );
        assert!(
            done_reasoning_item("openai_reasoning_stream.txt")
                .contains("rs_0a7dab2ae8d22af601698ed1906be081909806230f7f248674")
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, StreamEvent::Thinking { .. }))
        );
        // The output counts the reasoning: 64 of the 117.
        let mut usage = tokens(24, 117);
        usage.reasoning = 64;
        assert!(events.contains(&StreamEvent::Usage(usage)));
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::EndTurn
            })
        );
    }

    #[test]
    fn reasoning_tool_call() {
        let events = run("openai_reasoning_tool_call_stream.txt");
        assert_eq!(
            calls(&events),
            [(
                "call_41N46mgjtbkhTyLQRzubQluO",
                "calculator",
                r#"{"expression":"6 * 7"}"#
            )]
        );
        let signatures = signature(&events);
        assert_eq!(signatures.len(), 1);
        // It is the item of `response.output_item.done` (its encrypted content differs from the
        // `added` one and the one in `response.completed`).
        let done_item = done_reasoning_item("openai_reasoning_tool_call_stream.txt");
        assert!(done_item.contains("gAAAAABpjtGTlbDw2dP_"));
        assert_eq!(signatures[0], base64(done_item.as_bytes()));
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::ToolUse
            })
        );
    }

    #[test]
    fn incomplete() {
        let events = run("openai_incomplete_stream.txt");
        assert_eq!(
            text(&events),
            "# The History of Mathematics: From Ancient Babylon to Modern Times\n\nMathematics"
        );
        assert!(
            events.iter().any(|e| matches!(e, StreamEvent::Warning { message } if message.contains("max_output_tokens")))
        );
        assert!(events.contains(&StreamEvent::Usage(tokens(27, 16))));
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::MaxTokens
            })
        );
        assert_eq!(errors(&events), 0);
    }

    #[test]
    fn cut_in_the_middle_of_a_tool_call() {
        let body = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/fixtures/peer/openai_tool_use_streaming.txt"
        ))
        .unwrap();
        let cut = body
            .find("event: response.function_call_arguments.done")
            .unwrap();
        let events = decode_all(&mut OpenAiResponsesDecoder::new(), &body[..cut]);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::ToolCallStart { .. }))
        );
        assert!(calls(&events).is_empty());
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Error {
                message: crate::event::STREAM_CUT.to_owned()
            })
        );
        assert!(!events.iter().any(|e| matches!(e, StreamEvent::Done { .. })));
    }

    #[test]
    fn summary_deltas_are_thinking() {
        let body = concat!(
            "event: response.reasoning_summary_text.delta\n",
            "data: {\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_1\",\"summary_index\":0,\"delta\":\"First.\"}\n\n",
            "data: {\"type\":\"response.reasoning_summary_text.delta\",\"item_id\":\"rs_1\",\"summary_index\":1,\"delta\":\"Second.\"}\n\n",
            "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]}}\n\n",
            "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[]}}\n\n",
            "data: {\"type\":\"response.completed\",\"response\":{}}\n\n",
        );
        let events = decode_all(&mut OpenAiResponsesDecoder::new(), body);
        let thinking: String = events
            .iter()
            .filter_map(|e| {
                if let StreamEvent::Thinking { text } = e {
                    Some(text.as_str())
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(thinking, "First.\n\nSecond.");
        assert_eq!(
            signature(&events),
            [base64(br#"{"type":"reasoning","id":"rs_1","summary":[]}"#)]
        );
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Done {
                stop: StopReason::EndTurn
            })
        );
    }

    #[test]
    fn invalid_arguments_errors_and_malformed_json() {
        let body = concat!(
            "data: {not json\n\n",
            "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{\\\"a\\\": 1}\"}}\n\n",
            "data: {\"type\":\"response.output_item.done\",\"item\":{\"type\":\"function_call\",\"call_id\":\"c2\",\"name\":\"g\",\"arguments\":\"{oops\"}}\n\n",
            "event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n",
        );
        let events = decode_all(&mut OpenAiResponsesDecoder::new(), body);
        assert_eq!(
            calls(&events),
            [("c1", "f", "{\"a\": 1}"), ("c2", "g", "{}")]
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::Warning { message } if message.contains("`g`")))
        );
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Error {
                message: "boom".into()
            })
        );

        let failed = "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"x\",\"message\":\"it failed\"}}}\n\n";
        let events = decode_all(&mut OpenAiResponsesDecoder::new(), failed);
        assert_eq!(
            events,
            [StreamEvent::Error {
                message: "it failed".into()
            }]
        );
    }
}
