//! The built-in `bash` tool (spec §12.1): output, errors, timeouts, cancellation, the
//! processes it leaves behind (none, checked through `/proc`), its environment and the memory
//! a huge output takes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flemma_config::{Config, Layer, Options};
use flemma_core::sandbox::Sandbox;
use flemma_core::{ExecutionContext, Tool, ToolOutput};
use flemma_store::Store;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::scratch::Scratch;

/// A fresh directory for one test, removed when dropped.
pub(crate) fn scratch(name: &str) -> Scratch {
    Scratch::new(format!("flemma-bash-{name}-{}", std::process::id()))
}

pub(crate) fn bash() -> Arc<dyn Tool> {
    Arc::new(flemma_builtins::Bash::new().unwrap())
}

pub(crate) struct Call {
    pub(crate) options: Options,
    pub(crate) timeout: Duration,
    pub(crate) sandbox: Sandbox,
    pub(crate) cancel: CancellationToken,
    /// Last: dropped (removed) after the rest.
    pub(crate) dir: Scratch,
}

impl Call {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            options: Config::new().options().unwrap(),
            timeout: Duration::from_secs(30),
            sandbox: Sandbox::disabled(),
            cancel: CancellationToken::new(),
            dir: scratch(name),
        }
    }

    pub(crate) fn store(&self) -> Store {
        Store::new(
            &self.options.tools.store,
            Some(&self.dir.join("t.chat")),
            "1",
        )
        .unwrap()
    }

    pub(crate) fn context(&self) -> ExecutionContext {
        ExecutionContext::builder("toolu_01".parse().unwrap(), "bash".parse().unwrap())
            .cwd(self.dir.path())
            .options(Arc::new(self.options.clone()))
            .store(Arc::new(self.store()))
            .timeout(self.timeout)
            .sandbox(self.sandbox.clone())
            .cancellation(self.cancel.clone())
            .build()
            .unwrap()
    }

    pub(crate) async fn run(&self, input: Value) -> ToolOutput {
        bash().execute(input, &self.context()).await
    }

    pub(crate) async fn command(&self, command: &str) -> ToolOutput {
        self.run(json!({"label": "test", "command": command, "timeout": null}))
            .await
    }
}

fn error_text(output: &ToolOutput) -> &str {
    match output {
        ToolOutput::Failure { error, .. } => error,
        ToolOutput::Success(_) => panic!("expected a failure, got {output:?}"),
    }
}

#[tokio::test]
async fn output_is_the_terminal_text_trimmed() {
    let call = Call::new("output");
    let out = call
        .command("echo hello; echo world >&2; printf '\\033[31mred\\033[0m  \\n\\n'")
        .await;
    assert_eq!(out, ToolOutput::text("hello\nworld\nred"));
}

#[tokio::test]
async fn no_output() {
    let call = Call::new("no-output");
    assert_eq!(call.command("true").await, ToolOutput::text("(no output)"));
}

#[tokio::test]
async fn empty_command() {
    let call = Call::new("empty");
    assert_eq!(
        call.command("  ").await,
        ToolOutput::error("No command provided")
    );
}

#[tokio::test]
async fn exit_code_is_an_error_after_the_output() {
    let call = Call::new("exit");
    assert_eq!(
        call.command("echo oops; exit 3").await,
        ToolOutput::error("oops\n\nCommand exited with code 3")
    );
    assert_eq!(
        call.command("exit 2").await,
        ToolOutput::error("(no output)\n\nCommand exited with code 2")
    );
    // Killed by a signal: 128 + n, as a shell reports it.
    assert_eq!(
        call.command("kill -9 $$").await,
        ToolOutput::error("(no output)\n\nCommand exited with code 137")
    );
}

#[tokio::test]
async fn terminal_stdin_and_cwd() {
    let call = Call::new("tty");
    let out = call
        .command("[ -t 0 ] || echo stdin-not-a-tty; [ -t 1 ] && echo stdout-tty; cat; pwd")
        .await;
    assert_eq!(
        out,
        ToolOutput::text(format!(
            "stdin-not-a-tty\nstdout-tty\n{}",
            call.dir.display()
        ))
    );
}

/// The command leads a session of its own whose controlling terminal is its terminal (not
/// the host's: `/dev/tty` is the call's terminal), and starts with every signal at its
/// default and none blocked, whatever the host ignores (`SIGPIPE` for Rust's runtime, `SIGHUP`
/// under `nohup`). (Only signals 1-31 are looked at:
/// glibc's own two real-time signals, 32 and 33, may show as ignored in a fresh process.)
#[cfg(target_os = "linux")]
#[tokio::test]
async fn own_session_controlling_terminal_and_default_signals() {
    let call = Call::new("session");
    let out = call
        .command(
            "read -r _ _ _ _ sid _ tty _ < /proc/self/stat; \
             [ \"$sid\" = $$ ] && echo session-leader; \
             [ \"$tty\" != 0 ] && echo has-ctty; \
             echo via-dev-tty >/dev/tty; \
             cat /proc/self/status | while read -r k v; do \
               case $k in SigIgn:|SigBlk:) echo \"$k $(( 0x$v & 0x7fffffff ))\";; esac; \
             done; \
             yes | head -c 1 >/dev/null; echo pipe-ok",
        )
        .await;
    assert_eq!(
        out,
        ToolOutput::text("session-leader\nhas-ctty\nvia-dev-tty\nSigBlk: 0\nSigIgn: 0\npipe-ok")
    );
}

