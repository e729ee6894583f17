//! A conversation's tools served over MCP (`flemma mcp serve`; feature `serve`), so that
//! another MCP client (an editor, another agent) can use flemma's sandboxed `bash`, its file tools and its in-process
//! `grep` and `find`.
//!
//! A [`ToolServer`] is an rmcp server handler ([`rmcp::ServerHandler`]) over a
//! [`ToolRegistry`](flemma_runtime::ToolRegistry): `tools/list` answers the tool set the
//! conversation's options enable (`flemma.toml`, runtime overrides and the frontmatter of the
//! conversation file, read again for every request), each with its input schema as the model
//! sees it and MCP [`annotations`] (`readOnlyHint` for `read`, `ls`, `grep`, `find`).
//! `tools/call` runs the call through the [`Executor`](flemma_runtime::Executor) exactly as a
//! cycle runs a model's call: the frontmatter and a `**Tool Use:**` block for the call form a
//! conversation of their own, and one [`cycle`](flemma_runtime::Executor::cycle) places its
//! placeholder through the approval chain and runs it under the sandbox, writing its result
//! there; the server answers with that result.
//!
//! - A call the chain approves runs; its result is the answer (`isError` for an error result).
//! - A call the chain denies is an error result: the executor's text and the chain's reason.
//! - A call the chain leaves pending (a human would decide it) is refused with an error result
//!   naming the way out, unless the server approves pending calls ([`ServeApproval::All`],
//!   `flemma mcp serve --approve all`), as `flemma run --approve all` does.
//!
//! The served calls' conversation sits beside the file (`FILE.mcp-serve`, never written: it
//! only names the calls' store directory `.flemma/FILE.mcp-serve/`), so the file's own results
//! and background jobs are never touched; the tools work in the file's directory, and the file
//! stays read-only to them as in a cycle (`sandbox.policy.protect_conversation`). Calls run
//! in the foreground: `flemma.background` is not offered (an MCP call's answer is its result).
//!
//! [`ToolServer::serve_stdio`] serves over standard input and output, [`serve_http`] over
//! streamable HTTP at `/mcp` on a loopback address ([`bind`] refuses other addresses unless
//! told otherwise).
//!
//! ```no_run
//! # async fn run() -> Result<(), flemma_mcp::serve::ServeError> {
//! let registry = flemma_runtime::ToolRegistry::new();
//! flemma_runtime::register_builtins(&registry).expect("the built-ins register");
//! let server = flemma_mcp::serve::ToolServer::builder(registry)
//!     .file("notes.chat")
//!     .sandbox_backends(flemma_builtins::sandbox_backends())
//!     .build();
//! server.serve_stdio().await
//! # }
//! ```

mod call;
mod error;
mod hints;
mod http;
mod server;

pub use error::ServeError;
pub use hints::annotations;
pub use http::{ENDPOINT, bind, serve_http};
pub use server::{SERVED_SUFFIX, ServeApproval, ToolServer, ToolServerBuilder};
