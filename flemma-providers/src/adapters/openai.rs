//! The OpenAI Responses request body.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use flemma_schema::Dialect;
use serde_json::Value;

use super::anthropic::foreign_thinking_text;
use crate::body::{Json, RequestBody, obj};
use crate::prompt::{Part, Prompt, PromptRole};
use crate::request::{CacheRetention, RequestOptions, Thinking, ThinkingLevel};
use crate::template::FilePart;
use crate::wire::normalize_tool_id;
use flemma_ids::encode_tool_name;

/// This format's tool declarations, built once per spec.
static DECLARED: super::Declared =
    super::Declared::new(Dialect::OpenAiResponses, super::as_declared);

/// Standard base64 that reads signatures with or without their `=` padding.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The OpenAI Responses request body of `prompt`, streaming and not stored.
///
/// [`RequestBody::to_json`] writes it with the trailing keys `["tools", "input"]`. The
/// system prompt is a `developer` item; a user message's tool results are
/// `function_call_output` items before its text; an assistant message becomes its OpenAI
/// reasoning items, then `message` items flushed before each `function_call`.
///
/// ```
/// use flemma_providers::{RequestOptions, build_prompt, openai_responses_request};
///
/// let doc = flemma_ast::parse("@You:\nHi!\n");
/// let prompt = build_prompt(&doc);
/// let body = openai_responses_request(&prompt, &RequestOptions::new("gpt-5"));
/// assert_eq!(
///     body.to_json(),
///     r#"{"model":"gpt-5","store":false,"stream":true,"input":[{"content":[{"text":"Hi!","type":"input_text"}],"role":"user"}]}"#
/// );
/// ```
pub fn openai_responses_request<'a>(
    prompt: &'a Prompt<'_>,
    options: &RequestOptions,
) -> RequestBody<'a> {
    let mut body = obj! {
        "model": options.model.clone(),
        "stream": true,
        "store": false,
    };
    if let Some(max) = options.max_tokens {
        body.insert("max_output_tokens", Json::from(max));
    }
    let effort = match options.thinking {
        Thinking::Off => None,
        Thinking::Budget(_) => Some("medium"),
        Thinking::Level(ThinkingLevel::Max) => Some("high"),
        Thinking::Level(level) => Some(level.as_str()),
    };
    if let Some(effort) = effort {
        body.insert("reasoning", obj! {"effort": effort, "summary": "auto"});
        body.insert(
            "include",
            Json::Array(vec![Json::from("reasoning.encrypted_content")]),
        );
    } else if let Some(temperature) = options.temperature {
        body.insert("temperature", Json::from(temperature));
    }
    if let Some(key) = options
        .cache_key
        .as_ref()
        .filter(|_| options.cache_retention != CacheRetention::None)
    {
        // One key per conversation: its requests reach the machines that cached its prefix.
        body.insert("prompt_cache_key", Json::from(key.clone()));
    }
    super::insert_tools(&mut body, options, &DECLARED);
    let mut input = Vec::new();
    if let Some(system) = &prompt.system {
        input.push(obj! {"role": "developer", "content": system});
    }
    let mut assistant_number = 0;
    for message in &prompt.messages {
        match message.role {
            PromptRole::User => user_items(&message.parts, &mut input),
            PromptRole::Assistant => {
                assistant_number += 1;
                assistant_items(&message.parts, assistant_number, options, &mut input);
            }
        }
    }
    body.insert("input", Json::Array(input));
    RequestBody::new(body, &["tools", "input"])
}

/// Tool results as `function_call_output` items, then the text and files as one user item.
fn user_items<'a>(parts: &'a [Part<'_>], input: &mut Vec<Json<'a>>) {
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                parts,
                is_error,
                ..
            } => {
                let output = if let Some(text) = Part::textual(parts) {
                    match (*is_error, text.is_empty()) {
                        (false, _) => Json::from(text),
                        (true, true) => Json::from("Error: Tool execution failed"),
                        (true, false) => Json::from(format!("Error: {text}")),
                    }
                } else {
                    let lead = is_error.then(|| obj! {"type": "input_text", "text": "Error:"});
                    let rest = parts.iter().filter_map(input_part);
                    Json::Array(lead.into_iter().chain(rest).collect())
                };
                input.push(obj! {
                    "type": "function_call_output",
                    "call_id": normalize_tool_id(tool_use_id),
                    "output": output,
                });
            }
            Part::Text { .. } | Part::File(_) => content.extend(input_part(part)),
            _ => {}
        }
    }
    if !content.is_empty() {
        input.push(obj! {"role": "user", "content": content});
    }
}

/// A text (unless blank) or file part as input content: `input_text`, `input_image`,
/// `input_file`.
fn input_part<'a>(part: &'a Part<'_>) -> Option<Json<'a>> {
    let data_url = |file: &FilePart| file.data_url().unwrap_or_default();
    Some(match part {
        Part::Text { text } if !text.trim().is_empty() => {
            obj! {"type": "input_text", "text": text}
        }
        Part::File(file @ FilePart::Image { .. }) => obj! {
            "type": "input_image",
            "image_url": data_url(file),
            "detail": "auto",
        },
        Part::File(file @ FilePart::Pdf { .. }) => obj! {
            "type": "input_file",
            "filename": file.basename(),
            "file_data": data_url(file),
        },
        Part::File(FilePart::TextFile { text, .. }) => {
            obj! {"type": "input_text", "text": text.as_str()}
        }
        Part::File(file @ FilePart::Unsupported { .. }) => {
            obj! {"type": "input_text", "text": super::unsupported_text(file)}
        }
        _ => return None,
    })
}

/// Reasoning items first, then text flushed as `message` items before each function call.
fn assistant_items<'a>(
    parts: &'a [Part<'_>],
    number: usize,
    options: &RequestOptions,
    input: &mut Vec<Json<'a>>,
) {
    let mut foreign = Vec::new();
    for part in parts {
        if let Part::Thinking {
            content,
            signature,
            redacted,
        } = part
        {
            match signature.as_ref().filter(|s| s.provider == "openai") {
                Some(sig) => {
                    let item = LENIENT_BASE64
                        .decode(sig.value.trim())
                        .ok()
                        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                        .filter(Value::is_object);
                    if let Some(item) = item {
                        input.push(Json::from(item));
                    }
                }
                None if !*redacted && !content.trim().is_empty() => foreign.push(content.trim()),
                None => {}
            }
        }
    }
    let mut text = foreign_thinking_text(&foreign, options.foreign_thinking).unwrap_or_default();
    let mut item_number = 0;
    let mut flush = |text: &mut String, input: &mut Vec<Json<'a>>| {
        if text.trim().is_empty() {
            text.clear();
            return;
        }
        item_number += 1;
        input.push(obj! {
            "type": "message",
            "role": "assistant",
            "id": format!("msg_{number}_{item_number}"),
            "content": vec![obj! {"type": "output_text", "text": std::mem::take(text), "annotations": Json::Array(Vec::new())}],
            "status": "completed",
        });
    };
    for part in parts {
        match part {
            Part::Text { text: t } if !t.trim().is_empty() => {
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(t.trim());
            }
            Part::ToolUse {
                id,
                name,
                input: args,
            } => {
                flush(&mut text, input);
                input.push(obj! {
                    "type": "function_call",
                    "call_id": normalize_tool_id(id),
                    "name": encode_tool_name(name),
                    "arguments": serde_json::to_string(&**args).unwrap_or_default(),
                    "status": "completed",
                });
            }
            _ => {}
        }
    }
    flush(&mut text, input);
}