#[tokio::test]
async fn environment() {
    let mut call = Call::new("env");
    let mut config = Config::new();
    config
        .set(
            Layer::Runtime,
            "tools.bash.env",
            json!({"FOO": "bar", "PAGER": "less"}),
        )
        .unwrap();
    call.options = config.options().unwrap();
    let out = call
        .command("echo $GIT_PAGER $PAGER $FOO; echo $FLEMMA_TOOLS_STORE_PATH; test -n \"$HOME\" && echo inherited")
        .await;
    let store_dir = call.store().directory().unwrap();
    assert_eq!(
        out,
        ToolOutput::text(format!("cat less bar\n{}\ninherited", store_dir.display()))
    );
    // Mentioning the variable creates the directory first.
    assert!(store_dir.is_dir());
}

#[tokio::test]
async fn configured_shell() {
    let mut call = Call::new("shell");
    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools.bash.shell", json!("sh"))
        .unwrap();
    call.options = config.options().unwrap();
    assert_eq!(call.command("echo $0").await, ToolOutput::text("sh"));
}

#[tokio::test]
async fn timeout_singular_with_partial_output() {
    let call = Call::new("timeout1");
    let started = Instant::now();
    let out = call
        .run(json!({"label": "t", "command": "echo partial; sleep 30", "timeout": 1}))
        .await;
    assert_eq!(
        out,
        ToolOutput::error("partial\n\nCommand timed out after 1 second.")
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn timeout_plural_from_the_context() {
    let mut call = Call::new("timeout2");
    call.timeout = Duration::from_secs(2);
    assert_eq!(
        call.command("sleep 30").await,
        ToolOutput::error("Command timed out after 2 seconds.")
    );
    assert_eq!(
        call.run(json!({"label": "t", "command": "sleep 30", "timeout": 0.5}))
            .await,
        ToolOutput::error("Command timed out after 0.5 seconds.")
    );
}

#[tokio::test]
async fn a_process_ignoring_sigterm_is_killed_after_the_grace() {
    let call = Call::new("stubborn");
    let started = Instant::now();
    let out = call
        .run(json!({"label": "t", "command": "trap '' TERM; echo armed; sleep 30", "timeout": 0.5}))
        .await;
    assert_eq!(
        out,
        ToolOutput::error("armed\n\nCommand timed out after 0.5 seconds.")
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn cancel_stops_the_command() {
    let call = Call::new("cancel");
    let cancel = call.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let out = call.command("echo before; sleep 30").await;
    assert_eq!(
        out,
        ToolOutput::error("User aborted tool execution.").with_partial_output("before")
    );
}

/// The live (not zombie) processes whose command line contains `needle`.
pub(crate) fn living(needle: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.chars().next()))
            .flatten();
        if cmdline.contains(needle) && !matches!(state, Some('Z' | 'X') | None) {
            found.push((pid, cmdline));
        }
    }
    found
}

/// A command starting three sleepers that try to outlive it: a background job, a `nohup`
/// one and one in a new session (`setsid`), each recognisable by its odd duration.
pub(crate) fn escapees(tag: u32) -> (String, Vec<String>) {
    let durations: Vec<String> = (0..3).map(|i| format!("100{i}.{tag}")).collect();
    let command = format!(
        "sleep {} & nohup sleep {} >/dev/null 2>&1 & setsid sleep {} >/dev/null 2>&1 & echo started",
        durations[0], durations[1], durations[2]
    );
    (command, durations)
}

fn tag() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    std::process::id() % 10_000 * 100 + NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

pub(crate) async fn wait_until_running(durations: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while durations
        .iter()
        .any(|d| living(&format!("sleep {d}")).is_empty())
    {
        assert!(Instant::now() < deadline, "the sleepers never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn assert_none_left(durations: &[String]) {
    for d in durations {
        let left = living(&format!("sleep {d}"));
        assert!(left.is_empty(), "left running: {left:?}");
    }
}

#[tokio::test]
async fn no_process_survives_a_timeout() {
    let call = Call::new("orphans-timeout");
    let (command, durations) = escapees(tag());
    let run =
        call.run(json!({"label": "t", "command": format!("{command}; sleep 1000"), "timeout": 3}));
    let (out, ()) = tokio::join!(run, wait_until_running(&durations));
    assert_eq!(
        out,
        ToolOutput::error("started\n\nCommand timed out after 3 seconds.")
    );
    assert_none_left(&durations);
}

#[tokio::test]
async fn no_process_survives_a_cancel() {
    let call = Call::new("orphans-cancel");
    let (command, durations) = escapees(tag());
    let cancel = call.cancel.clone();
    let watch = async {
        wait_until_running(&durations).await;
        cancel.cancel();
    };
    let command = format!("{command}; sleep 1000");
    let (out, ()) = tokio::join!(call.command(&command), watch);
    assert_eq!(error_text(&out), "User aborted tool execution.");
    assert_none_left(&durations);
}

#[tokio::test]
async fn no_process_survives_the_command() {
    let call = Call::new("orphans-exit");
    let (command, durations) = escapees(tag());
    // The command gives its sleepers time to start, then exits.
    let command = format!("{command}; sleep 0.5");
    assert_eq!(call.command(&command).await, ToolOutput::text("started"));
    assert_none_left(&durations);
}

#[tokio::test]
async fn a_dropped_call_stops_its_processes() {
    let call = Call::new("orphans-drop");
    let (command, durations) = escapees(tag());
    let ctx = call.context();
    let tool = bash();
    let input = json!({"label": "t", "command": format!("{command}; sleep 1000"), "timeout": null});
    tokio::select! {
        _ = tool.execute(input, &ctx) => panic!("the command should still run"),
        () = wait_until_running(&durations) => {}
    }
    // The future is gone; its task stops the processes in the background.
    let deadline = Instant::now() + Duration::from_secs(5);
    while durations
        .iter()
        .any(|d| !living(&format!("sleep {d}")).is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "processes outlived the dropped call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn truncated_output_overflows_to_the_store() {
    let call = Call::new("overflow");
    let ctx = call.context();
    let out = bash()
        .execute(
            json!({"label": "t", "command": "seq 1 5000", "timeout": null}),
            &ctx,
        )
        .await;
    let path = call
        .store()
        .path_for(
            &"toolu_01".parse::<flemma_ids::ToolUseId>().unwrap(),
            Some(&"bash".parse().unwrap()),
        )
        .unwrap();
    let expected_tail: Vec<String> = (3001..=5000).map(|n| n.to_string()).collect();
    assert_eq!(
        out,
        ToolOutput::text(format!(
            "{}\n\n[Showing lines 3001-5000 of 5000. Full output: {}]",
            expected_tail.join("\n"),
            path.display()
        ))
    );
    let full: Vec<String> = (1..=5000).map(|n| n.to_string()).collect();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full.join("\n"));
    assert_eq!(ctx.overflow_path(), Some(path));
}

/// Resident memory of this process in KiB (`VmHWM` after a reset: the peak since).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn current_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// 200 MB of output (`FLEMMA_TEST_HUGE_OUTPUT=1000000000` for 1 GB, about five times as
/// long: some 75 s in a debug build): memory stays flat, the overflow file gets all of it,
/// the model sees the tail.
///
/// The measure is the peak resident memory of a process of its own (this test binary again,
/// running only this test), so that the other tests' memory does not count.
#[test]
fn huge_output_streams_to_the_store_in_bounded_memory() {
    const NAME: &str = "bash::huge_output_streams_to_the_store_in_bounded_memory";
    if std::env::var_os("FLEMMA_TEST_HUGE_CHILD").is_some() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(huge_output());
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([NAME, "--exact", "--test-threads=1", "--nocapture"])
        .env("FLEMMA_TEST_HUGE_CHILD", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The child ran the test (and did not filter it away).
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    // Pass the child's figure on (seen with --nocapture).
    let _ = std::io::Write::write_all(&mut std::io::stderr(), &out.stderr);
}

async fn huge_output() {
    let size: u64 = std::env::var("FLEMMA_TEST_HUGE_OUTPUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000_000);
    let call = Call::new("huge");
    let ctx = call.context();
    let before = current_rss_kib().unwrap();
    // Reset the peak (as the parse bench does).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let started = Instant::now();
    let out = bash()
        .execute(
            json!({"label": "t", "command": format!("yes | head -c {size}"), "timeout": 600}),
            &ctx,
        )
        .await;
    let elapsed = started.elapsed();
    let peak = peak_rss_kib().unwrap();
    let path = ctx.overflow_path().expect("an overflow file");
    let lines = size / 2;
    let expected_tail = vec!["y"; 2000].join("\n");
    assert_eq!(
        out,
        ToolOutput::text(format!(
            "{expected_tail}\n\n[Showing lines {}-{lines} of {lines}. Full output: {}]",
            lines - 1999,
            path.display()
        ))
    );
    // The trailing newline is trimmed from the file as from the text.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size - 1);
    let growth = peak.saturating_sub(before);
    assert!(
        growth < 32 * 1024,
        "resident memory grew by {growth} KiB for {size} bytes of output (in {elapsed:?})"
    );
    // The parent shows it with --nocapture.
    #[expect(
        clippy::print_stderr,
        reason = "the figure the book's Performance page quotes"
    )]
    {
        eprintln!(
            "{size} bytes of output in {elapsed:?}; peak resident memory grew by {growth} KiB"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn preview() {
    let preview = bash()
        .preview(
            &json!({"label": "listing", "command": "ls -la", "timeout": null}),
            80,
        )
        .unwrap();
    assert_eq!(preview.detail.as_deref(), Some("$ ls -la"));
    assert_eq!(preview.label.as_deref(), Some("listing"));
}
