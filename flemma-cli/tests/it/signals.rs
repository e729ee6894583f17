//! `flemma run` and the signals it answers: SIGTERM and SIGHUP cancel like Ctrl-C (the abort
//! text is written, never an empty result), and the command always exits after a second
//! Ctrl-C, even when a write cannot finish.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::scratch;
use crate::scratch::Scratch;

const PATIENCE: Duration = Duration::from_secs(30);

/// `flemma run` in the background, its stderr read line by line.
struct Running {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn start(chat: &Path, script: &Path) -> Self {
        let mut child = crate::flemma_command()
            .args(["run", chat.to_str().unwrap(), "--provider", "scripted"])
            .args(["--script", script.to_str().unwrap(), "--approve", "all"])
            .args(["--set", "sandbox.enabled=false"])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a status line that starts with `start`.
    fn expect(&mut self, start: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.starts_with(start);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(error) => panic!("no line {start:?} ({error}); stderr: {:#?}", self.seen),
            }
        }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap()).unwrap();
        kill_process(pid, signal).unwrap();
    }

    /// The exit code, which must come within `within`; and the rest of stderr.
    fn exit(mut self, within: Duration) -> (Option<i32>, Vec<String>) {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            // stderr ends when the command exits: waiting on it is waiting for the exit.
            match self
                .lines
                .recv_timeout(within.saturating_sub(started.elapsed()))
            {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Disconnected) => break self.child.wait().unwrap(),
                Err(RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("still running after {within:?}; stderr: {:#?}", self.seen);
                }
            }
        };
        let mut seen = std::mem::take(&mut self.seen);
        seen.extend(self.lines.try_iter());
        (status.code(), seen)
    }
}

/// A failed test leaves no command behind.
impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A conversation whose model asks for `sleep 30` in bash.
fn sleeping(name: &str) -> (Scratch, PathBuf) {
    let chat = scratch(&format!("{name}.chat"), b"@You:\nWait.\n");
    let script = chat.with_file_name("script.json");
    std::fs::write(
        &script,
        br#"[{"tool_uses": [{"name": "bash", "input": {"command": "sleep 30", "label": "waiting"}}]}, {"text": "Done."}]"#,
    )
    .unwrap();
    (chat, script)
}

const ABORTED: &str = "`toolu_scripted_1_1` (error)\n```\nUser aborted tool execution.\n```";

fn terminated_while_bash_runs(signal: Signal, code: i32, name: &str) {
    let (chat, script) = sleeping(name);
    let mut run = Running::start(&chat, &script);
    run.expect("running: bash: $ sleep 30");
    run.signal(signal);
    let (exit, stderr) = run.exit(Duration::from_secs(10));
    assert_eq!(exit, Some(code), "{stderr:#?}");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(transcript.contains(ABORTED), "{transcript}");
    assert!(flemma::ast::parse(&transcript).diagnostics.is_empty());
    // The next run does not send an empty result as a success: the call has its error.
    assert!(!transcript.contains("Done."), "{transcript}");
}

#[test]
fn sigterm_while_bash_runs_writes_the_abort_text_and_exits_143() {
    terminated_while_bash_runs(Signal::TERM, 143, "sigterm");
}

#[test]
fn sighup_while_bash_runs_writes_the_abort_text_and_exits_129() {
    terminated_while_bash_runs(Signal::HUP, 129, "sighup");
}

