//! The whole program as users run it (issue 19): `cargo bench -p flemma-cli --bench run`.
//!
//! Each iteration starts the release `flemma` binary as a process,
//! `flemma run FILE --provider anthropic` against a local mock model server
//! (`support/mock_model.rs`: `127.0.0.1`, an ephemeral port, `FLEMMA_BASE_URL`), and waits for
//! it to exit. The server answers N tool turns, each a line of text and one `bash` call of
//! `echo hi`, then a final text, in the recorded Anthropic streams' event format. FILE is a
//! fresh one-message conversation in `target/bench-run/` (on the disk, not a tmpfs) for every
//! run, whose Lua frontmatter auto-approves `bash`
//! (`flemma.opt.tools.auto_approve:append("bash")`); stdout and stderr go to `/dev/null` (no
//! terminal: plain status lines, no spinner). `FLEMMA_BENCH_RUN_DIR=/dev/shm` puts the
//! conversations on a tmpfs instead, where `fsync` costs nothing: the difference is what the
//! transcript's durable writes cost on this disk. `FLEMMA_BENCH_RUN_CHAT=FILE` runs a long
//! conversation instead (FILE with the request appended as a last `@You:` message; its
//! frontmatter must approve `bash`; an absolute path, since benches run in `flemma-cli/`),
//! e.g. `$PWD/target/bench-1000000-7.chat` of the session bench.
//!
//! - `run/turns_0_sandbox_off`, `run/turns_20_sandbox_off`: N = 0 and N = 20 with
//!   `sandbox.enabled=false`.
//! - `run/turns_0_sandbox_on`, `run/turns_20_sandbox_on`: the same with the sandbox on
//!   (bubblewrap; skipped, with a note, when it cannot run here).
//! - `run/bare_bash`: a bare `bash -c 'echo hi'` process, timed the same way (spawn, wait).
//! - `run/bare_bwrap_bash`: `bwrap … bash -c 'echo hi'` with the flags the bash tool uses for
//!   the same conversation (the library's `Bwrap::wrap` of the conversation's policy).
//!
//! The cost of one tool turn is (`turns_20` − `turns_0`) / 20; target (later): at most the
//! bare spawn + 1.5 ms. Before criterion's runs the bench times every case alternately
//! (`FLEMMA_BENCH_RUN_PAIRED` rounds, default 7; 0 skips it) and prints the medians and the
//! per-turn costs on stderr, which the shared machine's changing load disturbs less than
//! criterion's back-to-back windows.
#![allow(
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors and reports on stderr"
)]

#[path = "support/mock_model.rs"]
mod mock_model;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion};
use flemma::builtins::Bwrap;
use flemma::core::sandbox::{SandboxBackend as _, SandboxPolicy};
use mock_model::MockModel;

const FLEMMA: &str = env!("CARGO_BIN_EXE_flemma");
/// A conversation as users write them: a Lua frontmatter (evaluated for every cycle and every
/// request) approving `bash`, one message.
const CHAT: &str =
    "```lua\nflemma.opt.tools.auto_approve:append(\"bash\")\n```\n@You:\nSay hi through bash.\n";

/// One way of running a case.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    turns: u32,
    sandbox: bool,
}

/// A scratch directory per run, under `target/bench-run/` (or
/// `$FLEMMA_BENCH_RUN_DIR/flemma-bench-run/`).
struct Scratch {
    root: PathBuf,
    next: usize,
    /// The conversation every run starts from.
    text: String,
}

