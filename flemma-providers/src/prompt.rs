//! The provider-neutral prompt (spec §13.1) and its builder.
//!
//! [`build_prompt`] turns a parsed transcript into a [`Prompt`]: the system text, the
//! user/assistant history as generic [`Part`]s (spec §1.14), and the warnings found on the way.
//! Provider adapters turn a [`Prompt`] into their request bodies; they wire-encode tool names
//! and normalise tool ids themselves.
//!
//! Template evaluation and `@./file` references are not done here yet: a `TemplateEngine`
//! evaluates them in a later piece of work. Until then the text of a `@You:` or `@System:`
//! message is its text segments with every `{{ … }}` / `{% … %}` segment re-rendered as
//! written (trim dashes included).

use std::collections::{HashMap, HashSet};

use flemma_ast::{
    Document, JobResult, JobStatus, JsonObject, Message, Role, Segment, Template, ToolResult,
    ToolStatus,
};
use serde::Serialize;

/// The content of a synthetic result sent for a tool call that has no final result.
pub const NO_RESULT_PROVIDED: &str = "No result provided";

/// A conversation ready to be encoded for a provider.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt {
    /// The trimmed text of the last `@System:` message, when there is one.
    pub system: Option<String>,
    /// The history, in document order, followed by at most one user message holding the
    /// synthetic results of unresolved tool calls.
    pub messages: Vec<PromptMessage>,
    /// Warnings found while building (unresolved tool calls, job results of unknown jobs).
    pub diagnostics: Vec<PromptDiagnostic>,
}

/// Who speaks a [`PromptMessage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptRole {
    /// The user (`@You:`).
    User,
    /// The model (`@Assistant:`).
    Assistant,
}

/// One message of the history; never empty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptMessage {
    /// Who speaks.
    pub role: PromptRole,
    /// The content, in document order.
    pub parts: Vec<Part>,
}

/// A provider signature carried by a thinking part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThinkingSignature {
    /// The provider that produced the signature (`anthropic`, `openai`, `vertex`, …).
    pub provider: String,
    /// The opaque signature value.
    pub value: String,
}

/// A provider-neutral piece of message content (spec §1.14, generic parts).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A thinking block of an assistant message.
    Thinking {
        /// The thinking text (opaque provider data when `redacted`).
        content: String,
        /// The provider signature, when the block has one.
        signature: Option<ThinkingSignature>,
        /// Whether the content is redacted (encrypted) provider data.
        redacted: bool,
    },
    /// A tool call of an assistant message.
    ToolUse {
        /// The call id as written in the transcript.
        id: String,
        /// The tool name as written in the transcript (adapters wire-encode it).
        name: String,
        /// The call input.
        input: JsonObject,
    },
    /// The final result of a tool call, in a user message.
    ToolResult {
        /// The id of the call it answers.
        tool_use_id: String,
        /// The tool name, taken from the matching tool use when there is one.
        name: Option<String>,
        /// The raw result content.
        content: String,
        /// Whether the result is an error (status `error`).
        is_error: bool,
    },
}

/// A warning found while building a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptDiagnostic {
    /// The 1-based line of the construct concerned.
    pub line: u32,
    /// What is wrong and what is sent instead.
    pub message: String,
}

