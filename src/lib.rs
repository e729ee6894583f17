//! flemma: embed LLM agent loops whose conversations live in plain-text `.chat` transcripts.
//!
//! This facade re-exports the SDK's crates by concern, so most applications depend on this
//! crate alone. [`runtime::Session`] is the agent loop: send the conversation to a
//! [`Provider`](providers::Provider), stream the response into it, run the tools it asks for
//! through the [`Executor`](runtime::Executor), repeat (autopilot), reporting every
//! step as a [`SessionEvent`](runtime::SessionEvent). [`prelude`] holds the names an embedder
//! starts with.
//!
//! ```
//! use std::sync::Arc;
//! use flemma::prelude::*;
//! use flemma::providers::{ScriptedProvider, Turn};
//!
//! let chat = Arc::new(MemoryConversation::new("@You:\nHello!\n"));
//! let provider = Arc::new(ScriptedProvider::new([Turn::text("Hi.")]));
//! let session = Session::builder(chat.clone(), ToolRegistry::new(), provider).build();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! assert_eq!(runtime.block_on(session.run())?, Stop::Finished);
//! assert!(chat.text().ends_with("@Assistant:\nHi.\n\n@You:\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The crates, from the bottom
//!
//! | module | crate | what it owns |
//! | --- | --- | --- |
//! | [`ids`] | flemma-ids | tool names, tool-use and job ids |
//! | [`ast`] | flemma-ast | the `.chat` grammar, AST, printer and writer |
//! | [`schema`] | flemma-schema | tool input schemas and their shape per provider |
//! | [`config`] | flemma-config | layered options, presets, frontmatter |
//! | [`approval`] | flemma-approval | the resolver chain and its decisions |
//! | [`store`] | flemma-store | the tool result store |
//! | [`core`] | flemma-core | the contracts: `Tool`, `ExecutionContext`, `Conversation`, `Approver`, hooks, the job journal, placements, the sandbox |
//! | [`builtins`] | flemma-builtins | the built-in tools and the bubblewrap backend |
//! | [`providers`] | flemma-providers | the `Provider` trait, the four HTTP APIs, prompts |
//! | [`runtime`] | flemma-runtime | `Session`, the `Executor`, the registry, the shipped conversations, jobs, hooks (registered and run) |
//! | `mcp`, `lsp`, `object` | flemma-mcp, flemma-lsp, flemma-object | MCP, the language server, object storage (features) |
//!
//! # One path per name
//!
//! Every item has one path: the module of the crate that defines it.
//! [`ToolName`](ids::ToolName) is `flemma::ids::ToolName`; [`Tool`](core::Tool) is
//! `flemma::core::Tool`; [`Session`](runtime::Session) is `flemma::runtime::Session`;
//! [`Provider`](providers::Provider) is `flemma::providers::Provider`. No crate re-exports
//! the items of another (a user of `flemma-ast` alone imports `ToolName` from `flemma-ids`).
//! The facade's top level holds the crate modules, [`async_trait`](macro@async_trait) (which
//! no crate re-exports) and the [`prelude`], the one deliberate second path of the names in
//! it.

#![cfg_attr(docsrs, feature(doc_cfg))]
/// The attribute the SDK's async traits are written with, for implementing
/// [`Tool`](core::Tool), [`Conversation`](core::Conversation),
/// [`Approver`](core::Approver), [`Resolver`](approval::Resolver),
/// [`Provider`](providers::Provider) and [`TokenSource`](providers::TokenSource) with
/// `async fn`s, so an application needs no `async-trait` dependency of its own (a user of a
/// crate alone adds `async-trait`):
///
/// ```
/// use flemma::async_trait;
/// use flemma::core::{Answer, Approver, PendingCall};
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
pub use async_trait::async_trait;

/// What an embedder starts with: the agent loop, conversations, the registry and the tool
/// contracts (`use flemma::prelude::*;`). Each name is also at its crate's path, which the
/// documentation uses.
pub mod prelude {
    pub use crate::async_trait;
    pub use flemma_core::{ExecutionContext, Tool, ToolDefinition, ToolOutput, tool_fn};
    pub use flemma_runtime::{
        FileConversation, MemoryConversation, Session, SessionEvent, Stop, ToolRegistry,
        register_builtins,
    };
}

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
pub use flemma_shell as shell;
pub use flemma_store as store;

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The book's pages (`docs/`) that hold Rust snippets, compiled and run as doctests.
#[cfg(doctest)]
pub mod book {
    #[doc = include_str!("../docs/introduction.md")]
    pub struct Introduction;
    #[doc = include_str!("../docs/getting-started.md")]
    pub struct GettingStarted;
    #[doc = include_str!("../docs/command.md")]
    pub struct Command;
    #[doc = include_str!("../docs/chat-format.md")]
    pub struct ChatFormat;
    #[doc = include_str!("../docs/embedding.md")]
    pub struct Embedding;
    #[doc = include_str!("../docs/tools.md")]
    pub struct Tools;
    #[doc = include_str!("../docs/approval.md")]
    pub struct Approval;
    #[doc = include_str!("../docs/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../docs/security.md")]
    pub struct Security;
    #[doc = include_str!("../docs/hooks.md")]
    pub struct Hooks;
    #[doc = include_str!("../docs/subagents.md")]
    pub struct Subagents;
    #[doc = include_str!("../docs/mcp.md")]
    pub struct Mcp;
    #[doc = include_str!("../docs/editor.md")]
    pub struct Editor;
    #[doc = include_str!("../docs/many-machines.md")]
    pub struct ManyMachines;
    #[doc = include_str!("../docs/long-conversations.md")]
    pub struct LongConversations;
    #[doc = include_str!("../docs/observability.md")]
    pub struct Observability;
    #[doc = include_str!("../docs/reference/cli.md")]
    pub struct ReferenceCli;
    #[doc = include_str!("../docs/reference/configuration.md")]
    pub struct ReferenceConfiguration;
    #[doc = include_str!("../docs/contributing.md")]
    pub struct Contributing;
}
