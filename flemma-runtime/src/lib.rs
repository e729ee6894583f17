//! The runtime of flemma: the agent loop ([`Session`]), the tool cycle it runs ([`Executor`]),
//! the [`ToolRegistry`], background [`jobs`] and [`hooks`].
//!
//! A [`Session`] sends the conversation to a [`Provider`](flemma_providers::Provider), streams
//! the response into it, runs the tools it asks for through its [`Executor`], and repeats
//! (autopilot), reporting every step as a [`SessionEvent`].
//! [`Session::tools_only`] runs the tool cycle without a model (an editor's "execute", a call
//! served over MCP). Both work on one [`transcript::Transcript`], the one owner of a
//! conversation's text, parse, options and revision-checked edits.
//!
//! The contracts it runs (a [`flemma_core::Conversation`], the hook trait, the job journal and
//! the placements ledger) are flemma-core's; this crate holds what runs them and the shipped
//! implementations ([`MemoryConversation`], [`FileConversation`], [`jobs::FileJournal`], the
//! ledgers of [`placements`]).
//!
//! An [`Executor`] runs the three-phase tool cycle on a conversation: placeholders for
//! new calls through the approval chain, then the lifecycle statuses settled and the approved
//! calls run under `tools.max_concurrent`, each result written back as soon as it is ready.
//! The tools are [`flemma_core::Tool`]s in a [`ToolRegistry`]; [`register_builtins`] adds the
//! built-in ones of crate flemma-builtins (`bash`, `read`, `write`, `edit`, `ls`, `grep`,
//! `find`) and the harness tool `flemma.jobs.status`, through the same
//! [`ToolRegistry::register_arc`] a host's tools use. Run it on a Tokio runtime with time and
//! I/O enabled (`enable_all`): `bash` drives a pseudo-terminal. Long calls run as background
//! [`jobs`], journaled under the store so a job outlives its host. Each cycle evaluates the
//! conversation's options with [`ToolRegistry::evaluate`]: its tool set starts from every
//! enabled tool, and a misspelled tool name, a glob that matches nothing or an unknown preset
//! in `tools` stops the cycle with [`ExecutorError::Transcript`]
//! ([`TranscriptError::Config`](transcript::TranscriptError::Config) holding
//! [`flemma_config::ConfigError::Finalize`], each mistake with its frontmatter line); warnings
//! come as [`Event::Warning`].
//!
//! ```
//! use std::sync::Arc;
//! use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
//! use flemma_runtime::{Executor, MemoryConversation, ToolRegistry};
//!
//! let registry = ToolRegistry::new();
//! registry.register(tool_fn(
//!     ToolDefinition::builder("echo", "Repeat the text.")?.build()?,
//!     |input, _ctx| ToolOutput::text(input["text"].as_str().unwrap_or_default()),
//! ));
//! let chat = Arc::new(MemoryConversation::new(
//!     "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"echo\"]}}}\n```\n@You:\nSay hi.\n\n\
//!      @Assistant:\n**Tool Use:** `echo` (`toolu_1`)\n\n```json\n{\"text\": \"hi\"}\n```\n",
//! ));
//! let executor = Executor::builder(chat.clone(), registry).build();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! runtime.block_on(executor.cycle())?;
//! assert!(chat.text().ends_with("**Tool Result:** `toolu_1`\n```\nhi\n```\n"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod actions;
pub mod agents;
mod builtins;
pub mod compaction;
mod conversation;
mod events;
mod executor;
pub mod fanout;
pub mod hooks;
pub mod jobs;
mod messages;
mod module;
pub mod placements;
mod protect;
mod registry;
mod selection;
mod session;
#[cfg(test)]
mod shared;
pub mod telemetry;
pub mod transcript;
pub mod usage;

pub use actions::{
    ActionError, answer_interrupted, approve, approve_all_pending, pending_calls, reject,
    rejection_feedback,
};
pub use builtins::register_builtins;
pub use conversation::{FileConversation, MemoryConversation};
pub use events::{Event, Placed};
pub use executor::{
    CallClaim, Completed, CycleReport, Executor, ExecutorBuilder, ExecutorError, Next, Refusal,
};
pub(crate) use flemma_core::{Conversation, ConversationError, Durability};
pub use module::ToolModule;
pub use protect::protect_host_process;
pub use registry::{Registrar, RegistryError, RegistryWarning, ToolRegistry, ToolSource};
pub use selection::Evaluation;
pub use session::{
    AutopilotState, Cancelled, Session, SessionBuilder, SessionError, SessionEvent, SessionEvents,
    Stop,
};
