//! The contracts of flemma: the traits a host implements or consumes, with their value types.
//!
//! A [`Tool`] is a [`ToolDefinition`] (name, description, input schema, capabilities) and an
//! async `execute` that turns a call's input into a [`ToolOutput`]. Simple tools are one
//! expression with [`tool_fn`], [`async_tool_fn`] or, with the input decoded into a Rust type,
//! `typed_tool_fn` (feature `typed`). Every call gets an [`ExecutionContext`]: its working
//! directory, timeout, the conversation's text and options, the [`sandbox::Sandbox`] it runs
//! in, a cancellation token and [`truncate`]-with-overflow bound to the result store. A tool
//! whose background calls run as processes of their own implements [`Detach`]. An
//! [`Approver`] answers the calls that wait for a person's approval. A [`hooks::Hook`] hears
//! or changes a call, a prompt or a stop; [`hooks`] holds every event's input and answer.
//!
//! A [`Conversation`] is the transcript the runtime reads and edits, wherever it lives: a
//! [`Snapshot`] at a [`Revision`], edits applied by compare-and-swap with a [`Durability`],
//! failures as [`ConversationError`]. A conversation kept elsewhere (an object in a bucket)
//! also says where its jobs are recorded ([`jobs::JobJournal`], entries [`jobs::JobRecord`]
//! naming processes by [`process::ProcessRef`]) and where its hosts remember the calls they
//! placed for a person ([`placements::Placements`]).
//!
//! This crate holds these traits and their value types and nothing that runs them: the
//! runtime (`flemma-runtime`: the registry, the executor, the agent loop, the shipped
//! conversations, journals and ledgers) calls them, the built-in tools (`flemma-builtins`),
//! a host's own tools, hooks and conversations implement them. It is the SDK's stable surface.
//!
//! ```
//! use flemma_core::{ExecutionContext, Tool, ToolDefinition, ToolOutput, tool_fn};
//! use flemma_schema::dsl::{object, string};
//!
//! let echo = tool_fn(
//!     ToolDefinition::builder("echo", "Repeat the text.")?
//!         .input(object([("text", string())]))
//!         .build()?,
//!     |input, _ctx| ToolOutput::text(input["text"].as_str().unwrap_or_default()),
//! );
//!
//! let ctx = ExecutionContext::builder("toolu_01".parse()?, "echo".parse()?).build()?;
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let out = runtime.block_on(echo.execute(serde_json::json!({"text": "hi"}), &ctx));
//! assert_eq!(out, ToolOutput::text("hi"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod approver;
mod context;
mod conversation;
mod definition;
mod delegate;
mod detach;
pub mod hooks;
pub mod jobs;
mod lookup;
pub mod messages;
mod output;
pub mod placements;
pub mod preview;
pub mod process;
mod progress;
mod revision;
pub mod sandbox;
mod tool;
pub mod truncate;

pub use approver::{Answer, Approver, FnApprover, PendingCall, approver_fn};
pub use context::{ExecutionContext, ExecutionContextBuilder, ParsedDocuments, resolve_path};
pub use conversation::{Conversation, ConversationError, Durability, Snapshot};
pub use definition::{Enabled, ToolDefinition, ToolDefinitionBuilder};
pub use delegate::{Delegate, DelegateRequest};
pub use detach::{Detach, DetachedCommand, DetachedEnding};
pub use lookup::{JobLookup, JobStatus};
pub use output::{Output, ToolOutput};
pub use progress::ToolProgress;
pub use revision::Revision;
#[cfg(feature = "typed")]
pub use tool::typed_tool_fn;
pub use tool::{FnTool, Tool, async_tool_fn, tool_fn};
