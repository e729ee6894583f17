//! The OpenAI-compatible Chat Completions stream, the base of Moonshot and
//! other compatible providers.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::event::{StopReason, StreamDecoder, StreamEvent, compact_arguments, describe};
use crate::sse::SseEvent;
use crate::usage::{Reported, count};

/// A tool call being accumulated.
#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

/// Decodes Chat Completions `data:` chunks (ending with `data: [DONE]`).
///
/// Content deltas become text, `reasoning_content` (or `reasoning`) deltas thinking; tool
/// calls accumulate by `index` and are emitted, ordered by index, when the choice finishes.
/// Every chunk repeats the response's `id` and `model`: the first chunk that has them tells
/// them.
#[derive(Debug, Default)]
pub struct ChatCompletionsDecoder {
    /// The response's id and model were told.
    described: bool,
    calls: BTreeMap<u64, PendingCall>,
    /// The last usage reported (some providers repeat it in the choice and the final chunk).
    usage: Reported,
    done: bool,
}

impl ChatCompletionsDecoder {
    /// A decoder at the start of a response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Chat Completions' counts: the prompt includes the cached tokens, the completion the
    /// reasoning. The same counts reported again are not reported twice.
    fn usage(&mut self, usage: &Value, out: &mut Vec<StreamEvent>) {
        if !usage.is_object() {
            return;
        }
        let mut merged = self.usage;
        merged.merge(Reported {
            input: count(usage, "/prompt_tokens"),
            // OpenAI's detail, and the top-level count some compatible servers send.
            cache_read: count(usage, "/prompt_tokens_details/cached_tokens")
                .or_else(|| count(usage, "/cached_tokens")),
            output: count(usage, "/completion_tokens"),
            reasoning: count(usage, "/completion_tokens_details/reasoning_tokens"),
            ..Reported::default()
        });
        if merged.any() && merged != self.usage {
            self.usage = merged;
            out.push(StreamEvent::Usage(merged.usage()));
        }
    }

    fn tool_call_delta(&mut self, call: &Value, out: &mut Vec<StreamEvent>) {
        let id = call
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let index = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or_else(|| {
                // Without an index: the call with this id, a new call when the id is new, else the
                // last one.
                let known =
                    id.and_then(|id| self.calls.iter().find(|(_, c)| c.id == id).map(|(i, _)| *i));
                let next = self.calls.keys().next_back().map_or(0, |i| i + 1);
                match (known, id) {
                    (Some(i), _) => i,
                    (None, Some(_)) => next,
                    (None, None) => next.saturating_sub(1),
                }
            });
        let function = &call["function"];
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let arguments = function
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let pending = self.calls.entry(index).or_default();
        let first = pending.id.is_empty();
        if pending.name.is_empty() {
            name.clone_into(&mut pending.name);
        }
        if first {
            pending.id = id.map_or_else(|| format!("call_{index}"), str::to_owned);
            out.push(StreamEvent::ToolCallStart {
                id: pending.id.clone(),
                name: pending.name.clone(),
            });
        }
        pending.arguments.push_str(arguments);
        if !arguments.is_empty() {
            out.push(StreamEvent::ToolCallDelta {
                id: pending.id.clone(),
                delta: arguments.to_owned(),
            });
        }
    }

    /// Emits the accumulated calls in index order; returns how many there were.
    fn emit_calls(&mut self, out: &mut Vec<StreamEvent>) -> usize {
        let calls = std::mem::take(&mut self.calls);
        let count = calls.len();
        for PendingCall {
            id,
            name,
            arguments,
        } in calls.into_values()
        {
            let (arguments, warning) = compact_arguments(&arguments, &name);
            out.extend(warning);
            out.push(StreamEvent::ToolCall {
                id,
                name,
                arguments,
            });
        }
        count
    }

    fn finish_reason(&mut self, reason: &str, out: &mut Vec<StreamEvent>) {
        let stop = match reason {
            "stop" | "tool_calls" | "function_call" => {
                if self.emit_calls(out) > 0 {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                }
            }
            "length" => {
                self.calls.clear();
                out.push(StreamEvent::Warning {
                    message:
                        "the response was truncated: it reached the maximum number of output tokens"
                            .to_owned(),
                });
                StopReason::MaxTokens
            }
            _ => {
                self.calls.clear();
                StopReason::Blocked
            }
        };
        self.done = true;
        out.push(StreamEvent::Done { stop });
    }

    /// The text, reasoning and tool-call deltas of a choice.
    fn delta(&mut self, delta: &Value, out: &mut Vec<StreamEvent>) {
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta
                .get(key)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                out.push(StreamEvent::Thinking {
                    text: text.to_owned(),
                });
            }
        }
        if let Some(text) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            out.push(StreamEvent::Text {
                text: text.to_owned(),
            });
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.tool_call_delta(call, out);
        }
    }
}

