//! flemma-mcp against real MCP servers: `@modelcontextprotocol/server-everything` (pinned in
//! `tests/mcp/package.json`, installed by `scripts/test` with `npm ci`), and real processes
//! that are no MCP server at all.

mod config;
mod cycle;
mod failures;
mod servers;
mod support;
