//! The OpenAI-compatible Chat Completions request body (spec §13.4).

use flemma_schema::Dialect;
use serde_json::{Map, Value, json};

use crate::prompt::{Part, Prompt, PromptRole};
use crate::request::RequestOptions;
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

/// Tool messages first, then the user text (when there is any).
fn push_user(messages: &mut Vec<Value>, parts: &[Part]) {
    let mut text = String::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                name,
                content,
                is_error,
            } => {
                let name = name
                    .as_deref()
                    .map_or_else(|| tool_use_id.clone(), encode_tool_name);
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": tool_use_id,
                    "name": name,
                    "content": result_content(content, *is_error),
                }));
            }
            Part::Text { text: t } => text.push_str(t),
            Part::Thinking { .. } | Part::ToolUse { .. } => {}
        }
    }
    let text = text.trim();
    if !text.is_empty() {
        messages.push(json!({"role": "user", "content": text}));
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
            Part::ToolResult { .. } => {}
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
