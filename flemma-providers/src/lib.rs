//! The model side of flemma: the [`Provider`] trait and its implementations for the four
//! APIs, the prompt built from a conversation, templates, request bodies, the HTTP transport,
//! the streaming decoders and the writer of responses into `.chat` text.
//!
//! A provider streams server-sent events; [`SseDecoder`] turns bytes (in any chunking) into
//! events, a [`StreamDecoder`] per provider turns those into provider-neutral
//! [`StreamEvent`]s (the response's id and model, text, thinking, signatures, tool calls,
//! usage, stop, error), and [`ResponseWriter`] writes them into the conversation exactly as
//! the reference implementation does: text verbatim, each complete tool call as a
//! `**Tool Use:**` block with its wire name decoded, thinking at the end with its signature.
//!
//! On the request side, [`build_prompt`] turns a parsed conversation into a provider-neutral
//! [`Prompt`] (lifecycle results dropped, synthetic `No result provided` results for
//! unresolved tool uses, Job Results as user text), and one function per provider shapes the
//! request body (`anthropic_request`, `openai_responses_request`, `chat_completions_request`,
//! `vertex_request`). The HTTP transport (reqwest with rustls on ring) posts it with timeouts
//! and retries, and `stream_events` pipes the answer through the decoders. Templates
//! (`{{ … }}`, `{% … %}`, `include()`) and `@./file` references are rendered by a
//! [`TemplateEngine`] while the prompt is built: [`MiniJinjaEngine`] by default, `LuaEngine`
//! with the `lua` feature.
//!
//! The [`Provider`] trait ties the two sides: `build_request` from a prompt, `stream` the
//! response as events. [`HttpProvider`] implements it for the four APIs; [`ScriptedProvider`]
//! replays scripted turns or recorded streams without network (tests, examples, the offline
//! quickstart).
//!
//! ```
//! use flemma_providers::{AnthropicDecoder, ResponseWriter, SseDecoder, StreamDecoder};
//!
//! let body = "event: content_block_delta\n\
//!             data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi!\"}}\n\n\
//!             event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
//! let (mut sse, mut decoder, mut writer) = (SseDecoder::new(), AnthropicDecoder::new(), ResponseWriter::new());
//! let mut text = String::new();
//! for event in sse.feed(body.as_bytes()) {
//!     for decoded in decoder.decode(&event) {
//!         text += &writer.apply(&decoded);
//!     }
//! }
//! text += &writer.finish();
//! assert_eq!(text, "Hi!");
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod adapters;
mod anthropic;
mod body;
mod chat;
mod error;
mod event;
mod kind;
mod models;
mod openai;
mod prompt;
mod provider;
mod request;
mod scripted;
mod sse;
mod template;
#[cfg(test)]
mod test_support;
mod text;
mod transport;
mod usage;
mod vertex;
mod wire;
mod writer;

pub use adapters::anthropic::anthropic_request;
pub use adapters::chat::chat_completions_request;
pub use adapters::openai::openai_responses_request;
pub use adapters::vertex::vertex_request;
pub use anthropic::AnthropicDecoder;
pub use body::RequestBody;
pub use chat::ChatCompletionsDecoder;
pub use error::{ProviderError, error_from_body};
pub use event::{STREAM_CUT, StopReason, StreamDecoder, StreamEvent};
pub use kind::ProviderKind;
pub use models::{ModelInfo, ModelTable, ModelTableError, Prices, Tier};
pub use openai::OpenAiResponsesDecoder;
pub use prompt::builder::{PromptBuilder, build_prompt};
pub use prompt::{
    COMPACTION_PREFIX, NO_RESULT_PROVIDED, Part, Prompt, PromptDiagnostic, PromptDiagnosticKind,
    PromptMessage, PromptRole, ThinkingSignature,
};
pub use provider::{EventStream, HttpProvider, OnRetry, Provider, Request, SendError, SendFuture};
pub use request::{
    CacheRetention, ForeignThinking, RequestOptions, Thinking, ThinkingLevel, body_to_string,
};
pub use scripted::{
    ReplayError, ScriptError, ScriptedProvider, ScriptedToolUse, ScriptedUsage, Turn,
};
pub use sse::{SseDecoder, SseEvent};
pub use template::jinja::MiniJinjaEngine;
#[cfg(feature = "lua")]
pub use template::lua::LuaEngine;
pub use template::{
    FileAccess, FilePart, FileReference, MAX_FILE_BYTES, Scope, TemplateEngine, TemplateError,
    TemplatePiece, detect_mime, file_reference_at,
};
pub use transport::{
    ApiKey, Endpoint, HttpError, HttpTransport, ResponseStream, Retry, RetryReason, Timeout,
    TokenError, TokenFuture, TokenSource, TransportConfig, TransportError, stream_events,
    stream_events_with, with_cancel,
};
pub use usage::Usage;
pub use vertex::VertexDecoder;
pub use wire::normalize_tool_id;
pub use writer::ResponseWriter;