#[test]
fn sigterm_while_the_response_streams_writes_the_abort_marker() {
    let chat = scratch("sigterm-stream.chat", b"@You:\nCount slowly.\n");
    let script = chat.with_file_name("script.json");
    std::fs::write(
        &script,
        br#"[{"text": "one \ntwo \nthree \nfour \nfive \nsix \nseven \neight", "delay_ms": 200}]"#,
    )
    .unwrap();
    let mut run = Running::start(&chat, &script);
    run.expect("request 1");
    // Some text is in the file: the request is in flight.
    let deadline = Instant::now() + PATIENCE;
    while !std::fs::read_to_string(&chat).unwrap().contains("one") {
        assert!(Instant::now() < deadline, "no text arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.signal(Signal::TERM);
    let (exit, stderr) = run.exit(Duration::from_secs(10));
    assert_eq!(exit, Some(143), "{stderr:#?}");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.ends_with("\n\n<!-- flemma:aborted: Response interrupted by the user. -->\n"),
        "{transcript}"
    );
}

/// The second Ctrl-C ends the command even when the abort text cannot be written: here the
/// transcript's directory is locked by another writer, so the write of the result blocks.
#[test]
fn the_second_ctrl_c_exits_even_when_a_write_is_stuck() {
    let (chat, script) = sleeping("stuck");
    let mut run = Running::start(&chat, &script);
    run.expect("running: bash: $ sleep 30");
    // The lock every atomic write of that directory takes (flemma-store's `write_atomic`).
    let dir = std::fs::File::open(chat.parent().unwrap()).unwrap();
    dir.lock().unwrap();
    run.signal(Signal::INT);
    run.expect("cancelling the running tools");
    run.signal(Signal::INT);
    let (exit, stderr) = run.exit(Duration::from_secs(15));
    dir.unlock().unwrap();
    assert_eq!(exit, Some(130), "{stderr:#?}");
    assert!(
        stderr
            .iter()
            .any(|l| l.starts_with("stopped: cancelled (gave up waiting")),
        "{stderr:#?}"
    );
    // Nothing half-written.
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(flemma::ast::parse(&transcript).diagnostics.is_empty());
}

/// A SIGTERM while a command runs: the aborted result keeps what the command had written
/// (spec §12: the error, a blank line, `Partial output:` and the output; decision record 0111:
/// "a cancel gives `User aborted tool execution.` with the partial output").
#[test]
fn sigterm_while_bash_runs_keeps_the_partial_output() {
    let chat = scratch("sigterm-partial.chat", b"@You:\nWait.\n");
    let dir = chat.parent().unwrap();
    let flag = dir.join("started.flag");
    let _ = std::fs::remove_file(&flag);
    // The flag is written after `started`: once it exists, `started` is on the terminal.
    let command = format!("echo started; : > '{}'; sleep 30", flag.display());
    let script = chat.with_file_name("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_uses": [{"name": "bash", "input": {"command": command, "label": "waiting"}}]},
            {"text": "Done."},
        ])
        .to_string(),
    )
    .unwrap();
    let mut run = Running::start(&chat, &script);
    run.expect("running: bash: $ echo started");
    let deadline = Instant::now() + PATIENCE;
    while !flag.exists() {
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    run.signal(Signal::TERM);
    let (exit, stderr) = run.exit(Duration::from_secs(10));
    assert_eq!(exit, Some(143), "{stderr:#?}");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.contains(
            "`toolu_scripted_1_1` (error)\n```\nUser aborted tool execution.\n\n\
             Partial output:\nstarted\n```"
        ),
        "{transcript}"
    );
    assert!(flemma::ast::parse(&transcript).diagnostics.is_empty());
    assert!(!transcript.contains("Done."), "{transcript}");
}

/// SIGTERM while a subagent's command runs: the child's call and the parent's `agent` call both
/// end as aborted, neither as a success, and the command exits 143.
#[test]
fn sigterm_while_a_subagents_command_runs_aborts_the_child_and_the_agent_call() {
    let chat = scratch("sigterm-agent.chat", b"@You:\nDelegate the wait.\n");
    let dir = chat.parent().unwrap().to_owned();
    std::fs::create_dir_all(dir.join(".flemma/agents")).unwrap();
    std::fs::write(
        dir.join(".flemma/agents/waiter.md"),
        "---\ndescription: Waits.\ntools: bash\n---\nYou wait.\n",
    )
    .unwrap();
    let script = chat.with_file_name("script.json");
    std::fs::write(
        &script,
        br#"[{"tool_uses": [{"name": "agent", "input": {"agent": "waiter", "prompt": "Wait."}}]},
            {"tool_uses": [{"name": "bash", "input": {"command": "sleep 30", "label": "waiting"}}]},
            {"text": "never"}, {"text": "never"}]"#,
    )
    .unwrap();
    let mut run = Running::start(&chat, &script);
    run.expect("waiter: running: bash: $ sleep 30");
    run.signal(Signal::TERM);
    let (exit, stderr) = run.exit(Duration::from_secs(10));
    assert_eq!(exit, Some(143), "{stderr:#?}");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(transcript.contains(ABORTED), "{transcript}");
    assert!(!transcript.contains("never"), "{transcript}");
    let child =
        std::fs::read_to_string(dir.join("sigterm-agent.waiter.toolu_scripted_1_1.chat")).unwrap();
    assert!(
        child.contains("`toolu_scripted_2_1` (error)\n```\nUser aborted tool execution.\n```"),
        "{child}"
    );
    assert!(!child.contains("never"), "{child}");
}
