//! Built-in tool benchmarks, each against the process the spec's backend runs, in the same
//! run and on the same tree.
//!
//! - `tools/grep`: the in-process `grep` over a tree of at least 200 MB of Rust sources (no
//!   limit reached), against `tools/rg`: `rg -n --no-messages <pattern> --glob !<exclude>… .`
//!   with the same pattern and the default excludes, its output read from a pipe.
//! - `tools/find`: the in-process `find` of `*.rs` over the same tree (no limit reached),
//!   against `tools/fdfind`: `fdfind --type f --color never --exclude <exclude>… --glob '*.rs' .`.
//!
//! Before criterion's runs, each pair is also timed alternately (15 runs each, medians
//! printed), which a shared machine's changing load disturbs less.
//! - `tools/bash_echo`: the `bash` tool running `echo hi`, from `execute` to the result:
//!   pseudo-terminal, spawn, wait, the check that nothing is left running, the result text.
//! - `tools/bash_echo_bwrap`: the same wrapped by bubblewrap (skipped, with a note on stderr,
//!   where bubblewrap is missing or cannot create its namespaces).
//!
//! The tree is `target/bench-tools/tree`: the files of the Cargo registry's unpacked sources
//! (`$CARGO_HOME/registry/src`), hard-linked (copied where links fail) and repeated until
//! 200 MB, leaving out hidden files and directories the default excludes skip, so every byte
//! is searched. It is built on the first run and removed at the end unless
//! `FLEMMA_BENCH_KEEP_TREE` is set. A peer that is not installed is skipped.
#![allow(
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors and reports its tree"
)]

use std::hint::black_box;
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use criterion::Criterion;
use flemma::builtins::Bwrap;
use flemma::builtins::{Find, Grep};
use flemma::core::sandbox::{SandboxBackend, SandboxPolicy};
use flemma::core::{ExecutionContext, Tool, ToolOutput};
use flemma::runtime::{ToolRegistry, register_builtins};
use serde_json::json;

const TREE_BYTES: u64 = 200 * 1024 * 1024;
/// The default `exclude` list of `grep` and `find` (from the options' defaults), which the
/// peers get as their own flags.
static EXCLUDES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    flemma::config::Config::new()
        .options()
        .expect("defaults")
        .tools
        .grep
        .exclude
});
/// A regex with a few hundred matches in typical Rust sources.
const PATTERN: &str = r"fn \w+_unchecked\(";
const GLOB: &str = "*.rs";

fn registry_sources() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cargo"),
        PathBuf::from,
    );
    home.join("registry/src")
}

fn skipped(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with('.') || EXCLUDES.iter().any(|x| *x == name)
}

/// Links (or copies) the files below `from` into `to`; returns the bytes added, stopping once
/// `total` reaches [`TREE_BYTES`].
fn fill(from: &Path, to: &Path, total: &mut u64) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        if *total >= TREE_BYTES {
            return;
        }
        if skipped(&entry.file_name()) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir_all(&target).expect("tree dir");
            fill(&entry.path(), &target, total);
        } else if kind.is_file() {
            let linked = std::fs::hard_link(entry.path(), &target).is_ok()
                || std::fs::copy(entry.path(), &target).is_ok();
            if linked {
                *total += entry.metadata().map_or(0, |m| m.len());
            }
        }
    }
}

fn tree() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-tools/tree");
    let done = dir.join("complete");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let sources = registry_sources();
        let mut total = 0;
        for copy in 0.. {
            let before = total;
            let to = dir.join(format!("copy{copy}"));
            std::fs::create_dir_all(&to).expect("tree dir");
            fill(&sources, &to, &mut total);
            assert!(total > before, "no sources in {}", sources.display());
            if total >= TREE_BYTES {
                break;
            }
        }
        std::fs::write(&done, total.to_string()).expect("marker");
    }
    let bytes = std::fs::read_to_string(&done).expect("marker");
    eprintln!("tools: tree {} of {bytes} bytes", dir.display());
    dir
}

/// Removes the tree (and its empty parent) unless `FLEMMA_BENCH_KEEP_TREE` is set.
fn remove(tree: &Path) {
    if std::env::var_os("FLEMMA_BENCH_KEEP_TREE").is_none() {
        let _ = std::fs::remove_dir_all(tree);
        let _ = tree.parent().map(std::fs::remove_dir);
    }
}

fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs a peer, its output read from a pipe.
fn run(program: &str, args: &[String], cwd: &Path) -> Vec<u8> {
    Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stderr(Stdio::null())
        .output()
        .expect("peer")
        .stdout
}

/// Times `ours` and `peer` alternately, 15 times each, and prints the medians and their
/// ratio: on a shared machine, load that changes between criterion's measurement windows
/// moves both sides alike here.
fn paired(name: &str, mut ours: impl FnMut(), mut peer: impl FnMut()) {
    let mut a = Vec::new();
    let mut b = Vec::new();
    for _ in 0..15 {
        let start = std::time::Instant::now();
        ours();
        a.push(start.elapsed());
        let start = std::time::Instant::now();
        peer();
        b.push(start.elapsed());
    }
    a.sort_unstable();
    b.sort_unstable();
    let (a, b) = (a[a.len() / 2], b[b.len() / 2]);
    eprintln!(
        "tools: paired {name}: medians {a:.1?} / {b:.1?} = {:.2}x",
        a.as_secs_f64() / b.as_secs_f64()
    );
}

