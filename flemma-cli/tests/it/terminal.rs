//! `flemma run` in a real pseudo-terminal: the approval prompt's answers (y, n, a reason,
//! Enter, Ctrl-D, Ctrl-C, Ctrl-C twice) and what the terminal shows.
//!
//! The command runs as the session leader of a new pseudo-terminal, so a Ctrl-C typed there
//! reaches it as SIGINT from the line discipline, exactly as on a user's terminal. Each step
//! waits for the text it needs to see (never a fixed sleep), with a generous timeout.
//!
//! Both ends of the terminal are close-on-exec from the moment they exist: the other tests of
//! this binary spawn processes from other threads all the time, and a terminal opened first and
//! marked close-on-exec afterwards (as `pty_process::open` does) is inherited by whatever is
//! spawned in between, which then holds it for its whole life (and so does everything it
//! spawns). The command is made the terminal's session leader by util-linux `setsid --ctty`,
//! which `exec`s it in the same process.

use std::io::{Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::scratch;
use crate::scratch::Scratch;

const PATIENCE: Duration = Duration::from_secs(30);

/// A command on a pseudo-terminal and everything it wrote there.
struct Terminal {
    /// The terminal's master side, where the keys are typed.
    pty: std::fs::File,
    screen: Arc<(Mutex<Vec<u8>>, Condvar)>,
    /// When each read of the terminal came (ms after the start) and how it ended.
    times: Arc<Mutex<Vec<String>>>,
    /// Where [`expect`](Self::expect) looks from.
    seen: usize,
    pid: u32,
    exit: Receiver<ExitStatus>,
    exited: bool,
}

/// A failed test leaves no command behind.
impl Drop for Terminal {
    fn drop(&mut self) {
        if !self.exited && self.exit.try_recv().is_err() {
            let pid = rustix::process::Pid::from_raw(i32::try_from(self.pid).unwrap());
            if let Some(pid) = pid {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

impl Terminal {
    fn spawn(args: &[&str], dir: &Path) -> Self {
        let (pty, pts) = open_terminal();
        let mut child = std::process::Command::new("setsid")
            .arg("--ctty")
            .arg(env!("CARGO_BIN_EXE_flemma"))
            .args(args)
            .env("XDG_STATE_HOME", crate::state_home())
            .current_dir(dir)
            .env_remove("RUST_LOG")
            .stdin(pts.try_clone().unwrap())
            .stdout(pts.try_clone().unwrap())
            .stderr(pts)
            .spawn()
            .unwrap();
        let pid = child.id();
        let screen = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let mut reader = std::fs::File::from(pty.as_fd().try_clone_to_owned().unwrap());
        let shared = Arc::clone(&screen);
        let times = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&times);
        let start = Instant::now();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once the command is gone and the terminal hung up.
            let end = loop {
                match reader.read(&mut buf) {
                    Ok(n @ 1..) => {
                        log.lock()
                            .unwrap()
                            .push(format!("{} {n}", start.elapsed().as_millis()));
                        let (lock, ready) = &*shared;
                        lock.lock().unwrap().extend_from_slice(&buf[..n]);
                        ready.notify_all();
                    }
                    other => break other,
                }
            };
            log.lock()
                .unwrap()
                .push(format!("{} end {end:?}", start.elapsed().as_millis()));
        });
        let (sender, exit) = channel();
        std::thread::spawn(move || {
            let _ = sender.send(child.wait().unwrap());
        });
        Self {
            pty,
            screen,
            times,
            seen: 0,
            pid,
            exit,
            exited: false,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.screen.0.lock().unwrap()).into_owned()
    }

    /// Waits until `needle` appears after what was expected so far.
    fn expect(&mut self, needle: &str) {
        let (lock, ready) = &*self.screen;
        let deadline = Instant::now() + PATIENCE;
        let mut screen = lock.lock().unwrap();
        loop {
            let text = String::from_utf8_lossy(&screen[self.seen..]).into_owned();
            if let Some(at) = text.find(needle) {
                self.seen += text[..at + needle.len()].len();
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(screen);
                panic!(
                    "{needle:?} did not appear; the terminal shows:\n{text}\n{}",
                    self.state()
                );
            }
            screen = ready.wait_timeout(screen, left).unwrap().0;
        }
    }

    /// What a failed wait reports besides the screen: whether the command still runs (and,
    /// if so, its signal masks and where its threads wait), and the terminal's foreground
    /// process group and local modes, so that a lost key or signal can be told from a command
    /// that died or hung.
    fn state(&mut self) -> String {
        use std::fmt::Write as _;
        let mut state = String::new();
        if let Ok(status) = self.exit.try_recv() {
            self.exited = true;
            let _ = writeln!(state, "the command ended: {status:?}");
        } else {
            let _ = writeln!(state, "the command (pid {}) still runs", self.pid);
            let proc = format!("/proc/{}", self.pid);
            let status = std::fs::read_to_string(format!("{proc}/status")).unwrap_or_default();
            for line in status.lines().filter(|l| {
                ["State:", "Sig", "ShdPnd:"]
                    .iter()
                    .any(|p| l.starts_with(p))
            }) {
                let _ = writeln!(state, "  {line}");
            }
            for task in std::fs::read_dir(format!("{proc}/task"))
                .into_iter()
                .flatten()
            {
                let task = task.unwrap().path();
                let read = |f: &str| std::fs::read_to_string(task.join(f)).unwrap_or_default();
                let _ = writeln!(
                    state,
                    "  thread {} {}: {}",
                    task.file_name().unwrap().to_string_lossy(),
                    read("comm").trim(),
                    read("wchan")
                );
            }
        }
        let _ = writeln!(
            state,
            "terminal: foreground group {:?}, session {:?}, local modes {:?}",
            rustix::termios::tcgetpgrp(&self.pty),
            rustix::termios::tcgetsid(&self.pty),
            rustix::termios::tcgetattr(&self.pty).map(|t| t.local_modes),
        );
        let times = self.times.lock().unwrap();
        let _ = writeln!(state, "reads (ms after the start, bytes): {times:?}");
        state
    }

    fn send(&mut self, keys: &[u8]) {
        self.pty.write_all(keys).unwrap();
        self.pty.flush().unwrap();
    }

    fn exit_code(&mut self) -> Option<i32> {
        match self.exit.recv_timeout(PATIENCE) {
            Ok(status) => {
                self.exited = true;
                status.code()
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "the command did not exit; the terminal shows:\n{}\n{}",
                    self.text(),
                    self.state()
                )
            }
            Err(RecvTimeoutError::Disconnected) => panic!("lost the command"),
        }
    }
}

/// A new pseudo-terminal of 40 rows of 200 columns: its master and its slave side, both
/// close-on-exec from their creation, the slave not made anyone's controlling terminal here.
fn open_terminal() -> (std::fs::File, std::fs::File) {
    use rustix::pty::OpenptFlags;
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
            .unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    // The slave through the master (TIOCGPTPEER): no path lookup, and close-on-exec at once.
    let slave = rustix::pty::ioctl_tiocgptpeer(
        &master,
        OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC,
    )
    .unwrap();
    let size = rustix::termios::Winsize {
        ws_row: 40,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(&master, size).unwrap();
    (master.into(), slave.into())
}

/// A conversation whose model asks to run `command` with bash, then says `Done.`.
fn conversation(name: &str, command: &str) -> (Scratch, PathBuf) {
    let script = serde_json::json!([
        {"tool_uses": [{"name": "bash", "input": {"command": command, "label": "marking"}}]},
        {"text": "Done."}
    ]);
    let chat = scratch(&format!("{name}.chat"), b"@You:\nMark it.\n");
    let dir = chat.parent().unwrap().to_owned();
    let _ = std::fs::remove_file(dir.join("marker"));
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    (chat, dir)
}

fn ask(chat: &Path, dir: &Path) -> Terminal {
    Terminal::spawn(
        &[
            "run",
            chat.to_str().unwrap(),
            "--provider",
            "scripted",
            "--script",
            "script.json",
            "--approve",
            "ask",
            // Bubblewrap would let the sandbox resolver approve bash without asking.
            "--set",
            "sandbox.enabled=false",
        ],
        dir,
    )
}

// The question as far as main and this branch agree (main asked `[Y/n/reason]`).
const QUESTION: &str = "allow bash: $ touch marker && echo made-it — marking? [";
const COMMAND: &str = "touch marker && echo made-it";

/// Once the run says `stopped`: the call did not run, it is still `(pending)` with an empty
/// block, and the terminal said how to decide it.
fn assert_left_pending(term: &mut Terminal, chat: &Path, dir: &Path, stop: &str) {
    term.expect("stopped: ");
    assert!(!dir.join("marker").exists(), "the call ran");
    let transcript = std::fs::read_to_string(chat).unwrap();
    assert!(
        transcript.ends_with("**Tool Result:** `toolu_scripted_1_1` (pending)\n```\n```\n"),
        "{transcript}"
    );
    let screen = term.text();
    for line in [
        "pending: bash toolu_scripted_1_1 (flemma approve ",
        ", or flemma reject ",
        &format!("stopped: {stop}"),
    ] {
        assert!(screen.contains(line), "{line:?} not in:\n{screen}");
    }
}

#[test]
fn y_runs_the_call_and_its_output_shows_under_its_status_line() {
    let (chat, dir) = conversation("pty-yes", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    term.send(b"y\r");
    term.expect("ok: bash: $ touch marker && echo made-it — marking");
    // The result's first lines, dimmed, under the status line.
    term.expect("\x1b[2m    made-it\x1b[0m");
    term.expect("Done.");
    term.expect("stopped: finished");
    assert_eq!(term.exit_code(), Some(0));
    assert!(dir.join("marker").exists());
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.contains("**Tool Result:** `toolu_scripted_1_1`\n```\nmade-it\n```"),
        "{transcript}"
    );
}

#[test]
fn n_rejects_the_call_and_the_run_goes_on() {
    let (chat, dir) = conversation("pty-no", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    term.send(b"n\r");
    term.expect("error: bash: $ touch marker && echo made-it — marking");
    term.expect("This tool has been rejected by the user.");
    term.expect("stopped: finished");
    assert_eq!(term.exit_code(), Some(0));
    assert!(!dir.join("marker").exists(), "the call ran");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.contains(
            "`toolu_scripted_1_1` (error)\n```\nThis tool has been rejected by the user.\n```"
        ),
        "{transcript}"
    );
}

#[test]
fn a_reason_rejects_the_call_with_that_reason() {
    let (chat, dir) = conversation("pty-reason", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    term.send(b"use ls instead\r");
    term.expect("error: bash: $ touch marker && echo made-it — marking");
    term.expect("    User feedback: use ls instead");
    term.expect("stopped: finished");
    assert_eq!(term.exit_code(), Some(0));
    assert!(!dir.join("marker").exists(), "the call ran");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript
            .contains("`toolu_scripted_1_1` (error)\n```\nUser feedback: use ls instead\n```"),
        "{transcript}"
    );
    // The model reads the reason as user feedback.
    let out = crate::flemma(
        &["request", chat.to_str().unwrap(), "--provider", "anthropic"],
        None,
    );
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        body["messages"][2]["content"][0],
        serde_json::json!({
            "type": "tool_result",
            "tool_use_id": "toolu_scripted_1_1",
            "content": "User feedback: use ls instead",
            "is_error": true,
        })
    );
}

/// End of input (Ctrl-D) is no yes: the run stops, the call stays pending (main ran it).
#[test]
fn ctrl_d_leaves_the_call_pending() {
    let (chat, dir) = conversation("pty-ctrl-d", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    term.send(b"\x04");
    assert_left_pending(&mut term, &chat, &dir, "awaiting_approval");
    assert_eq!(term.exit_code(), Some(3));
    assert!(!dir.join("marker").exists(), "the call ran");
}

/// Enter alone is no answer: the question is asked again. Then Ctrl-D (end of input) is no
/// yes either: the run stops, the call stays pending.
#[test]
fn enter_asks_again_and_end_of_input_leaves_the_call_pending() {
    let (chat, dir) = conversation("pty-eof", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    term.send(b"\r");
    term.expect("answer y to run it, n to reject it");
    term.expect(QUESTION);
    term.send(b"\x04");
    assert_left_pending(&mut term, &chat, &dir, "awaiting_approval");
    assert_eq!(term.exit_code(), Some(3));
    assert!(!dir.join("marker").exists(), "the call ran");
}

/// A `y` not followed by Enter when the input ends is no answer.
#[test]
fn an_unfinished_yes_at_the_end_of_input_is_no_yes() {
    let (chat, dir) = conversation("pty-unfinished", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    // The first Ctrl-D hands over the `y`, the second ends the input.
    term.send(b"y\x04\x04");
    assert_left_pending(&mut term, &chat, &dir, "awaiting_approval");
    assert_eq!(term.exit_code(), Some(3));
}

/// Ctrl-C answers at once, without a line typed: nothing runs and the call stays pending.
#[test]
fn ctrl_c_at_the_prompt_stops_at_once_and_runs_nothing() {
    let (chat, dir) = conversation("pty-ctrl-c", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    term.send(b"\x03");
    term.expect("Ctrl-C: the call is not run");
    assert_left_pending(&mut term, &chat, &dir, "cancelled");
    assert_eq!(term.exit_code(), Some(130));
}

#[test]
fn ctrl_c_twice_at_the_prompt_ends_the_command_and_runs_nothing() {
    let (chat, dir) = conversation("pty-ctrl-c-twice", COMMAND);
    let mut term = ask(&chat, &dir);
    term.expect(QUESTION);
    term.send(b"\x03\x03");
    assert_eq!(term.exit_code(), Some(130));
    assert!(!dir.join("marker").exists(), "the call ran");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.ends_with("`toolu_scripted_1_1` (pending)\n```\n```\n"),
        "{transcript}"
    );
}

/// Ctrl-C while the approved command runs cancels it (the abort text is its result); the
/// second Ctrl-C ends the command.
#[test]
fn ctrl_c_twice_while_a_command_runs_writes_the_abort_text_and_exits() {
    let (chat, dir) = conversation("pty-running", "sleep 30");
    let mut term = ask(&chat, &dir);
    term.expect("allow bash: $ sleep 30 — marking? [");
    term.send(b"y\r");
    // The spinner of the running call.
    term.expect("$ sleep 30 — marking");
    term.send(b"\x03");
    term.expect("cancelling the running tools");
    term.send(b"\x03");
    assert_eq!(term.exit_code(), Some(130));
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.contains("`toolu_scripted_1_1` (error)\n```\nUser aborted tool execution.\n```"),
        "{transcript}"
    );
}

/// Issue 34, item 6: a call whose input holds terminal controls (erase the line, back to its
/// start) cannot make the prompt read `allow bash: $ ls`: the prompt and every status line
/// show them as escapes, and nothing the model wrote reaches the terminal raw.
#[test]
fn terminal_controls_in_a_call_are_shown_not_obeyed() {
    let (chat, dir) = conversation("pty-spoof", "touch marker\u{1b}[2K\r$ ls");
    let mut term = ask(&chat, &dir);
    term.expect("allow bash: $ touch marker\\x1b[2K↵$ ls — marking? [");
    term.send(b"n\r");
    term.expect("stopped: finished");
    assert_eq!(term.exit_code(), Some(0));
    assert!(!dir.join("marker").exists(), "the call ran");
    let screen = term.text();
    assert!(!screen.contains("marker\u{1b}[2K"), "{screen:?}");
    assert!(
        screen.contains("error: bash: $ touch marker\\x1b[2K↵$ ls"),
        "{screen}"
    );
}

/// A subagent's call that needs approval is asked about at the parent's prompt, naming the
/// agent: its definition is a Claude Code agent file, unchanged.
#[test]
fn a_subagents_call_is_asked_about_at_the_parents_prompt_naming_the_agent() {
    let chat = scratch(
        "pty-agent.chat",
        b"```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"agent\"]}}}\n```\n@You:\nDelegate it.\n",
    );
    let dir = chat.parent().unwrap().to_owned();
    let _ = std::fs::remove_file(dir.join("marker"));
    std::fs::create_dir_all(dir.join(".claude/agents")).unwrap();
    std::fs::write(
        dir.join(".claude/agents/marker.md"),
        "---\nname: marker\ndescription: Marks things.\ntools: Bash\nmodel: inherit\n---\n\nYou mark things.\n",
    )
    .unwrap();
    let script = serde_json::json!([
        {"tool_uses": [{"name": "agent", "input": {"agent": "marker", "prompt": "Mark it."}}]},
        {"tool_uses": [{"name": "bash", "input": {"command": COMMAND, "label": "marking"}}]},
        {"text": "Marked."},
        {"text": "Done."}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let mut term = ask(&chat, &dir);
    term.expect("allow agent marker: bash: $ touch marker && echo made-it — marking? [");
    term.send(b"y\r");
    term.expect("Done.");
    term.expect("stopped: finished");
    assert_eq!(term.exit_code(), Some(0));
    assert!(dir.join("marker").exists());
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.contains("Marked.\n\nSubagent transcript: "),
        "{transcript}"
    );
    let child =
        std::fs::read_to_string(dir.join("pty-agent.marker.toolu_scripted_1_1.chat")).unwrap();
    assert!(child.contains("```\nmade-it\n```"), "{child}");
}

/// Ctrl-D at a subagent's question: nothing runs, and the child's call stays pending in its
/// transcript.
#[test]
fn ctrl_d_at_a_subagents_question_runs_nothing() {
    let chat = scratch(
        "pty-agent-eof.chat",
        b"```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"agent\"]}}}\n```\n@You:\nDelegate it.\n",
    );
    let dir = chat.parent().unwrap().to_owned();
    let _ = std::fs::remove_file(dir.join("marker"));
    std::fs::create_dir_all(dir.join(".claude/agents")).unwrap();
    std::fs::write(
        dir.join(".claude/agents/marker.md"),
        "---\nname: marker\ndescription: Marks things.\ntools: Bash\n---\nYou mark things.\n",
    )
    .unwrap();
    let script = serde_json::json!([
        {"tool_uses": [{"name": "agent", "input": {"agent": "marker", "prompt": "Mark it."}}]},
        {"tool_uses": [{"name": "bash", "input": {"command": COMMAND, "label": "marking"}}]},
        {"text": "Marked."},
        {"text": "Done."}
    ]);
    std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
    let mut term = ask(&chat, &dir);
    term.expect("allow agent marker: bash: $ touch marker && echo made-it — marking? [");
    term.send(b"\x04");
    term.expect("stopped: ");
    let code = term.exit_code();
    let screen = term.text();
    let transcript = std::fs::read_to_string(&chat).unwrap();
    let child =
        std::fs::read_to_string(dir.join("pty-agent-eof.marker.toolu_scripted_1_1.chat")).unwrap();
    assert_eq!(code, Some(3), "{screen}");
    assert!(!dir.join("marker").exists(), "the call ran");
    assert!(
        child.ends_with("**Tool Result:** `toolu_scripted_2_1` (pending)\n```\n```\n"),
        "{child}"
    );
    // Known gap: the parent's agent call is left in progress (its block has no status), so
    // the next run answers it as lost instead of resuming the child; still nothing runs.
    assert!(
        transcript.ends_with("**Tool Result:** `toolu_scripted_1_1`\n```\n```\n"),
        "{transcript}"
    );
    let again = crate::flemma_command()
        .current_dir(&dir)
        .args(["run", chat.to_str().unwrap(), "--provider", "scripted"])
        .args(["--script", "script.json", "--approve", "none"])
        .args(["--set", "sandbox.enabled=false"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3));
    let after = std::fs::read_to_string(&chat).unwrap();
    assert!(
        after.contains("`toolu_scripted_1_1` (error)\n```\nTool execution lost: session ended before completion."),
        "{after}"
    );
    assert!(!dir.join("marker").exists(), "the call ran");
}
