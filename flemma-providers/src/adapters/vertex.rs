//! The Vertex AI / Gemini `generateContent` request body (spec §13.5).

use flemma_schema::Dialect;
use serde_json::{Map, Value, json};

use super::anthropic::foreign_thinking_text;
use crate::prompt::{NO_RESULT_PROVIDED, Part, Prompt, PromptRole};
use crate::request::{ForeignThinking, RequestOptions};
use crate::template::FilePart;
use crate::wire::encode_tool_name;

/// Builds the Vertex / Gemini `generateContent` body of a prompt (spec §13.5).
///
/// * `contents`: consecutive user messages are merged (the prompt may end with an extra user
///   message of synthetic results). A `user` content sends its tool results first as
///   `{functionResponse:{name, response:{output}}}` (`{error}` for an error result, plus
///   `success: false` for a synthetic `No result provided` one), then its text parts. A
///   `model` content sends its text as one text part, then a `functionCall {name, args}` part
///   per call; a `vertex` thought signature goes on the first call, or on the text part (made
///   empty when needed) without calls.
/// * `systemInstruction: {parts:[{text}]}` with a system prompt.
/// * `generationConfig: {maxOutputTokens?, temperature?, thinkingConfig?}`, left out when
///   empty; thinking sends `{thinkingBudget, includeThoughts: true}`.
/// * `tools: [{functionDeclarations}]` (`{name, description, parametersJsonSchema}`, no
///   `strict`) and `toolConfig: {functionCallingConfig: {mode: "AUTO"}}`, left out without
///   tools. A tool whose declaration cannot be built (unresolvable `$ref`) is left out.
///
/// Serialize it with [`body_to_string`](crate::body_to_string) and the trailing keys
/// `["tools", "contents"]`.
///
/// ```
/// use flemma_providers::{RequestOptions, body_to_string, build_prompt, vertex_request};
///
/// let prompt = build_prompt(&flemma_ast::parse("@You:\nHi!\n"));
/// let body = vertex_request(&prompt, &RequestOptions::new("gemini-2.5-pro"));
/// assert_eq!(
///     body_to_string(&body, &["tools", "contents"]),
///     r#"{"contents":[{"parts":[{"text":"Hi!"}],"role":"user"}]}"#
/// );
/// ```
pub fn vertex_request(prompt: &Prompt, options: &RequestOptions) -> Value {
    let mut body = Map::new();
    if let Some(system) = &prompt.system {
        body.insert(
            "systemInstruction".to_owned(),
            json!({"parts": [{"text": system}]}),
        );
    }
    let mut config = Map::new();
    if let Some(max_tokens) = options.max_tokens {
        config.insert("maxOutputTokens".to_owned(), json!(max_tokens));
    }
    if let Some(temperature) = options.temperature {
        config.insert("temperature".to_owned(), json!(temperature));
    }
    if let Some(budget) = options.thinking.budget() {
        config.insert(
            "thinkingConfig".to_owned(),
            json!({"thinkingBudget": budget, "includeThoughts": true}),
        );
    }
    if !config.is_empty() {
        body.insert("generationConfig".to_owned(), Value::Object(config));
    }
    let declarations: Vec<Value> = options
        .tools
        .iter()
        .filter_map(|spec| spec.to_provider(Dialect::Gemini).ok())
        .collect();
    if !declarations.is_empty() {
        body.insert(
            "tools".to_owned(),
            json!([{"functionDeclarations": declarations}]),
        );
        body.insert(
            "toolConfig".to_owned(),
            json!({"functionCallingConfig": {"mode": "AUTO"}}),
        );
    }

    let contents: Vec<Value> = super::merge_user_messages(&prompt.messages)
        .iter()
        .filter_map(|message| {
            let (role, parts) = match message.role {
                PromptRole::User => ("user", user_parts(&message.parts)),
                PromptRole::Assistant => (
                    "model",
                    model_parts(&message.parts, options.foreign_thinking),
                ),
            };
            (!parts.is_empty()).then(|| json!({"role": role, "parts": parts}))
        })
        .collect();
    body.insert("contents".to_owned(), Value::Array(contents));
    Value::Object(body)
}

/// Function responses first (each followed by its result's images and PDFs as `inlineData`),
/// then text parts and files.
fn user_parts(parts: &[Part]) -> Vec<Value> {
    let mut responses = Vec::new();
    let mut rest = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                name,
                parts,
                is_error,
            } => {
                let name = super::result_name(name.as_deref(), tool_use_id)
                    .unwrap_or_else(|| "unknown".to_owned());
                let text: String = parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text { text } | Part::File(FilePart::TextFile { text, .. }) => {
                            Some(text.as_str())
                        }
                        _ => None,
                    })
                    .collect();
                let response = if !*is_error {
                    json!({"output": text})
                } else if text == NO_RESULT_PROVIDED {
                    json!({"error": text, "success": false})
                } else {
                    json!({"error": text})
                };
                responses.push(json!({"functionResponse": {"name": name, "response": response}}));
                responses.extend(parts.iter().filter_map(|p| match p {
                    Part::File(file) => inline_data(file),
                    _ => None,
                }));
            }
            Part::Text { text } | Part::File(FilePart::TextFile { text, .. }) => {
                let text = text.trim();
                if !text.is_empty() {
                    rest.push(json!({"text": text}));
                }
            }
            Part::File(file) => rest.push(
                inline_data(file).unwrap_or_else(|| json!({"text": file.as_text_fallback()})),
            ),
            Part::Thinking { .. } | Part::ToolUse { .. } => {}
        }
    }
    responses.extend(rest);
    responses
}

/// `{inlineData: {mimeType, data}}` for an image or a PDF.
fn inline_data(file: &FilePart) -> Option<Value> {
    let data = file.data()?;
    Some(json!({"inlineData": {"mimeType": file.mime_type(), "data": data}}))
}

/// One text part (when there is text), then the function calls; the `vertex` signature goes
/// on the first call, else on the text part. Foreign thinking (another provider's, or
/// unsigned) leads the text part as `<thinking>` text.
fn model_parts(parts: &[Part], foreign_mode: ForeignThinking) -> Vec<Value> {
    let mut text = String::new();
    let mut signature = None;
    let mut foreign = Vec::new();
    let mut calls = Vec::new();
    for part in parts {
        match part {
            Part::Text { text: t } => text.push_str(t),
            Part::Thinking {
                signature: Some(s), ..
            } if s.provider == "vertex" => {
                if !s.value.is_empty() {
                    signature = Some(s.value.as_str());
                }
            }
            Part::Thinking {
                content, redacted, ..
            } => {
                if !*redacted && !content.trim().is_empty() {
                    foreign.push(content.trim());
                }
            }
            Part::ToolUse { name, input, .. } => calls.push(json!({
                "functionCall": {"name": encode_tool_name(name), "args": input},
            })),
            Part::ToolResult { .. } | Part::File(_) => {}
        }
    }
    if let Some(thinking) = foreign_thinking_text(&foreign, foreign_mode) {
        text = if text.trim().is_empty() {
            thinking
        } else {
            format!("{thinking}\n\n{}", text.trim())
        };
    }
    let text = text.trim();
    let mut out = Vec::new();
    if !text.is_empty() || (calls.is_empty() && signature.is_some()) {
        out.push(json!({"text": text}));
    }
    let carrier = if calls.is_empty() { 0 } else { out.len() };
    out.extend(calls);
    if let (Some(signature), Some(Value::Object(part))) = (signature, out.get_mut(carrier)) {
        part.insert("thoughtSignature".to_owned(), json!(signature));
    }
    out
}
