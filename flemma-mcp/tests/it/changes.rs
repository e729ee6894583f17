//! `notifications/tools/list_changed`: the Python test server `tests/mcp/py/changing.py`
//! changes its tool list when its tool `change` is called, and the registry follows.

use flemma_core::ToolOutput;
use flemma_mcp::McpServerState;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{call, eventually, python_server, registry_with};

fn description(registry: &flemma_runtime::ToolRegistry, name: &str) -> String {
    registry
        .get(name)
        .unwrap()
        .definition()
        .spec()
        .description
        .clone()
}

#[tokio::test]
async fn list_changed_adds_removes_and_changes_the_servers_tools() {
    let (registry, handles) = registry_with(vec![python_server("changing", "changing", &[])]).await;
    assert_eq!(
        registry.names(),
        ["changing.alpha", "changing.change", "changing.stable"]
    );
    assert_eq!(description(&registry, "changing.stable"), "Version 1");
    let stable_before = registry.get("changing.stable").unwrap();

    assert_eq!(
        call(&registry, "changing.change", json!({})).await,
        ToolOutput::text("changed")
    );
    eventually("the new list registered", || {
        registry.contains("changing.beta")
    })
    .await;
    assert_eq!(
        registry.names(),
        ["changing.beta", "changing.change", "changing.stable"]
    );
    assert_eq!(description(&registry, "changing.stable"), "Version 2");
    assert!(!std::sync::Arc::ptr_eq(
        &stable_before,
        &registry.get("changing.stable").unwrap()
    ));
    assert_eq!(
        call(&registry, "changing.beta", json!({})).await,
        ToolOutput::text("beta")
    );
    assert_eq!(
        handles[0].state(),
        McpServerState::Running {
            tools: registry.names()
        }
    );
    // Replacing its own tools is no redefinition.
    assert!(registry.take_warnings().is_empty());

    // And back.
    assert_eq!(
        call(&registry, "changing.change", json!({})).await,
        ToolOutput::text("changed back")
    );
    eventually("the first list again", || {
        registry.contains("changing.alpha")
    })
    .await;
    assert_eq!(
        registry.names(),
        ["changing.alpha", "changing.change", "changing.stable"]
    );
    assert_eq!(description(&registry, "changing.stable"), "Version 1");
}

#[tokio::test]
async fn a_conversations_globs_see_the_new_tools_on_their_next_evaluation() {
    let (registry, _) = registry_with(vec![python_server("changing", "changing", &[])]).await;
    // What `flemma.opt.tools:append("changing.*")` amounts to: a glob over the names.
    let names = |registry: &flemma_runtime::ToolRegistry| -> Vec<String> {
        let mut config = flemma_config::Config::new();
        config
            .apply_frontmatter("json", r#"{"flemma": {"tools": ["changing.*"]}}"#, 2)
            .unwrap();
        let evaluation = registry.evaluate(&mut config).unwrap();
        evaluation.check().unwrap();
        evaluation
            .options
            .tools
            .list
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    let before = names(&registry);
    call(&registry, "changing.change", json!({})).await;
    eventually("the new list registered", || {
        registry.contains("changing.beta")
    })
    .await;
    let after = names(&registry);
    assert_eq!(
        before,
        ["changing.alpha", "changing.change", "changing.stable"]
    );
    assert_eq!(
        after,
        ["changing.beta", "changing.change", "changing.stable"]
    );
}

#[tokio::test]
async fn a_host_that_made_the_connection_refreshes_the_tools_itself() {
    use rmcp::ServiceExt;

    let config = python_server("mine", "changing", &[]);
    let flemma_mcp::McpTransport::Stdio { command, args, .. } = &config.transport else {
        panic!("stdio expected");
    };
    let mut child = tokio::process::Command::new(command);
    child.args(args);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(child)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The host's handler gets the notifications, not flemma.
    let client = ().serve(transport).await.unwrap();
    let registry = flemma_runtime::ToolRegistry::new();
    let server = flemma_mcp::McpServer::with_peer(config.clone(), client.peer().clone());
    let handle = server.handle();
    registry
        .add_source(server, std::time::Duration::from_secs(30))
        .unwrap();
    registry.ready().await;
    assert_eq!(
        registry.names(),
        ["mine.alpha", "mine.change", "mine.stable"]
    );
    call(&registry, "mine.change", json!({})).await;
    assert!(handle.refresh_tools().await.unwrap());
    assert_eq!(
        registry.names(),
        ["mine.beta", "mine.change", "mine.stable"]
    );
    client.cancel().await.unwrap();
    // The connection is gone: a listing fails and the tools stay.
    assert!(handle.refresh_tools().await.is_err());
    assert_eq!(
        registry.names(),
        ["mine.beta", "mine.change", "mine.stable"]
    );
    let warnings: Vec<String> = registry
        .take_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "mine: the tools were not listed again: MCP server 'mine': listing its tools failed"
        ),
        "{warnings:?}"
    );
}
