//! flemma-mcp against real MCP servers: `@modelcontextprotocol/server-everything` (pinned in
//! `tests/mcp/package.json`, installed by `scripts/test` with `npm ci`), and real processes
//! that are no MCP server at all.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod calls;
mod changes;
mod config;
mod content;
mod cycle;
mod failures;
mod filesystem;
mod hints;
mod hostile;
mod http;
mod hundred;
mod narrowing;
mod scratch;
mod sequential;
mod servers;
mod support;
