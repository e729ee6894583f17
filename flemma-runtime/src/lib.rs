//! The runtime of flemma: the agent loop ([`Session`]), the tool cycle it runs ([`Executor`])
//! and the tools' contracts.
//!
//! A [`Session`] sends the conversation to a [`Provider`](flemma_providers::Provider), streams
//! the response into it, runs the tools it asks for through its [`Executor`], and repeats
//! (spec §7.10 autopilot), reporting every step as a [`SessionEvent`].
//! [`Session::tools_only`] runs the tool cycle without a model (an editor's "execute", a call
//! served over MCP). Both work on one [`transcript::Transcript`], the one owner of a
//! conversation's text, parse, options and revision-checked edits.
//!
//! A [`Tool`] is a [`ToolDefinition`] (name, description, input schema, capabilities) and an
//! async `execute` that turns a call's input into a [`ToolOutput`]. Simple tools are one
//! expression with [`tool_fn`], [`async_tool_fn`] or, with the input decoded into a Rust type,
//! [`typed_tool_fn`]. Every call gets an [`ExecutionContext`]: its working directory, timeout,
//! the conversation, the [`sandbox`], a cancellation token and [`truncate`]-with-overflow bound
//! to the result store.
//!
//! An [`Executor`] runs the three-phase cycle of spec §7 on a [`Conversation`]: placeholders for
//! new calls through the approval chain, then the lifecycle statuses settled and the approved
//! calls run under `tools.max_concurrent`, each result written back as soon as it is ready.
//! [`register_builtins`] adds `bash`, `read`, `write`, `edit`, `ls`, `grep` and `find`. Run it
//! on a Tokio runtime with time and I/O enabled (`enable_all`): `bash` drives a
//! pseudo-terminal. Long calls run as background [`jobs`], journaled under the store so a
//! job outlives its host. Each cycle evaluates the conversation's options with
//! [`ToolRegistry::evaluate`]: its tool set starts from every enabled tool, and a misspelled
//! tool name, a glob that matches nothing or an unknown preset in `tools` stops the cycle with
//! [`ExecutorError::Transcript`] ([`TranscriptError::Config`](transcript::TranscriptError::Config)
//! holding [`flemma_config::ConfigError::Finalize`], each mistake with its frontmatter line);
//! warnings come as [`Event::Warning`].
//!
//! ```
//! use flemma_runtime::{ExecutionContext, Tool, ToolDefinition, ToolOutput, tool_fn};
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

mod actions;
pub mod builtin;
mod context;
mod conversation;
mod definition;
mod events;
mod executor;
pub mod fanout;
pub mod hooks;
pub mod jobs;
mod messages;
mod module;
mod output;
pub mod placements;
pub mod preview;
mod process;
mod protect;
mod registry;
pub mod sandbox;
mod selection;
mod session;
mod shared;
mod tool;
pub mod transcript;
pub mod truncate;

pub use actions::{
    ActionError, answer_interrupted, approve, approve_all_pending, reject, rejection_feedback,
};
/// The attribute that implements [`Tool`], [`Conversation`] and [`Approver`] with `async fn`s,
/// re-exported so that implementors need no dependency of their own.
pub use async_trait::async_trait;
pub use builtin::register_builtins;
pub use context::{ExecutionContext, ExecutionContextBuilder};
pub use conversation::{
    Conversation, ConversationError, Durability, FileConversation, MemoryConversation, Revision,
    Snapshot,
};
pub use definition::{Enabled, ToolDefinition, ToolDefinitionBuilder};
pub use events::{Event, Placed, ToolProgress};
pub use executor::{
    Answer, Approver, CallClaim, Completed, CycleReport, Executor, ExecutorBuilder, ExecutorError,
    Next, PendingCall,
};
pub use hooks::{Hook, HookEvent, HookRegistration, Hooks, hook_fn};
pub use messages::DENIED as DENIED_MESSAGE;
pub use module::ToolModule;
pub use output::{Output, ToolOutput};
pub use protect::protect_host_process;
pub use registry::{Registrar, RegistryError, RegistryWarning, ToolRegistry, ToolSource};
pub use selection::Evaluation;
pub use session::{
    AutopilotState, Cancelled, Session, SessionBuilder, SessionError, SessionEvent, SessionEvents,
    Stop,
};
pub use shared::{FnApprover, approver_fn};
#[cfg(feature = "typed")]
pub use tool::typed_tool_fn;
pub use tool::{FnTool, Tool, async_tool_fn, tool_fn};
