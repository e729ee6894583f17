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
//! A call sends the input as the arguments and maps the result ([`tool_output_in`]); the
//! call's cancel and `tool_timeout` drop the request, and rmcp then sends
//! `notifications/cancelled`. A stdio server's stderr goes to `tracing` (target
//! `flemma_mcp::stderr`), never to the transcript.
//!
//! # Results
//!
//! - Text blocks are joined with newlines, whatever their annotations' `audience`.
//! - Images, audio and embedded blob resources are one-line placeholders naming the type and
//!   the size, `[image/png, 3.9KB]`, `[resource demo://x: application/gzip, 20B]`; when the
//!   call has a result store (a conversation with a file) the bytes are written there too
//!   and the placeholder ends `, saved to PATH]`. An embedded text resource is its URI line
//!   then its text; a resource link is `[resource link: URI (NAME), MIME, SIZE]`.
//! - `isError: true` is an error result (the text is the error).
//! - Structured content is the JSON result when the server sent no content, else appended as
//!   JSON text unless the content already holds it.
//!
//! Binary content is no file part of the request: in flemma a result carries file parts
//! only when its tool declares `emits_template` (spec §4.6), and then the whole result text
//! is template-evaluated, so a server answering `{{ include('./.env') }}` or `@./secret.txt`
//! would have project files sent to the model. MCP tools therefore declare no
//! `emits_template`; the model sees a saved image by calling the built-in `read` on the
//! path the placeholder names (`read` turns images and PDFs into file parts).
//!
//! # Transports
//!
//! A stdio server is a child process (`command`, `args`, `env`, `cwd`); a streamable HTTP
//! server is a `url` with `headers`. `${NAME}` in an `env` or `headers` value names an
//! environment variable, read when connecting (never stored in the configuration; an unset
//! one is a warning naming the server, the field and the variable). HTTP uses reqwest with
//! rustls on ring and the platform's certificates; a server that is not listening is a
//! warning naming it, at once, not after `startup_timeout`.
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
