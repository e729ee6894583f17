//! Approval benchmarks: one decision through the default chain with 50 rules in
//! `tools.auto_approve` (45 names, 5 globs).
//!
//! - `approval/exact_rule`: a tool approved by an exact name.
//! - `approval/glob_rule`: a tool approved by a glob.
//! - `approval/no_rule`: a sandbox-safe tool no rule matches, with no sandbox backend: every
//!   built-in resolver runs and the default (require approval) decides.
//! - `approval/alternating_four`: the glob case in four conversations (four options states,
//!   each with its own 50 rules) decided in turn through one chain, as a host running several
//!   conversations does; each list must stay compiled.
//!
//! The built-in resolvers never wait, so each decision is polled once (`now_or_never`).
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::hint::black_box;

use criterion::Criterion;
use flemma::approval::{ApprovalContext, Chain, Decision, ToolCall};
use flemma::config::{Config, Layer, Options};
use flemma::ids::{ToolName, ToolUseId};
use futures_util::FutureExt as _;
use serde_json::json;

/// Options with 50 `auto_approve` rules; `variant` changes the names, not the globs.
fn conversation(variant: usize) -> (Config, Options) {
    let mut config = Config::new();
    let mut rules: Vec<String> = (0..45).map(|i| format!("tool_{variant}_{i}")).collect();
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
    (config, options)
}

fn decide(chain: &Chain, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Decision {
    chain
        .decide(call, ctx)
        .now_or_never()
        .expect("the built-in resolvers never wait")
        .decision
}

fn benches(c: &mut Criterion) {
    let tools = |name: &ToolName| *name == "bash";
    let conversations: Vec<(Config, Options)> = (0..4).map(conversation).collect();
    let contexts: Vec<ApprovalContext<'_>> = conversations
        .iter()
        .map(|(config, options)| ApprovalContext {
            config,
            options,
            tools: &tools,
            sandbox: &false,
        })
        .collect();
    let ctx = &contexts[0];
    let chain = Chain::with_builtins();
    let input = json!({"command": "cargo test", "label": "tests"});
    let id = ToolUseId::new("toolu_01").expect("id");

    let mut group = c.benchmark_group("approval");
    for (bench, tool, expected) in [
        ("exact_rule", "tool_0_37", Decision::Approve),
        ("glob_rule", "mcp.fs.read", Decision::Approve),
        ("no_rule", "bash", Decision::RequireApproval),
    ] {
        let tool = ToolName::new(tool).expect("name");
        let call = ToolCall {
            name: &tool,
            input: &input,
            id: Some(&id),
        };
        assert_eq!(decide(&chain, &call, ctx), expected, "{bench}");
        group.bench_function(bench, |b| {
            b.iter(|| decide(&chain, black_box(&call), black_box(ctx)));
        });
    }

    let tool = ToolName::new("mcp.fs.read").expect("name");
    let call = ToolCall {
        name: &tool,
        input: &input,
        id: Some(&id),
    };
    for ctx in &contexts {
        assert_eq!(decide(&chain, &call, ctx), Decision::Approve);
    }
    let mut turn = 0;
    group.bench_function("alternating_four", |b| {
        b.iter(|| {
            turn = (turn + 1) % contexts.len();
            decide(&chain, black_box(&call), black_box(&contexts[turn]))
        });
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
