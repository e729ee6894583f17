//! MCP servers as tool sources of a flemma [`ToolRegistry`](flemma_runtime::ToolRegistry),
//! on the official Rust SDK (`rmcp`).
//!
//! Each server of `[mcp.servers.NAME]` in `flemma.toml` ([`servers_of`], [`McpServerConfig`]),
//! or built in code, becomes an [`McpServer`]: a [`ToolSource`](flemma_runtime::ToolSource)
//! started when it is added to the registry. Its tools are listed (every page) and
//! registered as `NAME.tool` ([`registered_name`]; collisions get `-2`, `-3`, … in name order,
//! reported as warnings), with the server's JSON Schema as the input schema (a schema
//! flemma-schema cannot take is a warning naming the tool, which is skipped; a `$ref` to a
//! pointer inside the schema outside `$defs`, such as `#/properties/other`, is replaced by
//! the node it points to first). A tool whose name on the wire (`NAME__tool`) would pass
//! [`MAX_WIRE_NAME`] (64) characters is skipped with a warning naming it: providers refuse
//! the whole request otherwise. Requests wait
//! for the listing like for every asynchronous source; a server that fails or
//! times out is a warning naming it, and the rest goes on.
//!
//! The registry follows the server while it runs ([`McpServer`]):
//! `notifications/tools/list_changed` lists its tools again and replaces them in one step
//! (new ones added, gone ones removed, changed ones replaced; a conversation's globs see them
//! on their next evaluation), and a listing already in flight never restores an older list:
//! each listing takes a ticket when it starts, and its result is discarded when one that
//! started later was applied first. A host that made the connection itself
//! ([`McpServer::with_peer`]) calls [`McpServerHandle::refresh_tools`] instead.
//!
//! A call ([`McpTool`]) sends the input as the arguments and maps the result
//! ([`tool_output_in`]), then truncates it like every tool output: from the
//! head, 2,000 lines or 50 KB, with the notice `[Showing lines 1-N of M. Full output: PATH]`
//! and the full text in the conversation's result store. Each request carries a progress
//! token: a `notifications/progress` for it restarts the call's `tool_timeout` and is reported
//! as an [`Event::ToolProgress`](flemma_runtime::Event::ToolProgress)
//! ([`ExecutionContext::report_progress`](flemma_core::ExecutionContext::report_progress)).
//! The executor's cancel, the `tool_timeout` passing without an answer or progress, and a
//! call future dropped before its answer each send `notifications/cancelled` for the request.
//! A server that closes the connection during a call (its process exited or was killed)
//! gives that call an error result and is [`McpServerState::Lost`]: the next call starts it
//! again, once [`restart_backoff`] has passed since the loss (0.5 s, then 1 s, 2 s, 4 s, …
//! up to 30 s as losses and failed restarts repeat; a call that gets an answer resets it).
//! [`McpServerHandle::state`] shows each of these states.
//!
//! A stdio server's stderr goes to `tracing` (target `flemma_mcp::stderr`), never to the
//! transcript: read to its end whatever it holds (decoded lossily, each line cut at 8 KiB
//! with a note of what was dropped, control characters escaped). A message on its stdout
//! that cannot be decoded (over 16 MiB, not UTF-8, not JSON) fails the call it answered at
//! once, naming the cause, instead of leaving it to its `tool_timeout`. A burst of
//! `notifications/tools/list_changed` is one listing in flight and at most one more. The
//! server's names and messages in warnings have their control characters escaped.
//!
//! # What a conversation may change
//!
//! Only the options files (or the host's code) define servers: a transcript is not trusted to
//! start a process or open a connection. A frontmatter (or another layer of options above the
//! files, such as `--set`) may narrow a configured server for its conversation, under
//! `mcp.servers.NAME` ([`flemma_config::McpOptions`]): `enabled = false` takes every tool of
//! the server away, `include` keeps only the tools matching its globs, `exclude` takes the
//! matching ones away (both match the server's own tool names, as in `flemma.toml`), and
//! `tool_timeout` shortens the calls' timeout (a longer one is ignored). Writing `command`,
//! `args`, `env`, `cwd`, `url`, `headers` or `startup_timeout` there is an error, and a
//! narrowed server the options files do not configure stops the conversation (`Unknown MCP
//! server`). A tool taken away is not offered, even when the `tools` list names it
//! ([`ToolDefinitionBuilder::available_when`](flemma_core::ToolDefinitionBuilder::available_when)),
//! and a call of it never runs: [`McpNarrowedResolver`] denies it, and without that resolver
//! the executor answers `Tool '<name>' is not available in this conversation`.
//!
//! ```json
//! {"flemma": {"mcp": {"servers": {"fs": {"exclude": ["write_*", "move_*"]}, "web": {"enabled": false}}}}}
//! ```
//!
//! With the feature `serve`, [`serve`] goes the other way: a conversation's tools served to an
//! MCP client over stdio or streamable HTTP (`flemma mcp serve`).
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
//! only when its tool declares `emits_template`, and then the whole result text
//! is template-evaluated, so a server answering `{{ include('./.env') }}` or `@./secret.txt`
//! would have project files sent to the model. MCP tools therefore declare no
//! `emits_template`; the model sees a saved image by calling the built-in `read` on the
//! path the placeholder names (`read` turns images and PDFs into file parts).
//!
//! # Approval
//!
//! A server may send behaviour hints with each tool (its `annotations`): the handle keeps
//! them by registered name, as of the listing applied last ([`McpServerHandle::hints`],
//! [`McpServerHandle::tool_hints`], [`ToolHints`]), and [`register_hint_resolvers`] adds two
//! resolvers reading them to a `flemma_approval::Chain` (with [`McpNarrowedResolver`], above):
//!
//! - `readOnlyHint: true` (without `destructiveHint: true`): [`McpReadOnlyResolver`]
//!   (`urn:flemma:approval:mcp-read-only`, priority 50) approves the call when the
//!   conversation auto-approves the read-only built-ins (`read`, `find`, `grep` and `ls` each
//!   match the resolved `tools.auto_approve`, as with `$readonly` and `$standard`, the
//!   default), unless its frontmatter removes the tool from `tools.auto_approve` or sets
//!   `tools.auto_approve` (the sandbox resolver's rule).
//! - `destructiveHint: true` (without `readOnlyHint: true`): [`McpDestructiveResolver`]
//!   (`urn:flemma:approval:mcp-destructive`, priority 110, above the config resolver) asks for
//!   approval unless the resolved `tools.auto_approve` holds the tool's registered name itself
//!   (`fs.write_file`; then the config resolver approves it). A glob (`fs.*`),
//!   `tools.require_approval = false`, an `auto_approve` function or the host's policy do not
//!   approve it.
//! - Tools without these hints (unannotated, `idempotentHint` and `openWorldHint` alone,
//!   both read-only and destructive) follow the ordinary rules, as do tools of other sources.
//!
//! The hints are the server's claims, not facts: a server calling a tool read-only gets it
//! approved only in a conversation whose user already chose to approve reading without asking
//! (a preset with the read-only built-ins), and a tool the server calls destructive is
//! approved only by naming it, never by a pattern written before the tool was known.
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
//! let registry = flemma_runtime::ToolRegistry::new();
//! let servers = flemma_mcp::add_servers(&registry, flemma_mcp::servers_of(&config)?)?;
//! registry.ready().await;
//! assert!(registry.contains("everything.echo"));
//! # drop(servers);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod approval;
mod call;
mod config;
mod connect;
mod content;
mod error;
mod hints;
mod lines;
mod naming;
mod refs;
mod shared;
mod source;
mod stdio;
mod undecodable;

pub use call::McpTool;
#[cfg(feature = "serve")]
pub mod serve;

pub use approval::{
    MCP_DESTRUCTIVE_PRIORITY, MCP_DESTRUCTIVE_RESOLVER, MCP_NARROWED_PRIORITY,
    MCP_NARROWED_RESOLVER, MCP_READ_ONLY_PRIORITY, MCP_READ_ONLY_RESOLVER, McpDestructiveResolver,
    McpNarrowedResolver, McpReadOnlyResolver, READ_ONLY_BUILTINS, register_hint_resolvers,
};
pub use config::{
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpConfigError, McpServerConfig, McpTransport,
    parse_servers, servers_of,
};
pub use content::{tool_output, tool_output_in};
pub use error::McpError;
pub use hints::ToolHints;
pub use naming::{MAX_WIRE_NAME, registered_name};
pub use shared::{McpServerState, RESTART_BACKOFF_FIRST, RESTART_BACKOFF_MAX, restart_backoff};
pub use source::{McpServer, McpServerHandle, add_servers};
