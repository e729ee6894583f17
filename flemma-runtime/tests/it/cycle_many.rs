//! Issue 19: one cycle over 10,000 calls in one message (`max_concurrent = 0`) writes every
//! result once, and the transcript parses clean. Not timed: the bench `cycle/ten_thousand_tools`
//! measures it; this checks that the batched writes and the block-level re-parses lose or
//! duplicate nothing at that size.

use std::fmt::Write as _;
use std::sync::Arc;

use flemma_ast::Segment;
use flemma_config::{Config, Layer};
use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
use flemma_runtime::{Executor, MemoryConversation, ToolRegistry};
use serde_json::json;

const CALLS: usize = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_in_one_message_write_each_result_once() {
    let registry = ToolRegistry::new();
    registry.register(tool_fn(
        ToolDefinition::builder("noop", "Returns its number.")
            .unwrap()
            .build()
            .unwrap(),
        |input, _| ToolOutput::text(format!("ok {}", input["n"])),
    ));
    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools.auto_approve", json!(["noop"]))
        .unwrap();
    config
        .set(Layer::Runtime, "tools.max_concurrent", json!(0))
        .unwrap();
    let mut text = String::from("@You:\nRun them all.\n\n@Assistant:\n");
    for i in 0..CALLS {
        let _ = write!(
            text,
            "**Tool Use:** `noop` (`toolu_{i}`)\n```json\n{{\"n\":{i}}}\n```\n"
        );
    }
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry)
        .config(config)
        .build();

    let report = executor.cycle().await.unwrap();
    assert_eq!(report.completed.len(), CALLS);

    let after = conversation.text();
    let doc = flemma_ast::parse(&after);
    assert!(
        doc.is_clean(),
        "{:?}",
        &doc.diagnostics[..3.min(doc.diagnostics.len())]
    );
    assert_eq!(doc.messages.len(), 3, "the results share one @You: message");
    let results: Vec<_> = doc.messages[2]
        .segments
        .iter()
        .filter_map(|s| match s {
            Segment::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), CALLS, "one result per call");
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result.tool_use_id, format!("toolu_{i}").as_str());
        assert!(result.is_final() && result.status.is_none(), "{result:?}");
        assert_eq!(result.content, format!("ok {i}"));
    }
}
