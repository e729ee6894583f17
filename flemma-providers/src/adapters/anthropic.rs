//! The Anthropic Messages request body.

use flemma_schema::Dialect;
use serde_json::{Value, json};

use crate::body::{Json, RequestBody, obj};
use crate::prompt::{Part, Prompt, PromptRole};
use crate::request::{CacheRetention, ForeignThinking, RequestOptions};
use crate::template::FilePart;
use crate::wire::normalize_tool_id;
use flemma_ids::encode_tool_name;

/// The output budget when the options set none.
const DEFAULT_MAX_TOKENS: u64 = 8192;
/// The room left for the answer above a thinking budget.
const ANSWER_ROOM: u64 = 4096;

/// The Anthropic Messages request body of `prompt`, streaming.
///
/// [`RequestBody::to_json`] writes it with the trailing keys `["system", "tools",
/// "messages"]`. Consecutive messages of one role are merged; in user messages tool results
/// come before text; in assistant messages native thinking comes first, then foreign
/// thinking as `<thinking>` text, then text, then tool uses.
///
/// Unless `cache_retention` is `none`, the prompt cache has three breakpoints
/// (`cache_control`, with `"ttl": "1h"` for `long`): the last tool, the system prompt (then a
/// text block) and the latest message's last block that may carry one (not thinking), which
/// moves as the conversation grows.
///
/// ```
/// use flemma_providers::{CacheRetention, RequestOptions, anthropic_request, build_prompt};
///
/// let doc = flemma_ast::parse("@You:\nHi!\n");
/// let prompt = build_prompt(&doc);
/// let mut options = RequestOptions::new("claude-sonnet-4-5");
/// options.cache_retention = CacheRetention::None;
/// let body = anthropic_request(&prompt, &options);
/// assert_eq!(
///     body.to_json(),
///     r#"{"max_tokens":8192,"model":"claude-sonnet-4-5","stream":true,"messages":[{"content":[{"text":"Hi!","type":"text"}],"role":"user"}]}"#
/// );
/// ```
pub fn anthropic_request<'a>(prompt: &'a Prompt<'_>, options: &RequestOptions) -> RequestBody<'a> {
    let mut body = obj! {
        "model": options.model.clone(),
        "stream": true,
    };
    let mut max_tokens = options.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if let Some(budget) = options.thinking.budget() {
        max_tokens = max_tokens.max(budget + ANSWER_ROOM);
        body.insert(
            "thinking",
            obj! {"type": "enabled", "budget_tokens": budget},
        );
    } else if let Some(temperature) = options.temperature {
        body.insert("temperature", Json::from(temperature));
    }
    body.insert("max_tokens", Json::from(max_tokens));
    let cache_control = cache_control(options.cache_retention);
    if let Some(system) = &prompt.system {
        // With caching, the system prompt is a block carrying a breakpoint of its own.
        match &cache_control {
            Some(marker) => body.insert(
                "system",
                Json::Array(vec![obj! {
                    "type": "text",
                    "text": system,
                    "cache_control": Json::from(marker.clone()),
                }]),
            ),
            None => body.insert("system", Json::from(system)),
        }
    }
    let tools = tools(options, cache_control.as_ref());
    if !tools.is_empty() {
        body.insert("tools", Json::Array(tools));
        body.insert("tool_choice", obj! {"type": "auto"});
    }
    let messages = super::merged(&prompt.messages, |_| true)
        .into_iter()
        .filter_map(|(role, parts)| {
            let (role, content) = match role {
                PromptRole::User => ("user", user_content(&parts)),
                PromptRole::Assistant => (
                    "assistant",
                    assistant_content(&parts, options.foreign_thinking),
                ),
            };
            (!content.is_empty()).then(|| obj! {"role": role, "content": content})
        })
        .collect();
    let mut messages: Vec<Json<'a>> = messages;
    if let Some(marker) = &cache_control {
        mark_latest(&mut messages, marker);
    }
    body.insert("messages", Json::Array(messages));
    RequestBody::new(body, &["system", "tools", "messages"])
}

/// The `cache_control` marker of a breakpoint, for the retention asked for: 5 minutes
/// (`short`, the default) or an hour (`long`); none without caching.
fn cache_control(retention: CacheRetention) -> Option<Value> {
    match retention {
        CacheRetention::None => None,
        CacheRetention::Short => Some(json!({"type": "ephemeral"})),
        CacheRetention::Long => Some(json!({"type": "ephemeral", "ttl": "1h"})),
    }
}

/// Puts the moving breakpoint on the latest message: its last block that may carry one
/// (thinking blocks may not), so that the next request reads everything up to here from the
/// cache.
fn mark_latest(messages: &mut [Json<'_>], marker: &Value) {
    let Some(Json::Object(entries)) = messages.last_mut() else {
        return;
    };
    let Some((_, Json::Array(content))) = entries.iter_mut().find(|(k, _)| *k == "content") else {
        return;
    };
    let markable = |block: &Json<'_>| {
        let Json::Object(fields) = block else {
            return false;
        };
        !fields.iter().any(|(k, v)| {
            *k == "type" && matches!(v, Json::Str(t) if t == "thinking" || t == "redacted_thinking")
        })
    };
    if let Some(block) = content.iter_mut().rev().find(|b| markable(b)) {
        block.insert("cache_control", Json::from(marker.clone()));
    }
}