/// Builds the provider-neutral prompt of a transcript (spec §13.1, §1.10, §8.6).
///
/// * `system` is the trimmed text of the last `@System:` message; roles other than `@You:`,
///   `@Assistant:` and `@System:` are dropped, and so are messages left without parts.
/// * In `@You:` messages, final tool results (no status, or `error`) become
///   [`Part::ToolResult`]s named after their tool use; results with a lifecycle status
///   (`pending`, `approved`, `rejected`, `denied`, `aborted`) are dropped. Text becomes
///   [`Part::Text`] (whitespace-only text is skipped).
/// * A Job Result becomes the text `[Job result for <tool> (<tool_use_id>)]\n<content>`, or
///   `[Job result for unknown tool (job: <job_id>)]\n<content>` (plus a diagnostic) when no
///   tool result carries its `job=` id. A failed job (status `error`) is sent as
///   `[Job result for …]\nError: <content>`, so the model sees an error rather than a
///   success. Empty content sends nothing.
/// * In `@Assistant:` messages, text, thinking (empty unsigned plain thinking is skipped) and
///   tool uses are kept. Abort markers are dropped, with the whitespace-only text after
///   them, when the message has a tool use, and become the text `<!-- MESSAGE -->` otherwise.
/// * Malformed segments are never sent.
/// * Every tool call without a final result anywhere in the document gets a diagnostic and a
///   synthetic [`NO_RESULT_PROVIDED`] error result; these are sent together in one extra user
///   message after the history.
///
/// ```
/// use flemma_providers::{Part, PromptRole, build_prompt};
///
/// let doc = flemma_ast::parse("@System:\n Be brief. \n\n@You:\nHi!\n");
/// let prompt = build_prompt(&doc);
/// assert_eq!(prompt.system.as_deref(), Some("Be brief."));
/// assert_eq!(prompt.messages[0].role, PromptRole::User);
/// assert_eq!(prompt.messages[0].parts, vec![Part::Text { text: "Hi!".to_owned() }]);
/// ```
pub fn build_prompt(doc: &Document) -> Prompt {
    let context = Context::new(doc);
    let mut prompt = Prompt {
        system: None,
        messages: Vec::new(),
        diagnostics: Vec::new(),
    };
    for message in &doc.messages {
        let (role, parts) = match &message.role {
            Role::System => {
                prompt.system = Some(inline_text(&message.segments).trim().to_owned());
                continue;
            }
            Role::You => (
                PromptRole::User,
                user_parts(message, &context, &mut prompt.diagnostics),
            ),
            Role::Assistant => (PromptRole::Assistant, assistant_parts(message)),
            Role::Other(_) => continue,
        };
        if !parts.is_empty() {
            prompt.messages.push(PromptMessage { role, parts });
        }
    }
    let synthetic = unresolved_results(doc, &mut prompt.diagnostics);
    if !synthetic.is_empty() {
        prompt.messages.push(PromptMessage {
            role: PromptRole::User,
            parts: synthetic,
        });
    }
    prompt
}

/// What the builder looks up across the document.
struct Context<'d> {
    /// Tool use id → tool name.
    tool_names: HashMap<&'d str, &'d str>,
    /// Job id → (tool use id, tool name) of the tool result that started it.
    jobs: HashMap<&'d str, (&'d str, &'d str)>,
}

impl<'d> Context<'d> {
    fn new(doc: &'d Document) -> Self {
        let table = flemma_ast::build_tool_sibling_table(doc);
        let tool_names: HashMap<&str, &str> = table
            .iter()
            .filter_map(|(id, pair)| pair.tool_use.map(|u| (*id, u.name.as_str())))
            .collect();
        let mut jobs = HashMap::new();
        for result in doc.messages.iter().flat_map(Message::tool_results) {
            if let Some(job_id) = result.job_id() {
                let id = result.tool_use_id.as_str();
                let name = tool_names.get(id).copied().unwrap_or("unknown");
                jobs.entry(job_id).or_insert((id, name));
            }
        }
        Self { tool_names, jobs }
    }
}

/// Text segments concatenated, templates re-rendered as written.
fn inline_text(segments: &[Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        push_inline(&mut out, segment);
    }
    out
}

/// Appends a text or template segment to `out`; other segments add nothing.
fn push_inline(out: &mut String, segment: &Segment) {
    match segment {
        Segment::Text(t) => out.push_str(&t.value),
        Segment::Expression(t) => push_template(out, "{{", t, "}}"),
        Segment::Code(t) => push_template(out, "{%", t, "%}"),
        _ => {}
    }
}

fn push_template(out: &mut String, open: &str, t: &Template, close: &str) {
    out.push_str(open);
    if t.trim_before {
        out.push('-');
    }
    out.push_str(&t.code);
    if t.trim_after {
        out.push('-');
    }
    out.push_str(close);
}

/// Pushes a text part unless `text` is whitespace-only; empties `text`.
fn flush_text(parts: &mut Vec<Part>, text: &mut String) {
    if !text.trim().is_empty() {
        parts.push(Part::Text {
            text: std::mem::take(text),
        });
    }
    text.clear();
}

