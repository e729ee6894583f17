//! The Vertex AI / Gemini `generateContent` request body.

use std::borrow::Cow;

use flemma_schema::Dialect;

use super::anthropic::foreign_thinking_text;
use crate::body::{Json, RequestBody, obj};
use crate::prompt::{NO_RESULT_PROVIDED, Part, Prompt, PromptRole};
use crate::request::{ForeignThinking, RequestOptions};
use crate::template::FilePart;
use crate::text::Joined;
use flemma_ids::encode_tool_name;

/// This format's tool declarations, built once per spec.
static DECLARED: super::Declared = super::Declared::new(Dialect::Gemini, super::as_declared);

/// Builds the Vertex / Gemini `generateContent` body of a prompt.
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
/// [`RequestBody::to_json`] writes it with the trailing keys `["tools", "contents"]`.
///
/// ```
/// use flemma_providers::{RequestOptions, build_prompt, vertex_request};
///
/// let doc = flemma_ast::parse("@You:\nHi!\n");
/// let prompt = build_prompt(&doc);
/// let body = vertex_request(&prompt, &RequestOptions::new("gemini-2.5-pro"));
/// assert_eq!(
///     body.to_json(),
///     r#"{"contents":[{"parts":[{"text":"Hi!"}],"role":"user"}]}"#
/// );
/// ```
pub fn vertex_request<'a>(prompt: &'a Prompt<'_>, options: &RequestOptions) -> RequestBody<'a> {
    let mut body = obj! {};
    if let Some(system) = &prompt.system {
        body.insert(
            "systemInstruction",
            obj! {"parts": vec![obj! {"text": system}]},
        );
    }
    let mut config = obj! {};
    if let Some(max_tokens) = options.max_tokens {
        config.insert("maxOutputTokens", Json::from(max_tokens));
    }
    if let Some(temperature) = options.temperature {
        config.insert("temperature", Json::from(temperature));
    }
    if let Some(budget) = options.thinking.budget() {
        config.insert(
            "thinkingConfig",
            obj! {"thinkingBudget": budget, "includeThoughts": true},
        );
    }
    if config != obj! {} {
        body.insert("generationConfig", config);
    }
    let declarations: Vec<Json<'a>> = DECLARED.of(options).into_iter().map(Json::Shared).collect();
    if !declarations.is_empty() {
        body.insert(
            "tools",
            Json::Array(vec![obj! {"functionDeclarations": declarations}]),
        );
        body.insert(
            "toolConfig",
            obj! {"functionCallingConfig": obj! {"mode": "AUTO"}},
        );
    }

    let contents: Vec<Json<'a>> = super::merged(&prompt.messages, |role| role == PromptRole::User)
        .into_iter()
        .filter_map(|(role, parts)| {
            let (role, parts) = match role {
                PromptRole::User => ("user", user_parts(&parts)),
                PromptRole::Assistant => ("model", model_parts(&parts, options.foreign_thinking)),
            };
            (!parts.is_empty()).then(|| obj! {"role": role, "parts": parts})
        })
        .collect();
    body.insert("contents", Json::Array(contents));
    RequestBody::new(body, &["tools", "contents"])
}

/// Function responses first (each followed by its result's images and PDFs as `inlineData`),
/// then text parts and files.
fn user_parts<'a>(parts: &[&'a Part<'_>]) -> Vec<Json<'a>> {
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
                    .unwrap_or(Cow::Borrowed("unknown"));
                let mut text = Joined::default();
                for part in parts {
                    match part {
                        Part::Text { text: t } => text.push(t.as_ref()),
                        Part::File(FilePart::TextFile { text: t, .. }) => text.push(t),
                        _ => {}
                    }
                }
                let text = text.take();
                let response = if !*is_error {
                    obj! {"output": text}
                } else if text == NO_RESULT_PROVIDED {
                    obj! {"error": text, "success": false}
                } else {
                    obj! {"error": text}
                };
                responses
                    .push(obj! {"functionResponse": obj! {"name": name, "response": response}});
                responses.extend(parts.iter().filter_map(|p| match p {
                    Part::File(file) => inline_data(file),
                    _ => None,
                }));
            }
            Part::Text { text } => {
                let text = text.trim();
                if !text.is_empty() {
                    rest.push(obj! {"text": text});
                }
            }
            Part::File(FilePart::TextFile { text, .. }) => {
                let text = text.trim();
                if !text.is_empty() {
                    rest.push(obj! {"text": text});
                }
            }
            Part::File(file) => rest
                .push(inline_data(file).unwrap_or_else(|| obj! {"text": file.as_text_fallback()})),
            Part::Thinking { .. } | Part::ToolUse { .. } => {}
        }
    }
    responses.extend(rest);
    responses
}

/// `{inlineData: {mimeType, data}}` for an image or a PDF.
fn inline_data(file: &FilePart) -> Option<Json<'_>> {
    let data = file.data()?;
    Some(obj! {"inlineData": obj! {"mimeType": file.mime_type(), "data": data}})
}

/// One text part (when there is text), then the function calls; the `vertex` signature goes
/// on the first call, else on the text part. Foreign thinking (another provider's, or
/// unsigned) leads the text part as `<thinking>` text.
fn model_parts<'a>(parts: &[&'a Part<'_>], foreign_mode: ForeignThinking) -> Vec<Json<'a>> {
    let mut text = Joined::default();
    let mut signature = None;
    let mut foreign = Vec::new();
    let mut calls = Vec::new();
    for part in parts {
        match part {
            Part::Text { text: t } => text.push(t.as_ref()),
            Part::Thinking {
                signature: Some(s), ..
            } if s.provider == "vertex" => {
                if !s.value.is_empty() {
                    signature = Some(s.value.as_ref());
                }
            }
            Part::Thinking {
                content, redacted, ..
            } => {
                if !*redacted && !content.trim().is_empty() {
                    foreign.push(content.trim());
                }
            }
            Part::ToolUse { name, input, .. } => calls.push(obj! {
                "functionCall": obj! {"name": encode_tool_name(name), "args": Json::Map(input)},
            }),
            Part::ToolResult { .. } | Part::File(_) => {}
        }
    }
    let mut text = text.take_trimmed();
    if let Some(thinking) = foreign_thinking_text(&foreign, foreign_mode) {
        text = Some(match text {
            None => Cow::Owned(thinking),
            Some(t) => Cow::Owned(format!("{thinking}\n\n{t}")),
        });
    }
    let mut out = Vec::new();
    if text.is_some() || (calls.is_empty() && signature.is_some()) {
        out.push(obj! {"text": text.unwrap_or_default()});
    }
    let carrier = if calls.is_empty() { 0 } else { out.len() };
    out.extend(calls);
    if let (Some(signature), Some(part)) = (signature, out.get_mut(carrier)) {
        part.insert("thoughtSignature", Json::from(signature));
    }
    out
}
