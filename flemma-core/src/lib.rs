//! The contracts of flemma's tools: what a tool is, what it is given and what it returns.
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
//! This crate holds these traits and their value types and nothing that runs them: the
//! runtime (`flemma-runtime`: the registry, the executor, the agent loop) calls them, the
//! built-in tools (`flemma-builtins`), a host's own tools and hooks implement them. It is the
//! SDK's stable surface for tool and hook authors.
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
mod definition;
mod delegate;
mod detach;
pub mod hooks;
mod lookup;
pub mod messages;
mod output;
pub mod preview;
mod progress;
mod revision;
pub mod sandbox;
mod tool;
pub mod truncate;

pub use approver::{Answer, Approver, FnApprover, PendingCall, approver_fn};
pub use context::{ExecutionContext, ExecutionContextBuilder, ParsedDocuments, resolve_path};
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
