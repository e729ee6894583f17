//! Request bodies: a provider-neutral [`Prompt`](crate::Prompt) encoded for each provider
//! (spec §13).

mod anthropic;
mod chat;
mod openai;
mod vertex;

pub use anthropic::anthropic_request;
pub use chat::chat_completions_request;
pub use openai::openai_responses_request;
pub use vertex::vertex_request;

use crate::prompt::{Part, PromptMessage, PromptRole};
use crate::template::FilePart;
use crate::wire::encode_tool_name;

/// The prefix of the synthetic tool-call ids the Vertex decoder makes.
const SYNTHETIC_ID_PREFIX: &str = "urn:flemma:tool:";

/// The wire name sent with a tool result: the matching tool use's name, else the name inside
/// a synthetic id `urn:flemma:tool:<name>:<suffix>`.
fn result_name(name: Option<&str>, tool_use_id: &str) -> Option<String> {
    name.map(encode_tool_name).or_else(|| {
        let (name, _suffix) = tool_use_id
            .strip_prefix(SYNTHETIC_ID_PREFIX)?
            .rsplit_once(':')?;
        (!name.is_empty()).then(|| encode_tool_name(name))
    })
}

/// Tool-result parts as one text, for providers whose results are text only: text and text
/// files as they are, other files as `[binary file: <name> (<mime>)]`.
fn text_with_file_names(parts: &[Part]) -> String {
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Text { text } => out.push_str(text),
            Part::File(file) => out.push_str(&file.as_text_fallback()),
            _ => {}
        }
    }
    out
}

/// The `[binary file: <name>]` text Anthropic and OpenAI are sent for an unsupported file.
fn unsupported_text(file: &FilePart) -> String {
    format!("[binary file: {}]", file.filename())
}

/// The messages with every run of consecutive user messages merged into one.
fn merge_user_messages(messages: &[PromptMessage]) -> Vec<PromptMessage> {
    let mut merged: Vec<PromptMessage> = Vec::with_capacity(messages.len());
    for message in messages {
        match merged.last_mut() {
            Some(last) if last.role == PromptRole::User && message.role == PromptRole::User => {
                last.parts.extend(message.parts.iter().cloned());
            }
            _ => merged.push(message.clone()),
        }
    }
    merged
}