impl Scratch {
    fn new() -> Self {
        let root = std::env::var_os("FLEMMA_BENCH_RUN_DIR").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-run"),
            |dir| PathBuf::from(dir).join("flemma-bench-run"),
        );
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("bench directory");
        // `FLEMMA_BENCH_RUN_CHAT`: a long conversation instead, with the request appended.
        let text = std::env::var_os("FLEMMA_BENCH_RUN_CHAT").map_or_else(
            || CHAT.to_owned(),
            |path| {
                let text =
                    std::fs::read_to_string(path).expect("FLEMMA_BENCH_RUN_CHAT is readable");
                format!("{}\n\n@You:\nSay hi through bash.\n", text.trim_end())
            },
        );
        Self {
            root,
            next: 0,
            text,
        }
    }

    /// A fresh conversation file; the previous run's directory goes.
    fn chat(&mut self) -> PathBuf {
        let _ = std::fs::remove_dir_all(self.root.join(self.next.to_string()));
        self.next += 1;
        let dir = self.root.join(self.next.to_string());
        std::fs::create_dir_all(&dir).expect("run directory");
        let file = dir.join("bench.chat");
        std::fs::write(&file, &self.text).expect("conversation");
        file
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The `flemma run` command of `case` on `chat`.
fn flemma_run(case: Case, chat: &Path, server: &MockModel) -> Command {
    let mut command = Command::new(FLEMMA);
    command
        .arg("run")
        .arg(chat)
        .args(["--provider", "anthropic", "--max-turns", "1000"])
        .args([
            "--set",
            if case.sandbox {
                "sandbox.enabled=true"
            } else {
                "sandbox.enabled=false"
            },
        ])
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("FLEMMA_BASE_URL", server.base_url())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

/// Runs `command` to its end with its output discarded.
fn run_quietly(mut command: Command) {
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the command starts");
    assert!(status.success(), "{command:?} failed: {status}");
}

/// Runs `case` once with its output kept, and checks it did what the bench claims.
fn check(case: Case, scratch: &mut Scratch, server: &MockModel) {
    let chat = scratch.chat();
    let before = server.requests();
    let out = flemma_run(case, &chat, server)
        .output()
        .expect("flemma starts");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", case.name);
    assert_eq!(
        server.requests() - before,
        case.turns as usize + 1,
        "{stderr}"
    );
    let transcript = std::fs::read_to_string(&chat).expect("transcript");
    let tail = &transcript[transcript.rfind("Say hi through bash.").unwrap_or(0)..];
    assert_eq!(
        tail.matches("**Tool Result:** `toolu_mock_").count(),
        case.turns as usize,
        "{tail}"
    );
    assert_eq!(
        tail.matches("```\nhi\n```").count(),
        case.turns as usize,
        "{tail}"
    );
    assert!(tail.ends_with("It said hi.\n\n@You:\n"), "{tail}");
}

/// `bwrap … bash -c 'echo hi'` as the bash tool wraps it for a conversation in `dir`.
fn bwrap_argv(dir: &Path) -> Option<Vec<String>> {
    let options = flemma::config::Config::new()
        .options()
        .expect("defaults")
        .sandbox;
    if let Err(error) = Bwrap.available(&options) {
        eprintln!("run/*_sandbox_on skipped: {error}");
        return None;
    }
    let chat = dir.join("bench.chat");
    let store = dir.join(".flemma");
    let policy = SandboxPolicy::for_conversation(&options, Some(&chat), Some(&store));
    let argv = Bwrap
        .wrap(
            &policy,
            &options,
            ["bash", "-c", "echo hi"].map(String::from).to_vec(),
        )
        .expect("bwrap argv");
    let probe = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        eprintln!("run/*_sandbox_on skipped: bubblewrap cannot create namespaces here");
        return None;
    }
    Some(argv)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The servers: one answering 20 tool turns, one answering at once (each by the request
/// alone, so one server serves every run of its case).
struct Servers {
    twenty: MockModel,
    zero: MockModel,
}

impl Servers {
    fn of(&self, case: Case) -> &MockModel {
        if case.turns == 0 {
            &self.zero
        } else {
            &self.twenty
        }
    }
}

/// The cases, the sandboxed ones only when bubblewrap runs here.
fn cases(sandbox: bool) -> Vec<Case> {
    let all = [
        ("turns_0_sandbox_off", 0, false),
        ("turns_20_sandbox_off", 20, false),
        ("turns_0_sandbox_on", 0, true),
        ("turns_20_sandbox_on", 20, true),
    ];
    all.into_iter()
        .filter(|&(_, _, on)| sandbox || !on)
        .map(|(name, turns, sandbox)| Case {
            name,
            turns,
            sandbox,
        })
        .collect()
}

fn bare() -> Command {
    let mut command = Command::new("bash");
    command.args(["-c", "echo hi"]);
    command
}

fn bare_bwrap(argv: &[String]) -> Command {
    let mut command = Command::new(&argv[0]);
    command.args(&argv[1..]);
    command
}

fn timed(command: Command) -> Duration {
    let start = Instant::now();
    run_quietly(command);
    start.elapsed()
}

/// Times every case in turn, `rounds` times, and prints the medians and the cost per turn.
fn paired(
    rounds: usize,
    cases: &[Case],
    scratch: &mut Scratch,
    servers: &Servers,
    bwrap: Option<&[String]>,
) {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    let (mut bash, mut wrapped) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (i, &case) in cases.iter().enumerate() {
            times[i].push(timed(flemma_run(case, &scratch.chat(), servers.of(case))));
        }
        bash.push(timed(bare()));
        if let Some(argv) = bwrap {
            wrapped.push(timed(bare_bwrap(argv)));
        }
    }
    let medians: Vec<f64> = times.into_iter().map(|t| ms(median(t))).collect();
    eprintln!("paired medians of {rounds} rounds:");
    for (case, time) in cases.iter().zip(&medians) {
        eprintln!("  run/{}: {time:.1} ms", case.name);
    }
    for (pair, time) in cases.chunks(2).zip(medians.chunks(2)) {
        let per_turn = (time[1] - time[0]) / f64::from(pair[1].turns);
        let sandbox = if pair[0].sandbox { "on" } else { "off" };
        eprintln!("  per tool turn, sandbox {sandbox}: {per_turn:.2} ms");
    }
    eprintln!("  run/bare_bash: {:.2} ms", ms(median(bash)));
    if bwrap.is_some() {
        eprintln!("  run/bare_bwrap_bash: {:.2} ms", ms(median(wrapped)));
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let mut scratch = Scratch::new();
    let servers = Servers {
        twenty: MockModel::start(20).expect("mock server"),
        zero: MockModel::start(0).expect("mock server"),
    };
    // The bare `bwrap` runs bind a conversation's directory of their own, which stays.
    let fixed = scratch.root.join("bwrap");
    std::fs::create_dir_all(&fixed).expect("bwrap directory");
    std::fs::write(fixed.join("bench.chat"), CHAT).expect("conversation");
    let bwrap = bwrap_argv(&fixed);
    let cases = cases(bwrap.is_some());
    for &case in &cases {
        check(case, &mut scratch, servers.of(case));
    }
    let rounds: usize = std::env::var("FLEMMA_BENCH_RUN_PAIRED")
        .ok()
        .map_or(7, |n| {
            n.parse().expect("FLEMMA_BENCH_RUN_PAIRED is a count")
        });
    if rounds > 0 {
        paired(rounds, &cases, &mut scratch, &servers, bwrap.as_deref());
    }

    let mut group = c.benchmark_group("run");
    for &case in &cases {
        group.bench_function(case.name, |b| {
            b.iter_batched(
                || flemma_run(case, &scratch.chat(), servers.of(case)),
                run_quietly,
                BatchSize::PerIteration,
            );
        });
    }
    group.bench_function("bare_bash", |b| b.iter(|| run_quietly(bare())));
    if let Some(argv) = &bwrap {
        group.bench_function("bare_bwrap_bash", |b| {
            b.iter(|| run_quietly(bare_bwrap(argv)));
        });
    }
    group.finish();
    drop(scratch);
    c.final_summary();
}