fn user_parts(
    message: &Message,
    context: &Context<'_>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut text = String::new();
    for segment in &message.segments {
        match segment {
            Segment::Text(_) | Segment::Expression(_) | Segment::Code(_) => {
                push_inline(&mut text, segment);
            }
            Segment::ToolResult(result) => {
                flush_text(&mut parts, &mut text);
                if let Some(part) = tool_result_part(result, context) {
                    parts.push(part);
                }
            }
            Segment::JobResult(job) => {
                flush_text(&mut parts, &mut text);
                if let Some(part) = job_result_part(job, context, diagnostics) {
                    parts.push(part);
                }
            }
            _ => {}
        }
    }
    flush_text(&mut parts, &mut text);
    parts
}

fn tool_result_part(result: &ToolResult, context: &Context<'_>) -> Option<Part> {
    if !result.is_final() {
        return None;
    }
    let id = result.tool_use_id.as_str();
    Some(Part::ToolResult {
        tool_use_id: id.to_owned(),
        name: context.tool_names.get(id).map(|name| (*name).to_owned()),
        content: result.content.clone(),
        is_error: result.status == Some(ToolStatus::Error),
    })
}

fn job_result_part(
    job: &JobResult,
    context: &Context<'_>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Option<Part> {
    if job.content.is_empty() {
        return None;
    }
    let job_id = job.job_id.as_str();
    let mut text = if let Some((tool_use_id, name)) = context.jobs.get(job_id) {
        format!("[Job result for {name} ({tool_use_id})]\n")
    } else {
        diagnostics.push(PromptDiagnostic {
            line: job.span.start_line,
            message: format!(
                "Job result '{job_id}' matches no tool result; it is sent as the result of an unknown tool."
            ),
        });
        format!("[Job result for unknown tool (job: {job_id})]\n")
    };
    if job.status == Some(JobStatus::Error) {
        text.push_str("Error: ");
    }
    text.push_str(&job.content);
    Some(Part::Text { text })
}

fn assistant_parts(message: &Message) -> Vec<Part> {
    let has_tool_use = message.tool_uses().next().is_some();
    let mut parts = Vec::new();
    let mut text = String::new();
    for segment in &message.segments {
        match segment {
            Segment::Text(_) | Segment::Expression(_) | Segment::Code(_) => {
                push_inline(&mut text, segment);
                continue;
            }
            _ => flush_text(&mut parts, &mut text),
        }
        match segment {
            Segment::Thinking(thinking) => {
                if thinking.content.trim().is_empty()
                    && thinking.signature.is_none()
                    && !thinking.redacted
                {
                    continue;
                }
                parts.push(Part::Thinking {
                    content: thinking.content.clone(),
                    signature: thinking.signature.as_ref().map(|s| ThinkingSignature {
                        provider: s.provider.clone(),
                        value: s.value.clone(),
                    }),
                    redacted: thinking.redacted,
                });
            }
            Segment::ToolUse(tool_use) => parts.push(Part::ToolUse {
                id: tool_use.id.as_str().to_owned(),
                name: tool_use.name.as_str().to_owned(),
                input: tool_use.input().clone(),
            }),
            // With a tool use the marker is dropped; the whitespace-only text around it is
            // skipped like any other whitespace-only text.
            Segment::Aborted(aborted) if !has_tool_use => parts.push(Part::Text {
                text: format!("<!-- {} -->", aborted.message),
            }),
            _ => {}
        }
    }
    flush_text(&mut parts, &mut text);
    parts
}

/// Synthetic error results for every tool call without a final result, with their warnings.
fn unresolved_results(doc: &Document, diagnostics: &mut Vec<PromptDiagnostic>) -> Vec<Part> {
    let resolved: HashSet<&str> = doc
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .filter(|r| r.is_final())
        .map(|r| r.tool_use_id.as_str())
        .collect();
    let mut seen = HashSet::new();
    let mut parts = Vec::new();
    for tool_use in doc.messages.iter().flat_map(Message::tool_uses) {
        let id = tool_use.id.as_str();
        if resolved.contains(id) || !seen.insert(id) {
            continue;
        }
        let name = tool_use.name.as_str();
        diagnostics.push(PromptDiagnostic {
            line: tool_use.span.start_line,
            message: format!(
                "Tool call '{name}' ({id}) has no matching tool result. A synthetic '{NO_RESULT_PROVIDED}' error response will be sent to the API."
            ),
        });
        parts.push(Part::ToolResult {
            tool_use_id: id.to_owned(),
            name: Some(name.to_owned()),
            content: NO_RESULT_PROVIDED.to_owned(),
            is_error: true,
        });
    }
    parts
}
