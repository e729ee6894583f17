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

use crate::prompt::{PromptMessage, PromptRole};

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
