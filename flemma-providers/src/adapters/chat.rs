//! The OpenAI-compatible Chat Completions request body (spec §13.4).

use flemma_schema::Dialect;
use serde_json::{Map, Value, json};

use crate::prompt::{Part, Prompt, PromptRole};
use crate::request::RequestOptions;
use crate::template::FilePart;
use crate::wire::encode_tool_name;

/// Builds the streaming Chat Completions body of a prompt (spec §13.4).
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
/// Serialize it with [`body_to_string`](crate::body_to_string) and the trailing keys
/// `["tools", "messages"]`.
///
/// ```
/// use flemma_providers::{RequestOptions, body_to_string, build_prompt, chat_completions_request};
///
/// let prompt = build_prompt(&flemma_ast::parse("@System:\nBe brief.\n\n@You:\nHi!\n"));
/// let body = chat_completions_request(&prompt, &RequestOptions::new("kimi-k2.5"));
/// assert_eq!(
///     body_to_string(&body, &["tools", "messages"]),
///     r#"{"model":"kimi-k2.5","stream":true,"stream_options":{"include_usage":true},"messages":[{"content":"Be brief.","role":"system"},{"content":"Hi!","role":"user"}]}"#
/// );
/// ```
pub fn chat_completions_request(prompt: &Prompt, options: &RequestOptions) -> Value {
    let mut body = Map::new();
    body.insert("model".to_owned(), json!(options.model));
    body.insert("stream".to_owned(), json!(true));
    body.insert("stream_options".to_owned(), json!({"include_usage": true}));
    if let Some(max_tokens) = options.max_tokens {
        body.insert("max_tokens".to_owned(), json!(max_tokens));
    }
    if let Some(temperature) = options.temperature {
        body.insert("temperature".to_owned(), json!(temperature));
    }
    let tools: Vec<Value> = options
        .tools
        .iter()
        .filter_map(|spec| spec.to_provider(Dialect::OpenAiChat).ok())
        .collect();
    if !tools.is_empty() {
        body.insert("tools".to_owned(), Value::Array(tools));
        body.insert("tool_choice".to_owned(), json!("auto"));
    }

    let mut messages = Vec::new();
    if let Some(system) = &prompt.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in super::merge_user_messages(&prompt.messages) {
        match message.role {
            PromptRole::User => push_user(&mut messages, &message.parts),
            PromptRole::Assistant => messages.push(assistant_message(&message.parts)),
        }
    }
    body.insert("messages".to_owned(), Value::Array(messages));
    Value::Object(body)
}

/// Tool messages first, then the user text (when there is any). Tool messages carry text
/// only: files in a result are named `[binary file: <name> (<mime>)]`. A user message with
/// files sends its content as parts (`text`, `image_url`, `file`).
fn push_user(messages: &mut Vec<Value>, parts: &[Part]) {
    let mut text = String::new();
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
                    .unwrap_or_else(|| tool_use_id.clone());
                let text = super::text_with_file_names(parts);
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_use_id,
                    "name": name,
                    "content": result_content(&text, *is_error),
                }));
            }
            Part::Text { text: t } | Part::File(FilePart::TextFile { text: t, .. }) => {
                text.push_str(t);
            }
            Part::File(file) => {
                flush_text(&mut content, &mut text);
                content.push(file_content(file));
            }
            Part::Thinking { .. } | Part::ToolUse { .. } => {}
        }
    }
    if content.is_empty() {
        let text = text.trim();
        if !text.is_empty() {
            messages.push(json!({"role": "user", "content": text}));
        }
    } else {
        flush_text(&mut content, &mut text);
        messages.push(json!({"role": "user", "content": content}));
    }
}

/// Pushes a `text` content part unless `text` is blank; empties `text`.
fn flush_text(content: &mut Vec<Value>, text: &mut String) {
    let t = text.trim();
    if !t.is_empty() {
        content.push(json!({"type": "text", "text": t}));
    }
    text.clear();
}

/// A file as a content part: `image_url` for an image, `file` for a PDF, the file's name as
/// text otherwise.
fn file_content(file: &FilePart) -> Value {
    match file {
        FilePart::Image { .. } => {
            json!({"type": "image_url", "image_url": {"url": file.data_url()}})
        }
        FilePart::Pdf { .. } => json!({
            "type": "file",
            "file": {"filename": file.basename(), "file_data": file.data_url()},
        }),
        _ => json!({"type": "text", "text": file.as_text_fallback()}),
    }
}

/// The content of a tool message: `Error: ` before an error, and a stock text for an empty one.
fn result_content(content: &str, is_error: bool) -> String {
    if !is_error {
        content.to_owned()
    } else if content.is_empty() {
        "Error: Tool execution failed".to_owned()
    } else {
        format!("Error: {content}")
    }
}

fn assistant_message(parts: &[Part]) -> Value {
    let mut text = String::new();
    let mut reasoning: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    for part in parts {
        match part {
            Part::Text { text: t } => text.push_str(t),
            Part::Thinking {
                content, redacted, ..
            } => {
                let content = content.trim();
                if !*redacted && !content.is_empty() {
                    reasoning.push(content);
                }
            }
            Part::ToolUse { id, name, input } => tool_calls.push(json!({
                "id": id,
                "type": "function",
                "function": {
                    "name": encode_tool_name(name),
                    "arguments": Value::Object(input.clone()).to_string(),
                },
            })),
            Part::ToolResult { .. } | Part::File(_) => {}
        }
    }
    let mut message = Map::new();
    message.insert("role".to_owned(), json!("assistant"));
    let text = text.trim();
    if !text.is_empty() {
        message.insert("content".to_owned(), json!(text));
    }
    if !tool_calls.is_empty() {
        message.insert("tool_calls".to_owned(), Value::Array(tool_calls));
    }
    if !reasoning.is_empty() {
        message.insert(
            "reasoning_content".to_owned(),
            json!(reasoning.join("\n\n")),
        );
    }
    Value::Object(message)
}
