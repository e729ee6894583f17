//! Discovery and calls against server-everything over stdio.

use std::time::Duration;

use flemma_core::ToolOutput;
use flemma_mcp::McpServerState;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{call, everything, registry_with};

/// The tools of the pinned server-everything, as the model sees them.
const EVERYTHING_TOOLS: &[&str] = &[
    "everything.echo",
    "everything.get-annotated-message",
    "everything.get-env",
    "everything.get-resource-links",
    "everything.get-resource-reference",
    "everything.get-structured-content",
    "everything.get-sum",
    "everything.get-tiny-image",
    "everything.gzip-file-as-resource",
    "everything.simulate-research-query",
    "everything.toggle-simulated-logging",
    "everything.toggle-subscriber-updates",
    "everything.trigger-long-running-operation",
];

#[tokio::test]
async fn discovery_registers_every_tool_under_the_server_name() {
    let (registry, handles) = registry_with(vec![everything()]).await;
    assert_eq!(registry.names(), EVERYTHING_TOOLS);
    assert!(registry.take_warnings().is_empty());
    assert_eq!(
        handles[0].state(),
        McpServerState::Running {
            tools: registry.names()
        }
    );
    assert!(handles[0].pid().is_some());
    // The wire form, and the server's schema with the harness parameters.
    let options = flemma_config::Config::new().options().unwrap();
    let specs = registry.specs_for_prompt(&options);
    let sum = specs
        .iter()
        .find(|s| s.name == "everything.get-sum")
        .unwrap();
    assert_eq!(sum.wire_name(), "everything__get-sum");
    assert_eq!(sum.description, "Returns the sum of two numbers");
    assert_eq!(sum.input_schema["required"], json!(["a", "b"]));
    assert_eq!(sum.input_schema["properties"]["a"]["type"], "number");
    assert!(sum.input_schema["properties"]["flemma.save_to"].is_object());
}

#[tokio::test]
async fn include_and_exclude_globs_pick_tools_by_their_server_names() {
    let server = everything()
        .with_include(["get-*", "echo"])
        .with_exclude(["get-env", "*-resource-*"]);
    let (registry, _) = registry_with(vec![server]).await;
    assert_eq!(
        registry.names(),
        [
            "everything.echo",
            "everything.get-annotated-message",
            "everything.get-structured-content",
            "everything.get-sum",
            "everything.get-tiny-image",
        ]
    );
}

#[tokio::test]
async fn a_call_after_shutdown_is_an_error_result() {
    let (registry, handles) = registry_with(vec![everything()]).await;
    handles[0].shutdown().await;
    let out = call(&registry, "everything.echo", json!({"message": "hi"})).await;
    assert_eq!(
        out,
        ToolOutput::error("MCP server 'everything' is not running")
    );
    // Shutting down twice is harmless.
    tokio::time::timeout(Duration::from_secs(5), handles[0].shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_host_can_hand_in_a_connection_it_made_with_rmcp() {
    use rmcp::ServiceExt;

    let mut command = tokio::process::Command::new(crate::support::everything_bin());
    command.arg("stdio");
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client = ().serve(transport).await.unwrap();
    let config = flemma_mcp::McpServerConfig::stdio("mine", "never-started").unwrap();
    let registry = flemma_runtime::ToolRegistry::new();
    let server = flemma_mcp::McpServer::with_peer(config, client.peer().clone());
    let handle = server.handle();
    registry
        .add_source(server, Duration::from_secs(30))
        .unwrap();
    registry.ready().await;
    assert!(registry.take_warnings().is_empty());
    assert!(registry.contains("mine.get-sum"));
    assert_eq!(
        call(&registry, "mine.echo", json!({"message": "given"})).await,
        ToolOutput::text("Echo: given")
    );
    // No process of its own: the host's connection serves the calls.
    assert_eq!(handle.pid(), None);
    client.cancel().await.unwrap();
}
