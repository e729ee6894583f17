//! Approval benchmarks: one decision through the default chain with 50 rules in
//! `tools.auto_approve` (45 names, 5 globs).
//!
//! - `approval/exact_rule`: a tool approved by an exact name.
//! - `approval/glob_rule`: a tool approved by a glob.
//! - `approval/no_rule`: a sandbox-safe tool no rule matches, with no sandbox backend: every
//!   built-in resolver runs and the default (require approval) decides.
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::hint::black_box;

use criterion::Criterion;
use flemma::approval::{ApprovalContext, Chain, ToolCall, ToolName, ToolUseId};
use flemma::config::{Config, Layer};
use serde_json::json;

fn benches(c: &mut Criterion) {
    let mut config = Config::new();
    let mut rules: Vec<String> = (0..45).map(|i| format!("tool_{i}")).collect();
    rules.extend(
        [
            "mcp.github.*",
            "mcp.fs.*",
            "flemma.*",
            "lint_*",
            "*_readonly",
        ]
        .map(str::to_owned),
    );
    config
        .set(Layer::Setup, "tools.auto_approve", json!(rules))
        .expect("rules");
    let options = config.options().expect("options");
    assert_eq!(options.tools.auto_approve.len(), 50);
    let tools = |name: &ToolName| *name == "bash";
    let ctx = ApprovalContext {
        config: &config,
        options: &options,
        tools: &tools,
        sandbox: &false,
    };
    let chain = Chain::with_builtins();
    let input = json!({"command": "cargo test", "label": "tests"});
    let id = ToolUseId::new("toolu_01").expect("id");

    let mut group = c.benchmark_group("approval");
    for (bench, tool) in [
        ("exact_rule", "tool_37"),
        ("glob_rule", "mcp.fs.read"),
        ("no_rule", "bash"),
    ] {
        let tool = ToolName::new(tool).expect("name");
        let call = ToolCall {
            name: &tool,
            input: &input,
            id: Some(&id),
        };
        chain.decide(&call, &ctx);
        group.bench_function(bench, |b| {
            b.iter(|| chain.decide(black_box(&call), black_box(&ctx)));
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
