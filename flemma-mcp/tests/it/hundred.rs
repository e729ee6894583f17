//! The bench's 100-tool server (`tests/mcp/hundred-tools.mjs`, on the pinned
//! `@modelcontextprotocol/sdk`): every tool registered, and one called.

use std::path::PathBuf;
use std::time::Duration;

use flemma_core::ToolOutput;
use flemma_mcp::McpServerConfig;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{call, registry_with};

#[tokio::test]
async fn a_hundred_tools_are_registered_and_callable() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/hundred-tools.mjs");
    let server = McpServerConfig::stdio("h", "node")
        .unwrap()
        .with_args([script.to_string_lossy()])
        .with_startup_timeout(Duration::from_secs(30));
    let (registry, _) = registry_with(vec![server]).await;
    assert!(registry.take_warnings().is_empty());
    let names = registry.names();
    assert_eq!(names.len(), 100);
    assert_eq!(names[0], "h.tool_000");
    assert_eq!(names[99], "h.tool_099");
    assert_eq!(
        call(&registry, "h.tool_042", json!({"text": "ab", "times": 2})).await,
        ToolOutput::text("abab")
    );
}
