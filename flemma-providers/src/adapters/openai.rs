//! The OpenAI Responses request body (spec §13.1, §13.3).

use flemma_schema::Dialect;
use serde_json::{Map, Value, json};

use super::anthropic::foreign_thinking_text;
use crate::prompt::{Part, Prompt, PromptRole};
use crate::request::{RequestOptions, Thinking, ThinkingLevel};
use crate::wire::{encode_tool_name, normalize_tool_id};

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

/// Tool results as `function_call_output` items, then the text as one user item.
fn user_items(parts: &[Part], input: &mut Vec<Value>) {
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                content: result,
                is_error,
                ..
            } => {
                let output = match (*is_error, result.is_empty()) {
                    (false, _) => result.clone(),
                    (true, true) => "Error: Tool execution failed".to_owned(),
                    (true, false) => format!("Error: {result}"),
                };
                input.push(json!({
                    "type": "function_call_output",
                    "call_id": normalize_tool_id(tool_use_id),
                    "output": output,
                }));
            }
            Part::Text { text } if !text.trim().is_empty() => {
                content.push(json!({"type": "input_text", "text": text}));
            }
            _ => {}
        }
    }
    if !content.is_empty() {
        input.push(json!({"role": "user", "content": content}));
    }
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
                    let item = base64_decode(&sig.value)
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

/// Decodes standard base64 (RFC 4648 alphabet, padding optional); `None` when malformed.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim().trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for byte in text.bytes() {
        let value = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decode_round_trips() {
        for (text, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_decode(encoded).as_deref(), Some(text.as_bytes()));
        }
        assert_eq!(base64_decode("Zm9v!"), None);
    }
}