impl StreamDecoder for ChatCompletionsDecoder {
    fn decode(&mut self, event: &SseEvent) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        if event.data.trim() == "[DONE]" {
            if !self.done {
                let stop = if self.emit_calls(&mut out) > 0 {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                };
                self.done = true;
                out.push(StreamEvent::Done { stop });
            }
            return out;
        }
        let Ok(data) = serde_json::from_str::<Value>(&event.data) else {
            return out;
        };
        let field = |key| data.get(key).and_then(Value::as_str);
        describe(&mut self.described, field("id"), field("model"), &mut out);
        if let Some(error) = data.get("error").filter(|e| !e.is_null()) {
            let message = error.get("message").and_then(Value::as_str).map_or_else(
                || {
                    error
                        .as_str()
                        .map_or_else(|| error.to_string(), str::to_owned)
                },
                str::to_owned,
            );
            self.calls.clear();
            self.done = true;
            out.push(StreamEvent::Error { message });
            return out;
        }
        // Usage may follow the finish (OpenAI's `stream_options.include_usage` chunk).
        let choice = data.pointer("/choices/0");
        if !self.done
            && let Some(choice) = choice
        {
            self.delta(&choice["delta"], &mut out);
        }
        // Moonshot reports usage inside the finishing choice as well as in the last chunk.
        if let Some(usage) = choice.and_then(|c| c.get("usage")) {
            self.usage(usage, &mut out);
        }
        if let Some(usage) = data.get("usage") {
            self.usage(usage, &mut out);
        }
        if !self.done
            && let Some(reason) = choice
                .and_then(|c| c.get("finish_reason"))
                .and_then(Value::as_str)
        {
            self.finish_reason(reason, &mut out);
        }
        out
    }

    fn finish(&mut self) -> Vec<StreamEvent> {
        self.calls.clear();
        crate::event::cut_unless(self.done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{calls, collect, deltas, read_peer as read, responses, tokens};

    fn decode_all(body: &str) -> Vec<StreamEvent> {
        crate::test_support::decode_all(&mut ChatCompletionsDecoder::new(), body)
    }

    fn dones(events: &[StreamEvent]) -> Vec<&StopReason> {
        events
            .iter()
            .filter_map(|e| {
                if let StreamEvent::Done { stop } = e {
                    Some(stop)
                } else {
                    None
                }
            })
            .collect()
    }

    fn usages(events: &[StreamEvent]) -> usize {
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Usage { .. }))
            .count()
    }

    #[test]
    fn hello() {
        let events = decode_all(&read("chat_completions_hello_stream.txt"));
        assert_eq!(collect(&events, false), "Hello!");
        assert!(!events.contains(&StreamEvent::Text {
            text: String::new()
        }));
        assert_eq!(dones(&events), [&StopReason::EndTurn]);
        // Usage is reported twice (in the finishing choice and the last chunk): emitted once.
        assert_eq!(usages(&events), 1);
        assert!(events.contains(&StreamEvent::Usage(tokens(26, 5))));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, StreamEvent::Error { .. }))
        );
    }

    #[test]
    fn thinking() {
        let events = decode_all(&read("chat_completions_thinking_stream.txt"));
        let thinking = collect(&events, true);
        assert!(thinking.starts_with(
            "The user wants me to calculate 17 * 23 step by step.\n\nI can use the distributive"
        ));
        assert!(thinking.ends_with(
            "\n23 * 10 = 230\n23 * 7 = 161\n230 + 161 = 391\nYes, correct.\n\nSo the answer is 391."
        ));
        assert_eq!(thinking.chars().count(), 1623);
        let text = collect(&events, false);
        assert!(text.starts_with(
            "Here is the step-by-step calculation:\n\n**Method 1: Using the distributive property**"
        ));
        assert!(text.ends_with("**Answer:** $17 \\times 23 = \\boxed{391}$"));
        // All thinking arrives before the text.
        let last_thinking = events
            .iter()
            .rposition(|e| matches!(e, StreamEvent::Thinking { .. }));
        let first_text = events
            .iter()
            .position(|e| matches!(e, StreamEvent::Text { .. }));
        assert!(last_thinking < first_text);
        assert!(events.contains(&StreamEvent::Usage(tokens(20, 817))));
        assert_eq!(dones(&events), [&StopReason::EndTurn]);
    }

    #[test]
    fn tool_call() {
        let events = decode_all(&read("chat_completions_tool_call_stream.txt"));
        assert_eq!(collect(&events, false), "");
        assert_eq!(
            calls(&events),
            [(
                "search:0",
                "search",
                r#"{"query":"current weather in Tokyo"}"#
            )]
        );
        assert_eq!(
            events
                .iter()
                .filter(|e| matches!(e, StreamEvent::ToolCallStart { .. }))
                .count(),
            1
        );
        assert!(events.contains(&StreamEvent::ToolCallStart {
            id: "search:0".into(),
            name: "search".into()
        }));
        assert_eq!(deltas(&events), r#"{"query": "current weather in Tokyo"}"#);
        assert_eq!(dones(&events), [&StopReason::ToolUse]);
        assert!(events.contains(&StreamEvent::Usage(tokens(86, 20))));
    }

    #[test]
    fn the_first_chunk_tells_the_response_id_and_model_once() {
        // Every chunk repeats them (the last, usage-only chunk too): told once, first.
        let events = decode_all(&read("chat_completions_hello_stream.txt"));
        assert_eq!(
            events[0],
            StreamEvent::Response {
                id: Some("chatcmpl-69c502e6c7b8919eddac04a5".into()),
                model: Some("kimi-k2.5".into()),
            }
        );
        assert_eq!(responses(&events).len(), 1);
        assert_eq!(
            responses(&decode_all(&read("chat_completions_tool_call_stream.txt"))),
            [(Some("chatcmpl-69c50304a354904bee7f0c05"), Some("kimi-k2.5"))]
        );
    }

    #[test]
    fn chunks_without_id_or_model_tell_nothing_until_one_does() {
        let body = [
            chunk(r#"{"index":0,"delta":{"content":"Hi"}}"#),
            "data: {\"id\":\"\",\"model\":\"m-1\",\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n".to_owned(),
            "data: {\"id\":\"c-2\",\"model\":\"m-2\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n".to_owned(),
        ]
        .concat();
        let events = decode_all(&body);
        assert_eq!(responses(&events), [(None, Some("m-1"))]);
        assert_eq!(events[0], StreamEvent::Text { text: "Hi".into() });
        assert_eq!(dones(&events), [&StopReason::EndTurn]);
    }

    #[test]
    fn cut_in_the_middle_of_a_tool_call() {
        let body = read("chat_completions_tool_call_stream.txt");
        let cut = body.find(r#"{"arguments":" Tokyo"}"#).unwrap();
        let events = decode_all(&body[..cut]);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::ToolCallStart { .. }))
        );
        assert!(calls(&events).is_empty());
        assert!(dones(&events).is_empty());
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Error {
                message: crate::event::STREAM_CUT.to_owned()
            })
        );
    }

    fn chunk(choice: &str) -> String {
        format!("data: {{\"choices\":[{choice}]}}\n\n")
    }

    #[test]
    fn parallel_calls_are_ordered_by_index_and_invalid_json_is_replaced() {
        let body = [
            "data: {malformed\n\n".to_owned(),
            chunk(r#"{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{oops"}}]}}"#),
            chunk(r#"{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":""}}]}}"#),
            chunk(r#"{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\": 1}"}}]}}"#),
            chunk(r#"{"index":0,"delta":{},"finish_reason":"tool_calls"}"#),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let events = decode_all(&body);
        assert_eq!(calls(&events), [("a", "f", r#"{"x":1}"#), ("b", "g", "{}")]);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::Warning { message } if message.contains("`g`")))
        );
        assert_eq!(dones(&events), [&StopReason::ToolUse]);
    }

    #[test]
    fn finish_reasons_done_without_finish_and_errors() {
        let reasoning = chunk(r#"{"index":0,"delta":{"reasoning":"hmm"}}"#);
        let length = [
            reasoning.clone(),
            chunk(r#"{"index":0,"delta":{},"finish_reason":"length"}"#),
        ]
        .concat();
        let events = decode_all(&length);
        assert_eq!(collect(&events, true), "hmm");
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::Warning { .. }))
        );
        assert_eq!(dones(&events), [&StopReason::MaxTokens]);

        let filtered = chunk(r#"{"index":0,"delta":{},"finish_reason":"content_filter"}"#);
        assert_eq!(dones(&decode_all(&filtered)), [&StopReason::Blocked]);

        let no_finish = [
            chunk(r#"{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}"#),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat();
        let events = decode_all(&no_finish);
        assert_eq!(calls(&events), [("a", "f", "{}")]);
        assert_eq!(dones(&events), [&StopReason::ToolUse]);

        let error = "data: {\"error\":{\"message\":\"rate limited\",\"type\":\"rate_limit\"}}\n\n";
        assert_eq!(
            decode_all(error),
            [StreamEvent::Error {
                message: "rate limited".into()
            }]
        );
    }
}
