//! The tool cycle (spec §7.1-7.7) on before/after transcripts.
//!
//! Every `tests/fixtures/cycle/*.chat` runs through one [`Executor::cycle`] with the test
//! tools below registered; the transcript afterwards and the cycle's report are snapshotted
//! (`snapshots/it__cycle__<name>.snap`). The fixtures' frontmatter sets the options
//! (`tools.auto_approve`, `max_concurrent`, …) the way a user's transcript would. A fixture
//! whose name starts with `trusted_` runs with [`TranscriptApprovals::Trusted`] (the spec's
//! behaviour: every `(approved)` in the file runs); the others with the default, where an
//! `(approved)` this host did not place is decided by the chain.
//!
//! Regenerate with `INSTA_UPDATE=always cargo test -p flemma-runtime --test it cycle`, then
//! review the diff.

use std::sync::Arc;
use std::time::Duration;

use flemma_core::{ToolDefinition, ToolOutput, async_tool_fn, tool_fn};
use flemma_runtime::placements::{MemoryPlacements, TranscriptApprovals};
use flemma_runtime::{CycleReport, Event, Executor, MemoryConversation, ToolRegistry};
use serde_json::{Value, json};

/// The tools every scenario can call.
pub(crate) fn test_registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    let def = |name: &str| ToolDefinition::builder(name, format!("The {name} test tool.")).unwrap();
    registry.register(tool_fn(def("echo").build().unwrap(), |input, _| {
        ToolOutput::text(input["text"].as_str().unwrap_or("(no text)"))
    }));
    registry.register(tool_fn(def("add").build().unwrap(), |input, _| {
        let sum = input["a"].as_i64().unwrap_or(0) + input["b"].as_i64().unwrap_or(0);
        ToolOutput::json(json!({ "sum": sum }))
    }));
    registry.register(tool_fn(def("fail").build().unwrap(), |input, _| {
        let output = ToolOutput::error(input["error"].as_str().unwrap_or(""));
        match input["partial"].as_str() {
            Some(partial) => output.with_partial_output(partial),
            None => output,
        }
    }));
    registry.register(async_tool_fn(
        def("sleep").asynchronous(true).build().unwrap(),
        |input, _| async move {
            let ms = input["ms"].as_u64().unwrap_or(10);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ToolOutput::text(format!("slept {ms}"))
        },
    ));
    registry.register(tool_fn(
        def("boom").build().unwrap(),
        |_, _| -> ToolOutput { panic!("tool bug") },
    ));
    registry.register(tool_fn(
        def("locked").executable(false).build().unwrap(),
        |_, _| ToolOutput::text("never"),
    ));
    registry.register(tool_fn(
        def("hidden").enabled(false).build().unwrap(),
        |_, _| ToolOutput::text("hidden ran"),
    ));
    registry.register(tool_fn(def("ctx").build().unwrap(), |_, ctx| {
        ToolOutput::json(json!({
            "tool_id": ctx.tool_id().as_str(),
            "tool": ctx.tool_name().as_str(),
            "timeout": ctx.timeout().as_secs(),
            "messages": ctx.document().messages.len(),
        }))
    }));
    registry.register(tool_fn(def("input").build().unwrap(), |input, _| {
        ToolOutput::json(input)
    }));
    registry
}

/// Runs one cycle on `text`; returns the new text, the report and the events.
pub(crate) async fn run_cycle(text: &str) -> (String, CycleReport, Vec<Event>) {
    run_cycle_with(text, TranscriptApprovals::Placed).await
}

/// [`run_cycle`] with the transcript's `(approved)` blocks taken as `approvals` says.
pub(crate) async fn run_cycle_with(
    text: &str,
    approvals: TranscriptApprovals,
) -> (String, CycleReport, Vec<Event>) {
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), test_registry())
        .transcript_approvals(approvals)
        .placements(Arc::new(MemoryPlacements::new()))
        .build();
    let mut events = executor.subscribe();
    let report = executor.cycle().await.unwrap();
    let mut seen = Vec::new();
    while let Some(event) = events.try_recv() {
        seen.push(event);
    }
    (conversation.text(), report, seen)
}

pub(crate) fn report_json(report: &CycleReport) -> Value {
    json!({
        "placed": report.placed.iter().map(|p| json!({"id": p.id.as_str(), "tool": p.tool.as_str(), "status": p.status.as_str()})).collect::<Vec<_>>(),
        "completed": report.completed.iter().map(|c| json!({"id": c.id.as_str(), "tool": c.tool.as_str(), "success": c.success})).collect::<Vec<_>>(),
        "next": report.next,
    })
}

fn warnings(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Warning(w) => Some(w.clone()),
            Event::NamesMigrated(names) => Some(format!(
                "migrated: {}",
                names
                    .iter()
                    .map(|(a, b)| format!("{a} -> {b}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn cycle_fixtures() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots/cycle");
    settings.bind(|| {
        insta::glob!("../fixtures/cycle", "*.chat", |path| {
            let before = std::fs::read_to_string(path).unwrap();
            // `trusted_*`: the spec's behaviour, every `(approved)` in the file runs.
            let trusted = path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("trusted_"));
            let approvals = if trusted {
                TranscriptApprovals::Trusted
            } else {
                TranscriptApprovals::Placed
            };
            let (after, report, events) = runtime.block_on(run_cycle_with(&before, approvals));
            // Text outside the blocks a cycle owns survives: every line of the input that is
            // not inside a tool result block is still there, in order.
            assert_user_text_kept(&before, &after, path);
            let snapshot = format!(
                "{after}\n--- report ---\n{}\n--- warnings ---\n{}",
                serde_json::to_string_pretty(&report_json(&report)).unwrap(),
                warnings(&events).join("\n")
            );
            insta::assert_snapshot!(snapshot);
        });
    });
}

/// The lines of `before` outside tool result blocks (and tool-use headers, which a name
/// migration rewrites) appear in `after` in the same order.
fn assert_user_text_kept(before: &str, after: &str, path: &std::path::Path) {
    let doc = flemma_ast::parse(before);
    let mut owned = std::collections::HashSet::new();
    for message in &doc.messages {
        for result in message.tool_results() {
            owned.extend(result.span.start_line..=result.span.end_line);
        }
        for tool_use in message.tool_uses() {
            owned.insert(tool_use.span.start_line);
        }
    }
    let mut rest = after.lines();
    for (i, line) in before.lines().enumerate() {
        let number = u32::try_from(i + 1).unwrap();
        if owned.contains(&number) {
            continue;
        }
        assert!(
            rest.any(|l| l == line),
            "{}: line {number} {line:?} lost or moved",
            path.display()
        );
    }
}
