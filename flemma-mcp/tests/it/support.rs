//! The test servers, registries and contexts.

use std::path::PathBuf;
use std::time::Duration;

use flemma_core::{ExecutionContext, Tool, ToolOutput};
use flemma_ids::{ToolName, ToolUseId};
use flemma_mcp::{McpServerConfig, McpServerHandle};
use flemma_runtime::ToolRegistry;
use serde_json::Value;

use crate::scratch::Scratch;

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

/// The Python of the venv `scripts/test` makes in `tests/mcp/.venv` (the pinned `mcp` SDK).
/// Missing is a failure, not a skip.
pub(crate) fn python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test to install the Python MCP SDK (tests/mcp/requirements.txt)",
        python.display()
    );
    python
}

/// The Python test server `tests/mcp/py/SCRIPT.py` over stdio, as server `name`.
pub(crate) fn python_server(name: &str, script: &str, args: &[&str]) -> McpServerConfig {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/py")
        .join(format!("{script}.py"));
    let mut all = vec![script.to_string_lossy().into_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    McpServerConfig::stdio(name, python().to_string_lossy())
        .unwrap()
        .with_args(all)
        .with_startup_timeout(Duration::from_secs(30))
}

/// A fresh directory for one test (its path canonical), removed when dropped.
pub(crate) fn scratch(name: &str) -> Scratch {
    Scratch::canonical(format!("flemma-mcp-{name}-{}", std::process::id()))
}

/// Waits up to 10 s for `done`.
pub(crate) async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An error and its causes, joined by `: `.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}
