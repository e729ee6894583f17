//! MCP servers as tool sources of a flemma [`ToolRegistry`](flemma_tools::ToolRegistry),
//! on the official Rust SDK (`rmcp`).
//!
//! Each server of `[mcp.servers.NAME]` in `flemma.toml` ([`servers_of`], [`McpServerConfig`]),
//! or built in code, becomes an [`McpServer`]: a [`ToolSource`](flemma_tools::ToolSource)
//! started when it is added to the registry. Its tools are listed (every page) and
//! registered as `NAME.tool` ([`registered_name`]; collisions get `-2`, `-3`, … in name order,
//! reported as warnings), with the server's JSON Schema as the input schema (a schema
//! flemma-schema cannot take is a warning naming the tool, which is skipped). Requests wait
//! for the listing like for every asynchronous source (spec §4.3); a server that fails or
//! times out is a warning naming it, and the rest goes on.
//!
//! A call sends the input as the arguments and maps the result ([`tool_output_in`]: text
//! joined, images, audio and binary resources as placeholders naming their type and size and
//! saved to the conversation's result store, `isError` as an error result, structured content
//! as JSON); the call's
//! cancel and `tool_timeout` drop the request, and rmcp then sends
//! `notifications/cancelled`. A stdio server's stderr goes to `tracing` (target
//! `flemma_mcp::stderr`), never to the transcript.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = flemma_config::Config::new();
//! config.load_toml_str(
//!     "[mcp.servers.everything]\ncommand = \"mcp-server-everything\"\n",
//!     "flemma.toml".as_ref(),
//! )?;
//! let registry = flemma_tools::ToolRegistry::new();
//! let servers = flemma_mcp::add_servers(&registry, flemma_mcp::servers_of(&config)?)?;
//! registry.ready().await;
//! assert!(registry.contains("everything.echo"));
//! # drop(servers);
//! # Ok(())
//! # }
//! ```

mod config;
mod connect;
mod content;
mod error;
mod naming;
mod source;

pub use config::{
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpConfigError, McpServerConfig, McpTransport,
    parse_servers, servers_of,
};
pub use content::{tool_output, tool_output_in};
pub use error::McpError;
pub use naming::{MAX_WIRE_NAME, registered_name};
pub use source::{McpServer, McpServerHandle, McpServerState, McpTool, add_servers};
