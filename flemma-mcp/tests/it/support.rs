//! The test servers, registries and contexts.

use std::path::PathBuf;
use std::time::Duration;

use flemma_ids::{ToolName, ToolUseId};
use flemma_mcp::{McpServerConfig, McpServerHandle};
use flemma_tools::{ExecutionContext, Tool, ToolOutput, ToolRegistry};
use serde_json::Value;

/// The pinned server-everything, as `npm ci` in `tests/mcp` installs it. Missing is a
/// failure, not a skip: `scripts/test` installs it.
pub(crate) fn everything_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test (or `npm ci` in tests/mcp) to install the MCP test servers",
        bin.display()
    );
    bin
}

/// server-everything over stdio, as server `everything`.
pub(crate) fn everything() -> McpServerConfig {
    McpServerConfig::stdio("everything", everything_bin().to_string_lossy())
        .unwrap()
        .with_args(["stdio"])
        .with_startup_timeout(Duration::from_secs(30))
}

/// A registry with `servers` added, once every one is done.
pub(crate) async fn registry_with(
    servers: Vec<McpServerConfig>,
) -> (ToolRegistry, Vec<McpServerHandle>) {
    let registry = ToolRegistry::new();
    let handles = flemma_mcp::add_servers(&registry, servers).unwrap();
    registry.ready().await;
    (registry, handles)
}

/// A context for one direct call of `name`.
pub(crate) fn context(name: &str) -> ExecutionContext {
    ExecutionContext::builder(
        ToolUseId::new("toolu_01").unwrap(),
        ToolName::new(name).unwrap(),
    )
    .build()
    .unwrap()
}

/// Calls the registered tool `name` directly.
pub(crate) async fn call(registry: &ToolRegistry, name: &str, input: Value) -> ToolOutput {
    let tool = registry
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not registered: {:?}", registry.names()));
    tool.execute(input, &context(name)).await
}