fn text(output: &ToolOutput) -> String {
    assert!(output.is_success(), "{output:?}");
    output.result_text()
}

fn benches(c: &mut Criterion) {
    let tree = tree();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let ctx = |tool: &str| {
        ExecutionContext::builder(
            "toolu_bench".parse().expect("id"),
            tool.parse().expect("name"),
        )
        .cwd(&tree)
        .timeout(Duration::from_secs(600))
        .build()
        .expect("context")
    };
    let grep = Grep::new().expect("grep");
    let grep_ctx = ctx("grep");
    let grep_input = json!({"label": "bench", "pattern": PATTERN, "path": null, "glob": null, "limit": 1_000_000});
    let find = Find::new().expect("find");
    let find_ctx = ctx("find");
    let find_input = json!({"label": "bench", "pattern": GLOB, "path": null, "limit": 10_000_000});

    let rg_args: Vec<String> = ["-n", "--no-messages", PATTERN]
        .into_iter()
        .map(str::to_owned)
        .chain(
            EXCLUDES
                .iter()
                .flat_map(|x| ["--glob".to_owned(), format!("!{x}")]),
        )
        .chain([".".to_owned()])
        .collect();
    let fd_args: Vec<String> = ["--type", "f", "--color", "never"]
        .into_iter()
        .map(str::to_owned)
        .chain(
            EXCLUDES
                .iter()
                .flat_map(|x| ["--exclude".to_owned(), x.clone()]),
        )
        .chain(["--glob", GLOB, "."].map(str::to_owned))
        .collect();

    // The two sides must do the same work: same counts.
    let ours = text(&runtime.block_on(grep.execute(grep_input.clone(), &grep_ctx)));
    eprintln!(
        "tools: grep {PATTERN:?}: {}",
        ours.lines().last().unwrap_or_default()
    );
    if installed("rg") {
        eprintln!(
            "tools: rg: {} lines",
            run("rg", &rg_args, &tree).lines().count()
        );
    }
    let ours = text(&runtime.block_on(find.execute(find_input.clone(), &find_ctx)));
    eprintln!(
        "tools: find {GLOB:?}: {} lines, last {:?}",
        ours.lines().count(),
        ours.lines().last()
    );
    if installed("fdfind") {
        eprintln!(
            "tools: fdfind: {} lines",
            run("fdfind", &fd_args, &tree).lines().count()
        );
    }

    if installed("rg") {
        paired(
            "grep/rg",
            || drop(runtime.block_on(grep.execute(grep_input.clone(), &grep_ctx))),
            || drop(run("rg", &rg_args, &tree)),
        );
    }
    if installed("fdfind") {
        paired(
            "find/fdfind",
            || drop(runtime.block_on(find.execute(find_input.clone(), &find_ctx))),
            || drop(run("fdfind", &fd_args, &tree)),
        );
    }

    let mut group = c.benchmark_group("tools");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(3));
    group.measurement_time(Duration::from_secs(20));
    group.bench_function("grep", |b| {
        b.iter(|| runtime.block_on(grep.execute(black_box(grep_input.clone()), &grep_ctx)));
    });
    if installed("rg") {
        group.bench_function("rg", |b| b.iter(|| run("rg", black_box(&rg_args), &tree)));
    }
    group.bench_function("find", |b| {
        b.iter(|| runtime.block_on(find.execute(black_box(find_input.clone()), &find_ctx)));
    });
    if installed("fdfind") {
        group.bench_function("fdfind", |b| {
            b.iter(|| run("fdfind", black_box(&fd_args), &tree));
        });
    }
    group.finish();

    remove(&tree);
}

fn bash_tool() -> Arc<dyn Tool> {
    let registry = ToolRegistry::new();
    register_builtins(&registry).expect("built-ins register");
    registry.get("bash").expect("bash is built in")
}

fn bash_context(sandbox: flemma::core::sandbox::Sandbox) -> ExecutionContext {
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
fn bwrap_sandbox() -> Option<flemma::core::sandbox::Sandbox> {
    let options = flemma::config::Config::new()
        .options()
        .expect("defaults")
        .sandbox;
    if let Err(error) = Bwrap.available(&options) {
        eprintln!("tools/bash_echo_bwrap skipped: {error}");
        return None;
    }
    let policy = SandboxPolicy {
        conversation: None,
        rw_paths: vec![std::env::temp_dir()],
        read_only: vec![],
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
    Some(flemma_builtins::sandbox_backends().sandbox(&options, policy))
}

fn bash_benches(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let tool = bash_tool();
    let input = serde_json::json!({"label": "bench", "command": "echo hi", "timeout": null});
    let expected = ToolOutput::text("hi");

    let ctx = bash_context(flemma::core::sandbox::Sandbox::disabled());
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

criterion::criterion_group!(group, benches, bash_benches);
criterion::criterion_main!(group);
