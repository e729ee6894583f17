//! The content a span records when `telemetry.capture_content` is on, in the JSON shapes of
//! the OpenTelemetry conventions for generative AI (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.system_instructions`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`).

use flemma_core::ToolOutput;
use flemma_providers::{FilePart, Part, Prompt, PromptRole, StopReason};
use serde_json::{Value, json};
use tracing::Span;

/// What a request sent, for its span: `gen_ai.input.messages` and
/// `gen_ai.system_instructions`.
#[derive(Debug)]
pub(crate) struct Input {
    messages: String,
    system: Option<String>,
}

impl Input {
    /// The content of `prompt`.
    pub(crate) fn of(prompt: &Prompt<'_>) -> Self {
        let messages: Vec<Value> = prompt
            .messages
            .iter()
            .map(|message| {
                let role = match message.role {
                    PromptRole::User => "user",
                    PromptRole::Assistant => "assistant",
                };
                json!({"role": role, "parts": parts(&message.parts)})
            })
            .collect();
        Self {
            messages: Value::Array(messages).to_string(),
            system: prompt
                .system
                .as_deref()
                .map(|system| json!([{"type": "text", "content": system}]).to_string()),
        }
    }

    /// Records it on `span` (a `chat` span).
    pub(crate) fn record(&self, span: &Span) {
        span.record("gen_ai.input.messages", self.messages.as_str());
        if let Some(system) = &self.system {
            span.record("gen_ai.system_instructions", system.as_str());
        }
    }
}

fn parts(parts: &[Part<'_>]) -> Vec<Value> {
    parts.iter().filter_map(part).collect()
}

/// One part; a redacted thinking block (opaque provider data) is left out.
fn part(part: &Part<'_>) -> Option<Value> {
    Some(match part {
        Part::Text { text } => json!({"type": "text", "content": text}),
        Part::File(file) => match file {
            FilePart::TextFile { text, .. } => json!({"type": "text", "content": text}),
            // Not the bytes: the file, by the path the conversation references it with.
            FilePart::Image {
                mime_type,
                filename,
                ..
            } => {
                json!({"type": "file", "modality": "image", "mime_type": mime_type, "file_id": filename})
            }
            FilePart::Pdf {
                mime_type,
                filename,
                ..
            }
            | FilePart::Unsupported {
                mime_type,
                filename,
            } => json!({"type": "file", "mime_type": mime_type, "file_id": filename}),
        },
        Part::Thinking { redacted: true, .. } => return None,
        Part::Thinking { content, .. } => json!({"type": "reasoning", "content": content}),
        Part::ToolUse { id, name, input } => {
            json!({"type": "tool_call", "id": id, "name": name, "arguments": input})
        }
        Part::ToolResult {
            tool_use_id, parts, ..
        } => {
            let response = match Part::textual(parts) {
                Some(text) => Value::String(text.into_owned()),
                None => Value::Array(self::parts(parts)),
            };
            json!({"type": "tool_call_response", "id": tool_use_id, "response": response})
        }
    })
}

/// What a response said, gathered from its stream for `gen_ai.output.messages`.
#[derive(Debug, Default)]
pub(crate) struct Reply {
    text: String,
    reasoning: String,
    calls: Vec<Value>,
}

impl Reply {
    /// A reply of `text` alone (a compaction's summary).
    pub(crate) fn from_text(text: String) -> Self {
        Self {
            text,
            ..Self::default()
        }
    }

    /// Takes in what `event` adds.
    pub(crate) fn observe(&mut self, event: &flemma_providers::StreamEvent) {
        use flemma_providers::StreamEvent;
        match event {
            StreamEvent::Text { text } => self.text.push_str(text),
            StreamEvent::Thinking { text } => self.reasoning.push_str(text),
            StreamEvent::ToolCall {
                id,
                name,
                arguments,
            } => {
                let arguments = serde_json::from_str::<Value>(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.clone()));
                self.calls.push(
                    json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments}),
                );
            }
            _ => {}
        }
    }

    /// Records `gen_ai.output.messages` on `span`: one assistant message, ended by `stop`.
    pub(crate) fn record(self, span: &Span, stop: Option<&StopReason>) {
        let mut parts = Vec::with_capacity(self.calls.len() + 2);
        if !self.reasoning.is_empty() {
            parts.push(json!({"type": "reasoning", "content": self.reasoning}));
        }
        if !self.text.is_empty() {
            parts.push(json!({"type": "text", "content": self.text}));
        }
        parts.extend(self.calls);
        let finish = stop.map_or("error", super::finish_reason);
        let messages =
            json!([{"role": "assistant", "parts": parts, "finish_reason": finish}]).to_string();
        span.record("gen_ai.output.messages", messages);
    }
}

/// Records `gen_ai.tool.call.arguments` on `span`.
pub(crate) fn record_arguments(span: &Span, input: &Value) {
    span.record("gen_ai.tool.call.arguments", input.to_string());
}

/// Records `gen_ai.tool.call.result` on `span`: the text the result block holds.
pub(crate) fn record_result(span: &Span, output: &ToolOutput) {
    span.record("gen_ai.tool.call.result", output.result_text());
}
