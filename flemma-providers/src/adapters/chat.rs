//! The OpenAI-compatible Chat Completions request body.

use std::borrow::Cow;

use flemma_schema::Dialect;

use crate::body::{Json, RequestBody, obj};
use crate::prompt::{Part, Prompt, PromptRole};
use crate::request::RequestOptions;
use crate::template::FilePart;
use crate::text::Joined;
use flemma_ids::encode_tool_name;

/// This format's tool declarations, built once per spec.
static DECLARED: super::Declared = super::Declared::new(Dialect::OpenAiChat, super::as_declared);

/// Builds the streaming Chat Completions body of a prompt.
///
/// * `model`, `stream: true`, `stream_options: {include_usage: true}`, then `max_tokens` and
///   `temperature` when set.
/// * `tools` (`{type:"function", function:{name, description, parameters}}`, no `strict`) and
///   `tool_choice: "auto"`, both omitted without tools. A tool whose declaration cannot be
///   built is left out.
/// * `messages`: the system prompt first; consecutive user messages are merged (the prompt may
///   end with an extra user message of synthetic results). A user message sends its tool
///   results first, each as a `{role:"tool", tool_call_id, name, content}` message (ids
///   verbatim, names wire-encoded, errors prefixed with `Error: `), then its text as one
///   `{role:"user", content}` message. An assistant message becomes
///   `{role:"assistant", content?, tool_calls?, reasoning_content?}`.
///
/// [`RequestBody::to_json`] writes it with the trailing keys `["tools", "messages"]`.
///
/// ```
/// use flemma_providers::{RequestOptions, build_prompt, chat_completions_request};
///
/// let doc = flemma_ast::parse("@System:\nBe brief.\n\n@You:\nHi!\n");
/// let prompt = build_prompt(&doc);
/// let body = chat_completions_request(&prompt, &RequestOptions::new("kimi-k2.5"));
/// assert_eq!(
///     body.to_json(),
///     r#"{"model":"kimi-k2.5","stream":true,"stream_options":{"include_usage":true},"messages":[{"content":"Be brief.","role":"system"},{"content":"Hi!","role":"user"}]}"#
/// );
/// ```
pub fn chat_completions_request<'a>(
    prompt: &'a Prompt<'_>,
    options: &RequestOptions,
) -> RequestBody<'a> {
    let mut body = obj! {
        "model": options.model.clone(),
        "stream": true,
        "stream_options": obj! {"include_usage": true},
    };
    if let Some(max_tokens) = options.max_tokens {
        body.insert("max_tokens", Json::from(max_tokens));
    }
    if let Some(temperature) = options.temperature {
        body.insert("temperature", Json::from(temperature));
    }
    super::insert_tools(&mut body, options, &DECLARED);

    let mut messages = Vec::new();
    if let Some(system) = &prompt.system {
        messages.push(obj! {"role": "system", "content": system});
    }
    for (role, parts) in super::merged(&prompt.messages, |role| role == PromptRole::User) {
        match role {
            PromptRole::User => push_user(&mut messages, &parts),
            PromptRole::Assistant => messages.push(assistant_message(&parts)),
        }
    }
    body.insert("messages", Json::Array(messages));
    RequestBody::new(body, &["tools", "messages"])
}

/// Tool messages first, then the user text (when there is any). Tool messages carry text
/// only: files in a result are named `[binary file: <name> (<mime>)]`. A user message with
/// files sends its content as parts (`text`, `image_url`, `file`).
fn push_user<'a>(messages: &mut Vec<Json<'a>>, parts: &[&'a Part<'_>]) {
    let mut text = Joined::default();
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                name,
                parts,
                is_error,
            } => {
                let name = super::result_name(name.as_deref(), tool_use_id)
                    .unwrap_or(Cow::Borrowed(tool_use_id));
                let text = super::text_with_file_names(parts);
                messages.push(obj! {
                    "role": "tool",
                    "tool_call_id": tool_use_id,
                    "name": name,
                    "content": result_content(text, *is_error),
                });
            }
            Part::Text { text: t } => text.push(t.as_ref()),
            Part::File(FilePart::TextFile { text: t, .. }) => text.push(t),
            Part::File(file) => {
                if let Some(t) = text.take_trimmed() {
                    content.push(obj! {"type": "text", "text": t});
                }
                content.push(file_content(file));
            }
            Part::Thinking { .. } | Part::ToolUse { .. } => {}
        }
    }
    let text = text.take_trimmed();
    if content.is_empty() {
        if let Some(text) = text {
            messages.push(obj! {"role": "user", "content": text});
        }
    } else {
        if let Some(t) = text {
            content.push(obj! {"type": "text", "text": t});
        }
        messages.push(obj! {"role": "user", "content": content});
    }
}

/// A file as a content part: `image_url` for an image, `file` for a PDF, the file's name as
/// text otherwise.
fn file_content(file: &FilePart) -> Json<'_> {
    let data_url = || file.data_url().unwrap_or_default();
    match file {
        FilePart::Image { .. } => obj! {"type": "image_url", "image_url": obj! {"url": data_url()}},
        FilePart::Pdf { .. } => obj! {
            "type": "file",
            "file": obj! {"filename": file.basename(), "file_data": data_url()},
        },
        _ => obj! {"type": "text", "text": file.as_text_fallback()},
    }
}

/// The content of a tool message: `Error: ` before an error, and a stock text for an empty one.
fn result_content(content: Cow<'_, str>, is_error: bool) -> Json<'_> {
    if !is_error {
        Json::from(content)
    } else if content.is_empty() {
        Json::from("Error: Tool execution failed")
    } else {
        Json::from(format!("Error: {content}"))
    }
}

fn assistant_message<'a>(parts: &[&'a Part<'_>]) -> Json<'a> {
    let mut text = Joined::default();
    let mut reasoning: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    for part in parts {
        match part {
            Part::Text { text: t } => text.push(t.as_ref()),
            Part::Thinking {
                content, redacted, ..
            } => {
                let content = content.trim();
                if !*redacted && !content.is_empty() {
                    reasoning.push(content);
                }
            }
            Part::ToolUse { id, name, input } => tool_calls.push(obj! {
                "id": id,
                "type": "function",
                "function": obj! {
                    "name": encode_tool_name(name),
                    "arguments": serde_json::to_string(&**input).unwrap_or_default(),
                },
            }),
            Part::ToolResult { .. } | Part::File(_) => {}
        }
    }
    let mut message = obj! {"role": "assistant"};
    if let Some(text) = text.take_trimmed() {
        message.insert("content", Json::from(text));
    }
    if !tool_calls.is_empty() {
        message.insert("tool_calls", Json::Array(tool_calls));
    }
    if !reasoning.is_empty() {
        message.insert("reasoning_content", Json::from(reasoning.join("\n\n")));
    }
    message
}
