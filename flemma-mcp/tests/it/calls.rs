//! Calls beyond their result: output truncation into the result store, progress that resets
//! `tool_timeout`, and `notifications/cancelled` for a cancelled, timed out or abandoned call
//! (the Python test server `tests/mcp/py/recorder.py` records what it receives).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flemma_core::{ExecutionContext, ToolOutput, ToolProgress};
use flemma_ids::{ToolName, ToolUseId};
use flemma_runtime::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::support::{eventually, everything, python_server, registry_with, scratch};

/// The recorder server, recording into `dir/cancelled.jsonl`.
async fn recorder(dir: &Path) -> (ToolRegistry, PathBuf) {
    let record = dir.join("cancelled.jsonl");
    let server = python_server("rec", "recorder", &[&record.to_string_lossy()])
        .with_tool_timeout(Duration::from_millis(1500));
    let (registry, _) = registry_with(vec![server]).await;
    assert!(registry.contains("rec.slow"), "{:?}", registry.names());
    (registry, record)
}

/// The `notifications/cancelled` the recorder received.
fn received(record: &Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn context(name: &str) -> ExecutionContext {
    ExecutionContext::builder(
        ToolUseId::new("toolu_01").unwrap(),
        ToolName::new(name).unwrap(),
    )
    .build()
    .unwrap()
}

#[tokio::test]
async fn a_large_output_is_truncated_from_the_head_with_the_full_text_in_the_store() {
    let dir = scratch("truncation");
    let (registry, _) = recorder(&dir).await;
    let options = flemma_config::Config::new().options().unwrap();
    let store =
        flemma_store::Store::new(&options.tools.store, Some(&dir.join("t.chat")), "1").unwrap();
    let ctx = ExecutionContext::builder(
        ToolUseId::new("toolu_big").unwrap(),
        ToolName::new("rec.big").unwrap(),
    )
    .options(Arc::new(options))
    .store(Arc::new(store))
    .build()
    .unwrap();
    let tool = registry.get("rec.big").unwrap();
    let out = tool.execute(json!({"lines": 3000}), &ctx).await;

    let full: Vec<String> = (1..=3000).map(|n| format!("line {n}")).collect();
    let path = ctx
        .overflow_path()
        .expect("the full output is in the store");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full.join("\n"));
    assert_eq!(
        out,
        ToolOutput::text(format!(
            "{}\n\n[Showing lines 1-2000 of 3000. Full output: {}]",
            full[..2000].join("\n"),
            path.display()
        ))
    );
    // A short output is left alone and stores nothing.
    let ctx = context("rec.big");
    assert_eq!(
        tool.execute(json!({"lines": 2}), &ctx).await,
        ToolOutput::text("line 1\nline 2")
    );
    assert_eq!(ctx.overflow_path(), None);
}

#[tokio::test]
async fn progress_resets_tool_timeout_and_is_reported() {
    // Progress every 0.5 s for 3 s; a 1.2 s timeout would end the call without the resets.
    let server = everything().with_tool_timeout(Duration::from_millis(1200));
    let (registry, _) = registry_with(vec![server]).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let ctx = ExecutionContext::builder(
        ToolUseId::new("toolu_01").unwrap(),
        ToolName::new("everything.trigger-long-running-operation").unwrap(),
    )
    .on_progress(move |p| sink.lock().unwrap().push(p))
    .build()
    .unwrap();
    let tool = registry
        .get("everything.trigger-long-running-operation")
        .unwrap();
    let started = Instant::now();
    let out = tool.execute(json!({"duration": 3, "steps": 6}), &ctx).await;
    assert!(started.elapsed() >= Duration::from_secs(3));
    assert_eq!(
        out,
        ToolOutput::text("Long running operation completed. Duration: 3 seconds, Steps: 6.")
    );
    let seen = seen.lock().unwrap().clone();
    let expected: Vec<ToolProgress> = (1..=6)
        .map(|n| ToolProgress::new(f64::from(n)).with_total(6.0))
        .collect();
    // The last notification may arrive after the answer.
    assert!(
        seen.len() >= 5 && expected.starts_with(&seen),
        "progress seen: {seen:?}"
    );
}

#[tokio::test]
async fn a_cancelled_call_sends_notifications_cancelled() {
    let dir = scratch("cancel");
    let (registry, record) = recorder(&dir).await;
    let tool = registry.get("rec.slow").unwrap();
    let ctx = context("rec.slow");
    let cancel = ctx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        cancel.cancellation().cancel();
    });
    let started = Instant::now();
    let out = tool.execute(json!({"seconds": 30}), &ctx).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(out, ToolOutput::error("User aborted tool execution."));
    eventually("the server received the cancel", || {
        !received(&record).is_empty()
    })
    .await;
    let got = received(&record);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["reason"], "cancelled by the user");
    assert!(got[0]["requestId"].is_number() || got[0]["requestId"].is_string());
    // The connection still serves calls.
    assert_eq!(
        tool.execute(json!({"seconds": 0}), &context("rec.slow"))
            .await,
        ToolOutput::text("slept 0s")
    );
}

#[tokio::test]
async fn a_timed_out_call_sends_notifications_cancelled() {
    let dir = scratch("timeout");
    let (registry, record) = recorder(&dir).await;
    let tool = registry.get("rec.slow").unwrap();
    let out = tool
        .execute(json!({"seconds": 30}), &context("rec.slow"))
        .await;
    assert_eq!(
        out,
        ToolOutput::error("MCP tool 'slow' of server 'rec' timed out after 1.5s")
    );
    eventually("the server received the cancel", || {
        !received(&record).is_empty()
    })
    .await;
    assert_eq!(received(&record)[0]["reason"], "timed out");
    // Progress keeps a longer call alive past the same timeout.
    let out = tool
        .execute(
            json!({"seconds": 3, "progress": true}),
            &context("rec.slow"),
        )
        .await;
    assert_eq!(out, ToolOutput::text("slept 3s"));
}

#[tokio::test]
async fn an_abandoned_call_sends_notifications_cancelled() {
    let dir = scratch("abandon");
    let (registry, record) = recorder(&dir).await;
    let tool = registry.get("rec.slow").unwrap();
    // The executor drops a call's future when it is cancelled or given up on.
    let ctx = context("rec.slow");
    let dropped = tokio::time::timeout(
        Duration::from_millis(400),
        tool.execute(json!({"seconds": 30}), &ctx),
    )
    .await;
    assert!(dropped.is_err());
    eventually("the server received the cancel", || {
        !received(&record).is_empty()
    })
    .await;
    assert_eq!(received(&record)[0]["reason"], "the call was abandoned");
}
