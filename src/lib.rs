//! flemma: embed LLM agent loops whose conversations live in plain-text `.chat` transcripts.
//!
//! This facade re-exports the SDK's crates by concern, so most applications depend on this
//! crate alone. [`Session`] is the agent loop (crate flemma-runtime, beside the executor): send
//! the conversation to a [`Provider`](providers::Provider), stream the response into it, run
//! the tools it asks for through the [`Executor`](runtime::Executor), repeat (spec §7.10
//! autopilot), reporting every step as a [`SessionEvent`].
//!
//! ```
//! let doc = flemma::ast::parse("@You:\nHello!\n");
//! assert_eq!(doc.messages[0].role, flemma::ast::Role::You);
//! ```
//!
//! # One path per name
//!
//! Every item has one canonical path: the module of the crate that defines it.
//! [`ToolName`](ids::ToolName), [`ToolUseId`](ids::ToolUseId) and [`JobId`](ids::JobId) are
//! `flemma::ids::…`; [`Executor`](runtime::Executor) is `flemma::runtime::Executor`;
//! [`Provider`](providers::Provider) is `flemma::providers::Provider`; the options are
//! `flemma::config::…`. No crate re-exports the items of the crates below it (a user of
//! `flemma-ast` alone imports `ToolName` from `flemma-ids`), so each of these names has one
//! path through the facade. The one exception is the `async_trait` attribute, which
//! `flemma_runtime`, `flemma_approval` and `flemma_providers` each re-export for the users of
//! that crate alone (it is one macro). The facade's top level holds only what no crate module does: the agent
//! loop ([`Session`] and its types) and [`async_trait`], the attribute the SDK's traits
//! ([`Tool`](runtime::Tool), [`Conversation`](runtime::Conversation),
//! [`Approver`](runtime::Approver), [`Resolver`](approval::Resolver),
//! [`Provider`](providers::Provider), [`TokenSource`](providers::TokenSource)) are written
//! with. No name is re-exported at two places of the top level.

pub use flemma_runtime::{
    AutopilotState, Cancelled, Session, SessionBuilder, SessionError, SessionEvent, SessionEvents,
    Stop,
};

/// The attribute for implementing [`Tool`](runtime::Tool), [`Conversation`](runtime::Conversation),
/// [`Approver`](runtime::Approver), [`Resolver`](approval::Resolver),
/// [`Provider`](providers::Provider) and [`TokenSource`](providers::TokenSource) with
/// `async fn`s, so an application needs no `async-trait` dependency of its own (the one
/// `async-trait` of the workspace; `flemma_runtime::async_trait`, `flemma_approval::async_trait`
/// and `flemma_providers::async_trait` are the same macro):
///
/// ```
/// use flemma::async_trait;
/// use flemma::runtime::{Answer, Approver, PendingCall};
///
/// struct Yes;
///
/// #[async_trait]
/// impl Approver for Yes {
///     async fn ask(&self, _call: &PendingCall) -> Answer {
///         Answer::Approve
///     }
/// }
/// # let _ = Yes;
/// ```
pub use flemma_approval::async_trait;

pub use flemma_approval as approval;
pub use flemma_ast as ast;
pub use flemma_builtins as builtins;
pub use flemma_config as config;
pub use flemma_core as core;
pub use flemma_ids as ids;
/// The language server of `.chat` documents (`flemma lsp`; feature `lsp`).
#[cfg(feature = "lsp")]
pub use flemma_lsp as lsp;
#[cfg(feature = "mcp")]
pub use flemma_mcp as mcp;
/// Conversations on object storage (feature `object-store`): [`object::ObjectConversation`],
/// leases and [`object::Worker`].
#[cfg(feature = "object-store")]
pub use flemma_object as object;
pub use flemma_providers as providers;
pub use flemma_runtime as runtime;
pub use flemma_schema as schema;
pub use flemma_store as store;

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