/// The tool declarations, the last one carrying the cache marker.
fn tools(options: &RequestOptions, cache_control: Option<&Value>) -> Vec<Json<'static>> {
    /// Streams tool input as it is generated.
    fn eager(tool: &mut Value) {
        if let Value::Object(map) = tool {
            map.insert("eager_input_streaming".into(), Value::Bool(true));
        }
    }
    static DECLARED: super::Declared = super::Declared::new(Dialect::Anthropic, eager);
    let mut tools: Vec<Json<'static>> =
        DECLARED.of(options).into_iter().map(Json::Shared).collect();
    // The marker goes on a copy of the last declaration: the shared one stays without it.
    if let (Some(cache_control), Some(last)) = (cache_control, tools.last_mut())
        && let Json::Shared(declared) = last
    {
        let mut marked = declared.value.clone();
        if let Value::Object(map) = &mut marked {
            map.insert("cache_control".into(), cache_control.clone());
        }
        *last = Json::from(marked);
    }
    tools
}

/// Tool results first, then the non-blank text and the files.
fn user_content<'a>(parts: &[&'a Part<'_>]) -> Vec<Json<'a>> {
    let mut results = Vec::new();
    let mut rest = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                parts,
                is_error,
                ..
            } => {
                let content = match Part::textual(parts) {
                    Some(text) => Json::from(text),
                    None => Json::Array(parts.iter().filter_map(content_block).collect()),
                };
                let mut block = obj! {
                    "type": "tool_result",
                    "tool_use_id": normalize_tool_id(tool_use_id),
                    "content": content,
                };
                if *is_error {
                    block.insert("is_error", Json::Bool(true));
                }
                results.push(block);
            }
            Part::Text { .. } | Part::File(_) => rest.extend(content_block(part)),
            _ => {}
        }
    }
    results.extend(rest);
    results
}

/// A text (unless blank) or file part as a content block: `text`, `image`, `document`.
fn content_block<'a>(part: &'a Part<'_>) -> Option<Json<'a>> {
    let base64 = |file: &'a FilePart| {
        obj! {"type": "base64", "media_type": file.mime_type(), "data": file.data().unwrap_or_default()}
    };
    Some(match part {
        Part::Text { text } if !text.trim().is_empty() => obj! {"type": "text", "text": text},
        Part::File(file @ FilePart::Image { .. }) => {
            obj! {"type": "image", "source": base64(file)}
        }
        Part::File(file @ FilePart::Pdf { .. }) => obj! {
            "type": "document",
            "source": base64(file),
            "title": file.basename(),
        },
        Part::File(FilePart::TextFile { text, .. }) => {
            obj! {"type": "text", "text": text.as_str()}
        }
        Part::File(file @ FilePart::Unsupported { .. }) => {
            obj! {"type": "text", "text": super::unsupported_text(file)}
        }
        _ => return None,
    })
}

/// Native thinking, foreign thinking as text, text, then tool uses.
fn assistant_content<'a>(parts: &[&'a Part<'_>], foreign_mode: ForeignThinking) -> Vec<Json<'a>> {
    let mut thinking = Vec::new();
    let mut foreign = Vec::new();
    let mut texts = Vec::new();
    let mut tool_uses = Vec::new();
    for part in parts {
        match part {
            Part::Thinking {
                content,
                signature,
                redacted,
            } => {
                if *redacted {
                    thinking.push(obj! {"type": "redacted_thinking", "data": content});
                } else if let Some(sig) = signature.as_ref().filter(|s| s.provider == "anthropic") {
                    thinking.push(obj! {
                        "type": "thinking",
                        "thinking": content,
                        "signature": &sig.value,
                    });
                } else if !content.trim().is_empty() {
                    foreign.push(content.trim());
                }
            }
            Part::Text { text } if !text.trim().is_empty() => {
                texts.push(obj! {"type": "text", "text": text.trim()});
            }
            Part::ToolUse { id, name, input } => tool_uses.push(obj! {
                "type": "tool_use",
                "id": normalize_tool_id(id),
                "name": encode_tool_name(name),
                "input": Json::Map(input),
            }),
            _ => {}
        }
    }
    if let Some(text) = foreign_thinking_text(&foreign, foreign_mode) {
        thinking.push(obj! {"type": "text", "text": text});
    }
    thinking.extend(texts);
    thinking.extend(tool_uses);
    thinking
}

/// Foreign thinking re-sent as text: `<thinking>\n<contents joined by blank lines>\n</thinking>`,
/// or nothing when there is none or `mode` drops it.
pub(super) fn foreign_thinking_text(contents: &[&str], mode: ForeignThinking) -> Option<String> {
    (mode == ForeignThinking::Text && !contents.is_empty())
        .then(|| format!("<thinking>\n{}\n</thinking>", contents.join("\n\n")))
}
