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
//! - `approval/bash_rules_1kb`: a 1 KB `bash` command of 20 simple commands, each allowed by
//!   one of 12 `tools.bash.allow` rules: the command rules parse and judge all of it.
//! - `approval/bash_rules_1kb_two_commands`: a 1 KB command of two simple commands (a commit
//!   with a long message).
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
        .map(|(config, options)| ApprovalContext::new(config, options).with_tools(&tools))
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
    bash_rules(&mut group, &chain);
    group.finish();
}

/// A 1 KB `bash` command of 20 simple commands (lists, pipes, a substitution, quotes, a
/// redirection into the project), every one allowed by one of 12 rules: the command rules read
/// all of it, then the rest of the chain runs.
fn bash_rules(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    chain: &Chain,
) {
    let mut config = Config::new();
    for rule in [
        "git status",
        "git diff *",
        "git log *",
        "cargo test *",
        "cargo build *",
        "ls *",
        "cat *",
        "grep *",
        "echo *",
        "head *",
        "wc *",
        "date *",
    ] {
        config
            .append(Layer::Setup, "tools.bash.allow", rule)
            .expect("rule");
    }
    let options = config.options().expect("options");
    let tools = |name: &ToolName| *name == "bash";
    let workspace = Project;
    let ctx = ApprovalContext::new(&config, &options)
        .with_tools(&tools)
        .with_workspace(&workspace);
    let part = "git status && cargo test -p flemma-shell -- --nocapture 2>&1 | grep -v 'warning: unused' | head -n 40; \
        echo \"built at $(date +%s)\" > /work/project/build.log; ";
    let command: String = part
        .repeat(1024 / part.len() + 1)
        .chars()
        .take(1024)
        .collect();
    // Cut at the last complete part.
    let command = &command[..=command.rfind("; ").expect("a part")];
    assert!(command.len() > 900, "{}", command.len());
    let input = json!({ "command": command });
    let tool = ToolName::new("bash").expect("name");
    let call = ToolCall {
        name: &tool,
        input: &input,
        id: None,
    };
    assert_eq!(decide(chain, &call, &ctx), Decision::Approve);
    group.bench_function("bash_rules_1kb", |b| {
        b.iter(|| decide(chain, black_box(&call), black_box(&ctx)));
    });
    // The same size in two simple commands: a commit with a long message.
    let message = "Read commands as bash does: ".to_owned()
        + &"each simple command of a list, a pipeline or a substitution, ".repeat(16);
    let command = format!("git add -A && git commit -m \"{}\"", &message[..950]);
    let input = json!({ "command": command });
    let call = ToolCall {
        name: &tool,
        input: &input,
        id: None,
    };
    // `git add` and `git commit` have no rule: the rules pass, the chain asks.
    assert_eq!(decide(chain, &call, &ctx), Decision::RequireApproval);
    group.bench_function("bash_rules_1kb_two_commands", |b| {
        b.iter(|| decide(chain, black_box(&call), black_box(&ctx)));
    });
}

/// Commands start in `/work/project` and may write under it.
struct Project;

impl flemma::approval::Workspace for Project {
    fn cwd(&self) -> Option<&std::path::Path> {
        Some(std::path::Path::new("/work/project"))
    }

    fn may_write(&self, path: &std::path::Path) -> bool {
        path.starts_with("/work/project")
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
