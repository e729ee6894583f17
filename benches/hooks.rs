//! Hook benchmarks (issue 21 targets): `cargo bench --bench hooks`.
//!
//! Each case is one `Executor::cycle` over N calls of a trivial registered tool (`noop`) in
//! one assistant message, `max_concurrent = 0`, on a `MemoryConversation`, approved by
//! `tools.auto_approve`. Throughput is per call, so criterion's time per element is the cost
//! per call; a hook's cost per call is the difference to the same cycle without hooks.
//!
//! - `hooks/no_hooks/N`: no hook registered (the baseline).
//! - `hooks/in_process_no_opinion/N`: one in-process `PreToolUse` hook (`hook_fn`) that
//!   answers no opinion: it runs for every call, its verdict goes through the chain's hooks
//!   resolver. Target: ≤ 1 µs per call over `no_hooks`.
//! - `hooks/command_no_opinion/N`: one command hook (`cat > /dev/null`: the event's JSON read,
//!   exit 0, no answer) for every call: a process spawn and JSON both ways per call. Target:
//!   ≤ 5 ms per call over `no_hooks`.
//!
//! Sizes: `FLEMMA_BENCH_HOOKS_SIZES` (in-process, default `1000`) and
//! `FLEMMA_BENCH_HOOKS_COMMAND_SIZES` (command hooks, default `20`).
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use flemma::config::{Config, Layer};
use flemma::core::hooks::HookEvent;
use flemma::core::hooks::{PreToolUseAnswer, on};
use flemma::core::{ToolDefinition, ToolOutput, tool_fn};
use flemma::runtime::hooks::HookRegistration;
use flemma::runtime::hooks::{CommandHook, hook_fn};
use flemma::runtime::{Executor, MemoryConversation, ToolRegistry};
use serde_json::json;

#[derive(Clone, Copy)]
enum Hooks {
    None,
    InProcess,
    Command,
}

fn registry(hooks: Hooks) -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(tool_fn(
        ToolDefinition::builder("noop", "Does nothing.")
            .expect("name")
            .build()
            .expect("definition"),
        |_, _| ToolOutput::text("ok"),
    ));
    match hooks {
        Hooks::None => {}
        Hooks::InProcess => {
            let hook = hook_fn(on::PreToolUse, |_| PreToolUseAnswer::pass());
            registry
                .register_hook(hook.named("pass").expect("name"))
                .expect("hook");
        }
        Hooks::Command => {
            let hook = HookRegistration::new(
                "cat",
                [HookEvent::PreToolUse],
                CommandHook::new("cat > /dev/null"),
            )
            .expect("hook");
            registry.register_hook(hook).expect("hook");
        }
    }
    registry
}

fn config() -> Config {
    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools.auto_approve", json!(["noop"]))
        .expect("auto_approve");
    config
        .set(Layer::Runtime, "tools.max_concurrent", json!(0))
        .expect("max_concurrent");
    config
}

fn transcript(count: usize) -> String {
    let mut text = String::from("@You:\nGo.\n\n@Assistant:\n");
    for i in 0..count {
        let _ = write!(
            text,
            "**Tool Use:** `noop` (`toolu_bench_{i}`)\n```json\n{{}}\n```\n"
        );
    }
    text
}

fn sizes(variable: &str, default: &str) -> Vec<usize> {
    std::env::var(variable)
        .unwrap_or_else(|_| default.to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("hooks");
    group.measurement_time(Duration::from_secs(8));
    let cases = [
        (
            "no_hooks",
            Hooks::None,
            sizes("FLEMMA_BENCH_HOOKS_SIZES", "1000"),
        ),
        (
            "in_process_no_opinion",
            Hooks::InProcess,
            sizes("FLEMMA_BENCH_HOOKS_SIZES", "1000"),
        ),
        (
            "no_hooks",
            Hooks::None,
            sizes("FLEMMA_BENCH_HOOKS_COMMAND_SIZES", "20"),
        ),
        (
            "command_no_opinion",
            Hooks::Command,
            sizes("FLEMMA_BENCH_HOOKS_COMMAND_SIZES", "20"),
        ),
    ];
    for (name, hooks, sizes) in cases {
        for count in sizes {
            let text = transcript(count);
            group.throughput(Throughput::Elements(count as u64));
            group.sample_size(if matches!(hooks, Hooks::Command) {
                10
            } else {
                20
            });
            group.bench_function(BenchmarkId::new(name, count), |b| {
                b.iter_batched(
                    || {
                        let chat = Arc::new(MemoryConversation::new(text.clone()));
                        let executor = Executor::builder(chat, registry(hooks))
                            .config(config())
                            .build();
                        // Parsed before timing, as a host's conversation is.
                        runtime
                            .block_on(executor.transcript().document())
                            .expect("parse");
                        executor
                    },
                    |executor| {
                        let report = runtime.block_on(executor.cycle()).expect("cycle");
                        assert_eq!(report.completed.len(), count);
                        report
                    },
                    BatchSize::PerIteration,
                );
            });
        }
    }
    group.finish();
}

criterion::criterion_group!(group, benches);
criterion::criterion_main!(group);
