//! Built-in tool benchmarks.
//!
//! - `tools/bash_echo`: the `bash` tool running `echo hi`, from `execute` to the result:
//!   pseudo-terminal, spawn, wait, the check that nothing is left running, the result text.
//! - `tools/bash_echo_bwrap`: the same wrapped by bubblewrap (skipped, with a note on stderr,
//!   where bubblewrap is missing or cannot create its namespaces).
#![allow(
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors and says what it skips"
)]

use std::sync::Arc;

use criterion::Criterion;
use flemma::tools::sandbox::{Bwrap, SandboxBackend, SandboxBackends, SandboxPolicy};
use flemma::tools::{ExecutionContext, Tool, ToolOutput, ToolRegistry, register_builtins};

fn bash_tool() -> Arc<dyn Tool> {
    let registry = ToolRegistry::new();
    register_builtins(&registry).expect("built-ins register");
    registry.get("bash").expect("bash is built in")
}

fn bash_context(sandbox: flemma::tools::sandbox::Sandbox) -> ExecutionContext {
    ExecutionContext::builder(
        "toolu_bench".parse().expect("id"),
        "bash".parse().expect("name"),
    )
    .cwd(std::env::temp_dir())
    .sandbox(sandbox)
    .build()
    .expect("context")
}

/// The bubblewrap sandbox, when it can run here.
fn bwrap_sandbox() -> Option<flemma::tools::sandbox::Sandbox> {
    let options = flemma::config::Config::new()
        .options()
        .expect("defaults")
        .sandbox;
    if let Err(error) = Bwrap.available(&options) {
        eprintln!("tools/bash_echo_bwrap skipped: {error}");
        return None;
    }
    let policy = SandboxPolicy {
        rw_paths: vec![std::env::temp_dir()],
        network: true,
        allow_privileged: false,
    };
    let probe = std::process::Command::new("bwrap")
        .args([
            "--ro-bind",
            "/",
            "/",
            "--unshare-user",
            "--unshare-pid",
            "true",
        ])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("tools/bash_echo_bwrap skipped: bubblewrap cannot create namespaces here");
        return None;
    }
    Some(SandboxBackends::with_builtins().sandbox(&options, policy))
}

fn bash_benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let tool = bash_tool();
    let input = serde_json::json!({"label": "bench", "command": "echo hi", "timeout": null});
    let expected = ToolOutput::text("hi");

    let ctx = bash_context(flemma::tools::sandbox::Sandbox::disabled());
    assert_eq!(
        runtime.block_on(tool.execute(input.clone(), &ctx)),
        expected
    );
    c.bench_function("tools/bash_echo", |b| {
        b.iter(|| runtime.block_on(tool.execute(input.clone(), &ctx)));
    });

    if let Some(sandbox) = bwrap_sandbox() {
        let ctx = bash_context(sandbox);
        assert_eq!(
            runtime.block_on(tool.execute(input.clone(), &ctx)),
            expected
        );
        c.bench_function("tools/bash_echo_bwrap", |b| {
            b.iter(|| runtime.block_on(tool.execute(input.clone(), &ctx)));
        });
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bash_benches(&mut c);
    c.final_summary();
}
