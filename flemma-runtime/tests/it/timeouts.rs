//! Every call obeys its time limit (issue 17: a `read` stuck on a named pipe kept
//! `flemma cycle` running forever): a tool still running past its limit is given up on, the
//! call is answered with a timeout error and the cycle ends.

use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use flemma_core::{ToolDefinition, ToolOutput, async_tool_fn};
use flemma_runtime::{Executor, MemoryConversation, ToolRegistry};

/// A tool whose call blocks a thread of the blocking pool until the test lets it go, as a
/// read from a named pipe with no writer does.
fn stuck_registry(release: mpsc::Receiver<()>) -> ToolRegistry {
    let release = Arc::new(Mutex::new(release));
    let registry = ToolRegistry::new();
    let definition = ToolDefinition::builder("stuck", "Never answers.")
        .unwrap()
        .build()
        .unwrap();
    registry.register(async_tool_fn(definition, move |_, _| {
        let release = Arc::clone(&release);
        async move {
            let _ = tokio::task::spawn_blocking(move || release.lock().unwrap().recv()).await;
            ToolOutput::text("released")
        }
    }));
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_tool_times_out_and_the_cycle_ends() {
    let text = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"+stuck\"], \"default_timeout\": 1}}}\n```\n@You:\nGo.\n\n@Assistant:\n**Tool Use:** `stuck` (`toolu_01`)\n```json\n{}\n```\n";
    let (let_go, release) = mpsc::channel();
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), stuck_registry(release)).build();
    let started = Instant::now();
    let cycle = tokio::time::timeout(Duration::from_secs(20), executor.cycle()).await;
    // Lets the blocked thread go either way, so the runtime can shut down.
    let _ = let_go.send(());
    let report = cycle.expect("the cycle did not end within 20 s").unwrap();
    assert_eq!(report.completed.len(), 1);
    assert!(!report.completed[0].success);
    let after = conversation.text();
    assert!(
        after.contains(
            "**Tool Result:** `toolu_01` (error)\n```\nTool timed out after 1 second.\n```"
        ),
        "{after}"
    );
    // The limit (1 s) and the grace after it, not much more.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
