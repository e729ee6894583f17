//! Writes decoded events into `.chat` text, as the reference implementation does.

use flemma_ast::escape::Escaper;
use flemma_ast::writer::{append_prefix, thinking_block, tool_use_block};
use flemma_ids::{ToolName, ToolUseId};

use crate::event::{StopReason, StreamEvent};

/// Accumulates a streamed response and yields the text to append to the conversation.
///
/// Text is appended as it arrives, escaped ([`flemma_ast::escape`]) so that nothing the model
/// writes can start a message, a tool call, a thinking block or an abort marker, or leave a
/// fence open (a line that may need its backslash, and a fenced block until it closes, wait for
/// the rest of their text); each complete tool call becomes a `**Tool Use:**` block with the
/// wire name decoded (`__` → `.`); thinking (and redacted thinking) is written at the end, with
/// its signature, escaped the same way. Tool calls whose stream broke off never reach it.
///
/// ```
/// use flemma_providers::{ResponseWriter, StreamEvent};
/// let mut writer = ResponseWriter::new();
/// let mut out = writer.apply(&StreamEvent::Text { text: "Let me check.".into() });
/// out += &writer.apply(&StreamEvent::ToolCall {
///     id: "toolu_01".into(),
///     name: "flemma__jobs__status".into(),
///     arguments: r#"{"job_id":"job_1"}"#.into(),
/// });
/// out += &writer.finish();
/// assert_eq!(out, "Let me check.\n\n**Tool Use:** `flemma.jobs.status` (`toolu_01`)\n\n```json\n{\"job_id\":\"job_1\"}\n```\n");
/// ```
#[derive(Debug, Default)]
pub struct ResponseWriter {
    written: String,
    text: Escaper,
    thinking: String,
    signature: Option<(String, String)>,
    redacted: Vec<String>,
    stop: Option<StopReason>,
    error: Option<String>,
    warnings: Vec<String>,
}

impl ResponseWriter {
    /// A writer at the start of a response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes one event; returns the text to append now (often empty).
    pub fn apply(&mut self, event: &StreamEvent) -> String {
        let out = match event {
            StreamEvent::Text { text } => self.text.push(text),
            StreamEvent::ToolCall {
                id,
                name,
                arguments,
            } => {
                let input =
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(arguments)
                        .unwrap_or_default();
                // The text before the call ends here: what it held is written first.
                let mut out = self.text.finish();
                self.written.push_str(&out);
                let block =
                    tool_use_block(&self.written, &decode_name(name), &sanitize_id(id), &input);
                self.written.push_str(&block);
                out.push_str(&block);
                return out;
            }
            StreamEvent::Thinking { text } => {
                self.thinking.push_str(text);
                String::new()
            }
            StreamEvent::ThinkingSignature { provider, value } => {
                self.signature = Some((provider.clone(), value.clone()));
                String::new()
            }
            StreamEvent::RedactedThinking { data } => {
                self.redacted.push(data.clone());
                String::new()
            }
            StreamEvent::Warning { message } => {
                self.warnings.push(message.clone());
                String::new()
            }
            StreamEvent::Error { message } => {
                // The first error is the cause; a decoder's `finish` may report the cut after it.
                self.error.get_or_insert_with(|| message.clone());
                String::new()
            }
            StreamEvent::Done { stop } => {
                self.stop = Some(stop.clone());
                String::new()
            }
            _ => String::new(),
        };
        self.written.push_str(&out);
        out
    }

    /// Ends the response: the text the escaper held (a line that may need its backslash, a
    /// fence not closed), then the thinking blocks, when there were any.
    pub fn finish(&mut self) -> String {
        let text = self.text.finish();
        self.written.push_str(&text);
        let mut out = String::new();
        let has_thinking = !self.thinking.trim().is_empty() || self.signature.is_some();
        if has_thinking {
            out.push_str(append_prefix(&self.written));
            let signature = self
                .signature
                .as_ref()
                .map(|(p, v)| (p.as_str(), v.as_str()));
            out.push_str(&thinking_block(&self.thinking, signature, false));
        }
        for data in std::mem::take(&mut self.redacted) {
            let prefix = append_prefix(&format!("{}{out}", self.written)).to_owned();
            out.push_str(&prefix);
            out.push_str(&thinking_block(&data, None, true));
        }
        self.written.push_str(&out);
        format!("{text}{out}")
    }

    /// Everything written so far.
    pub fn written(&self) -> &str {
        &self.written
    }

    /// Why the response ended, once it did.
    pub fn stop(&self) -> Option<&StopReason> {
        self.stop.as_ref()
    }

    /// The error the stream reported, if any.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Warnings collected (invalid tool arguments replaced by `{}`).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// `flemma__jobs__status` → `flemma.jobs.status`.
fn decode_name(wire: &str) -> ToolName {
    ToolName::sanitized(wire)
}

/// Ids keep their characters except the few a `**Tool Use:**` header cannot carry.
fn sanitize_id(id: &str) -> ToolUseId {
    ToolUseId::sanitized(id)
}
