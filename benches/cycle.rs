//! Tool-cycle benchmarks (issue 11 targets): `cargo bench --bench cycle --features lua`.
//!
//! - `cycle/one_tool_10mb`: one cycle on the 10 MB `gen_chat.py` transcript with one new,
//!   approved call of a trivial tool appended at the end: Phase 1 (placeholder), Phase 2 (the
//!   call, its result). The transcript is parsed once before timing; the cycle re-parses only
//!   what its edits touch. Target ≤ 5 ms.
//! - `cycle/hundred_tools`: 100 calls of a trivial tool in one assistant message,
//!   `max_concurrent = 0`, on a short transcript. Target ≤ 20 ms for the whole cycle.
//! - `cycle/ten_thousand_tools/N` (issue 19): N calls of the same trivial registered tool
//!   (`noop`, which returns `ok` without touching the system) in one assistant message, one
//!   `Executor::cycle`, `max_concurrent = 0`, on a `MemoryConversation`. A registered tool
//!   rather than `ls` isolates the executor (placeholders, plan, claims, one result edit per
//!   call, re-parses): what is left per call is the executor's own cost. Throughput is per
//!   call, so criterion's `elem/s` compares the sizes directly; a flat per-call cost means
//!   the cycle is linear. Target (later): ≤ 1 s for 10,000 calls, flat per-call cost. Sizes:
//!   `FLEMMA_BENCH_CYCLE_SIZES` (comma-separated counts, empty for none). The default is
//!   `100,1000` while the cycle is quadratic: one cycle of 10,000 calls took 107 to 154 s
//!   (71 s of CPU) before the issue-19 refactor, so `FLEMMA_BENCH_CYCLE_SIZES=100,1000,10000`
//!   (the target's sizes) takes about half an hour until then.
//! - `cycle/ten_thousand_tools_file/N`: the same on a `FileConversation` in `target/` (the
//!   disk, not a tmpfs), as `flemma cycle FILE` runs it: every edit reads the file back and
//!   writes it atomically (temporary file, fsync, rename), and calls are claimed in the
//!   store's claims directory. Sizes: `FLEMMA_BENCH_CYCLE_FILE_SIZES` (default `100`; each
//!   call costs two fsyncs and a rewrite of the whole file, so 500 calls take seconds).
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

#[path = "common/transcript.rs"]
mod transcript;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Bencher, BenchmarkId, Criterion, Throughput};
use flemma::config::{Config, Layer};
use flemma::core::Conversation;
use flemma::core::{ToolDefinition, ToolOutput, tool_fn};
use flemma::runtime::{Executor, FileConversation, MemoryConversation, ToolRegistry};
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

/// The sizes named by `var` (comma-separated counts; empty for none), else `default`.
fn sizes(var: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(var) {
        Ok(list) => list
            .split(',')
            .filter(|n| !n.trim().is_empty())
            .map(|n| n.trim().parse().expect("a comma-separated list of counts"))
            .collect(),
        Err(_) => default.to_vec(),
    }
}

/// An executor of `noop` on `conversation`.
fn executor(conversation: Arc<dyn Conversation>, max_concurrent: u64) -> Executor {
    Executor::builder(conversation, registry())
        .config(config(max_concurrent))
        .build()
}

/// Times one cycle of each executor `setup` gives (set-up not timed); each cycle completes
/// `count` calls.
fn bench_cycle(
    b: &mut Bencher<'_>,
    runtime: &tokio::runtime::Runtime,
    count: usize,
    setup: impl FnMut() -> Executor,
) {
    b.iter_batched(
        setup,
        |executor| {
            let report = runtime.block_on(executor.cycle()).expect("cycle");
            assert_eq!(report.completed.len(), count);
            executor
        },
        BatchSize::PerIteration,
    );
}

/// `count` calls of `noop` in one assistant message after one user message.
fn many(count: usize) -> String {
    "@You:\nRun them all.\n".to_owned() + &calls(0, count)
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
        bench_cycle(b, &runtime, 1, || {
            let executor = executor(Arc::new(MemoryConversation::new(base.clone())), 2);
            runtime.block_on(async {
                // Parse once (and settle whatever the generated transcript holds), then
                // append the call the way a streamed response does.
                executor.cycle().await.expect("warm-up cycle");
                executor
                    .append_lines(&calls(0, 1), flemma::core::Durability::Durable)
                    .await
                    .expect("append");
            });
            executor
        });
    });

    let short = many(100);
    group.bench_function("hundred_tools", |b| {
        bench_cycle(b, &runtime, 100, || {
            executor(Arc::new(MemoryConversation::new(short.clone())), 0)
        });
    });
    group.finish();

    many_calls(&mut c, &runtime);
    c.final_summary();
}

/// Issue 19: the cost per call as the number of calls in one message grows, in memory and in
/// a file.
fn many_calls(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("cycle/ten_thousand_tools");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    for count in sizes("FLEMMA_BENCH_CYCLE_SIZES", &[100, 1_000]) {
        let text = many(count);
        group.throughput(Throughput::Elements(count as u64));
        group.bench_function(BenchmarkId::from_parameter(count), |b| {
            bench_cycle(b, runtime, count, || {
                executor(Arc::new(MemoryConversation::new(text.clone())), 0)
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("cycle/ten_thousand_tools_file");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-cycle");
    let _ = std::fs::remove_dir_all(&root);
    let mut run = 0_usize;
    for count in sizes("FLEMMA_BENCH_CYCLE_FILE_SIZES", &[100]) {
        let text = many(count);
        group.throughput(Throughput::Elements(count as u64));
        group.bench_function(BenchmarkId::from_parameter(count), |b| {
            bench_cycle(b, runtime, count, || {
                // A fresh directory each time: no store or claims left from a run before.
                run += 1;
                let dir = root.join(run.to_string());
                std::fs::create_dir_all(&dir).expect("bench directory");
                let file = dir.join("many.chat");
                std::fs::write(&file, &text).expect("transcript");
                executor(Arc::new(FileConversation::new(file)), 0)
            });
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&root);
}
