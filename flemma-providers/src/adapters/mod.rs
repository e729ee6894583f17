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
