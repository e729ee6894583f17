//! The OpenAI Responses request body (spec §13.1, §13.3).

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use flemma_schema::Dialect;
use serde_json::{Map, Value, json};

use super::anthropic::foreign_thinking_text;
use crate::prompt::{Part, Prompt, PromptRole};
use crate::request::{RequestOptions, Thinking, ThinkingLevel};
use crate::template::FilePart;
use crate::wire::{encode_tool_name, normalize_tool_id};

/// Standard base64 that reads signatures with or without their `=` padding.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The OpenAI Responses request body of `prompt` (spec §13.3), streaming and not stored.
///
/// Serialize it with [`body_to_string`](crate::body_to_string) and the trailing keys
/// `["tools", "input"]` for the exact bytes. The system prompt is a `developer` item; a user
/// message's tool results are `function_call_output` items before its text; an assistant
/// message becomes its OpenAI reasoning items, then `message` items flushed before each
/// `function_call`.
///
/// ```
/// use flemma_providers::{RequestOptions, body_to_string, build_prompt, openai_responses_request};
///
/// let prompt = build_prompt(&flemma_ast::parse("@You:\nHi!\n"));
/// let body = openai_responses_request(&prompt, &RequestOptions::new("gpt-5"));
/// assert_eq!(
///     body_to_string(&body, &["tools", "input"]),
///     r#"{"model":"gpt-5","store":false,"stream":true,"input":[{"content":[{"text":"Hi!","type":"input_text"}],"role":"user"}]}"#
/// );
/// ```
pub fn openai_responses_request(prompt: &Prompt, options: &RequestOptions) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(options.model));
    body.insert("stream".into(), Value::Bool(true));
    body.insert("store".into(), Value::Bool(false));
    if let Some(max) = options.max_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    let effort = match options.thinking {
        Thinking::Off => None,
        Thinking::Budget(_) => Some("medium"),
        Thinking::Level(ThinkingLevel::Max) => Some("high"),
        Thinking::Level(level) => Some(level.as_str()),
    };
    if let Some(effort) = effort {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    } else if let Some(temperature) = options.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    let tools: Vec<Value> = options
        .tools
        .iter()
        .filter_map(|spec| spec.to_provider(Dialect::OpenAiResponses).ok())
        .collect();
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    let mut input = Vec::new();
    if let Some(system) = &prompt.system {
        input.push(json!({"role": "developer", "content": system}));
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
    body.insert("input".into(), Value::Array(input));
    Value::Object(body)
}

/// Tool results as `function_call_output` items, then the text and files as one user item.
fn user_items(parts: &[Part], input: &mut Vec<Value>) {
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
                    Value::String(match (*is_error, text.is_empty()) {
                        (false, _) => text,
                        (true, true) => "Error: Tool execution failed".to_owned(),
                        (true, false) => format!("Error: {text}"),
                    })
                } else {
                    let lead = is_error.then(|| json!({"type": "input_text", "text": "Error:"}));
                    let rest = parts.iter().filter_map(input_part);
                    Value::Array(lead.into_iter().chain(rest).collect())
                };
                input.push(json!({
                    "type": "function_call_output",
                    "call_id": normalize_tool_id(tool_use_id),
                    "output": output,
                }));
            }
            Part::Text { .. } | Part::File(_) => content.extend(input_part(part)),
            _ => {}
        }
    }
    if !content.is_empty() {
        input.push(json!({"role": "user", "content": content}));
    }
}

/// A text (unless blank) or file part as input content: `input_text`, `input_image`,
/// `input_file`.
fn input_part(part: &Part) -> Option<Value> {
    Some(match part {
        Part::Text { text } if !text.trim().is_empty() => {
            json!({"type": "input_text", "text": text})
        }
        Part::File(file @ FilePart::Image { .. }) => json!({
            "type": "input_image",
            "image_url": file.data_url(),
            "detail": "auto",
        }),
        Part::File(file @ FilePart::Pdf { .. }) => json!({
            "type": "input_file",
            "filename": file.basename(),
            "file_data": file.data_url(),
        }),
        Part::File(FilePart::TextFile { text, .. }) => json!({"type": "input_text", "text": text}),
        Part::File(file @ FilePart::Unsupported { .. }) => {
            json!({"type": "input_text", "text": super::unsupported_text(file)})
        }
        _ => return None,
    })
}

/// Reasoning items first, then text flushed as `message` items before each function call.
fn assistant_items(
    parts: &[Part],
    number: usize,
    options: &RequestOptions,
    input: &mut Vec<Value>,
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
                        input.push(item);
                    }
                }
                None if !*redacted && !content.trim().is_empty() => foreign.push(content.trim()),
                None => {}
            }
        }
    }
    let mut text = foreign_thinking_text(&foreign, options.foreign_thinking).unwrap_or_default();
    let mut item_number = 0;
    let mut flush = |text: &mut String, input: &mut Vec<Value>| {
        if text.trim().is_empty() {
            text.clear();
            return;
        }
        item_number += 1;
        input.push(json!({
            "type": "message",
            "role": "assistant",
            "id": format!("msg_{number}_{item_number}"),
            "content": [{"type": "output_text", "text": std::mem::take(text), "annotations": []}],
            "status": "completed",
        }));
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
                input.push(json!({
                    "type": "function_call",
                    "call_id": normalize_tool_id(id),
                    "name": encode_tool_name(name),
                    "arguments": Value::Object(args.clone()).to_string(),
                    "status": "completed",
                }));
            }
            _ => {}
        }
    }
    flush(&mut text, input);
}
