//! Tool-cycle benchmarks (issue 11 targets): `cargo bench --bench cycle --features lua`.
//!
//! - `cycle/one_tool_10mb`: one cycle on the 10 MB `gen_chat.py` transcript with one new,
//!   approved call of a trivial tool appended at the end: Phase 1 (placeholder), Phase 2 (the
//!   call, its result). The transcript is parsed once before timing; the cycle re-parses only
//!   what its edits touch. Target ≤ 5 ms.
//! - `cycle/hundred_tools`: 100 calls of a trivial tool in one assistant message,
//!   `max_concurrent = 0`, on a short transcript. Target ≤ 20 ms for the whole cycle.
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

#[path = "common/transcript.rs"]
mod transcript;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion};
use flemma::config::{Config, Layer};
use flemma::tools::{
    Executor, MemoryConversation, ToolDefinition, ToolOutput, ToolRegistry, tool_fn,
};
use serde_json::json;

fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(tool_fn(
        ToolDefinition::builder("noop", "Does nothing.")
            .expect("name")
            .build()
            .expect("definition"),
        |_, _| ToolOutput::text("ok"),
    ));
    registry
}

fn config(max_concurrent: u64) -> Config {
    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools.auto_approve", json!(["noop"]))
        .expect("auto_approve");
    config
        .set(
            Layer::Runtime,
            "tools.max_concurrent",
            json!(max_concurrent),
        )
        .expect("max_concurrent");
    config
}

fn calls(from: usize, count: usize) -> String {
    let mut text = String::from("\n@Assistant:\n");
    for i in from..from + count {
        let _ = write!(
            text,
            "**Tool Use:** `noop` (`toolu_bench_{i}`)\n```json\n{{}}\n```\n"
        );
    }
    text
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let base = transcript::transcript();
    let mut group = c.benchmark_group("cycle");

    group.bench_function("one_tool_10mb", |b| {
        b.iter_batched(
            || {
                let conversation = Arc::new(MemoryConversation::new(base.clone()));
                let executor = Executor::builder(conversation, registry())
                    .config(config(2))
                    .build();
                runtime.block_on(async {
                    // Parse once (and settle whatever the generated transcript holds), then
                    // append the call the way a streamed response does.
                    executor.cycle().await.expect("warm-up cycle");
                    executor.append_lines(&calls(0, 1)).await.expect("append");
                });
                executor
            },
            |executor| {
                let report = runtime.block_on(executor.cycle()).expect("cycle");
                assert_eq!(report.completed.len(), 1);
                executor
            },
            BatchSize::PerIteration,
        );
    });

    let short = "@You:\nRun them all.\n".to_owned() + &calls(0, 100);
    group.bench_function("hundred_tools", |b| {
        b.iter_batched(
            || {
                let conversation = Arc::new(MemoryConversation::new(short.clone()));
                Executor::builder(conversation, registry())
                    .config(config(0))
                    .build()
            },
            |executor| {
                let report = runtime.block_on(executor.cycle()).expect("cycle");
                assert_eq!(report.completed.len(), 100);
                executor
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
    c.final_summary();
}
