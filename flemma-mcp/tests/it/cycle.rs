//! An MCP tool through an executor cycle on a transcript: the cycle waits for the server's
//! listing (readiness gating), runs the call and writes its result.

use std::sync::Arc;

use flemma_runtime::{Executor, MemoryConversation, Next, ToolRegistry};

use crate::support::everything;

const TRANSCRIPT: &str = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"everything.*\"]}}}\n```\n@You:\nSay hello through the echo tool.\n\n@Assistant:\n**Tool Use:** `everything.echo` (`toolu_01`)\n```json\n{\"message\": \"hello from flemma\"}\n```\n";

#[tokio::test]
async fn a_tool_use_of_an_mcp_tool_gets_its_result_and_the_cycle_waits_for_the_listing() {
    let registry = ToolRegistry::new();
    flemma_mcp::add_servers(&registry, [everything()]).unwrap();
    // Not ready yet: the server is starting. The cycle waits for it.
    assert!(!registry.is_ready());
    let conversation = Arc::new(MemoryConversation::new(TRANSCRIPT));
    let executor = Executor::builder(conversation.clone(), registry).build();
    let report = executor.cycle().await.unwrap();
    assert_eq!(report.completed.len(), 1);
    assert_eq!(report.next, Next::Send);
    let after = conversation.text();
    let result = after
        .find("**Tool Result:** `toolu_01`")
        .unwrap_or_else(|| panic!("no result:\n{after}"));
    assert!(
        after[result..].contains("Echo: hello from flemma"),
        "{after}"
    );
    assert!(!after[result..].contains("error"), "{after}");
}
