//! One execution per call: hosts (`flemma cycle` processes) that open one conversation at
//! once run each call once, and a call whose host died mid-run is answered with an error.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::scratch::Scratch;
use crate::{flemma, scratch, text};

/// The error a call whose host died gets (ours; the spec has `job.lost` for jobs only).
const LOST: &str = "Tool execution lost: session ended before completion. It may have run in part; check before retrying.";

fn path(file: &Path) -> &str {
    file.to_str().unwrap()
}

/// A transcript whose model asked for `calls` bash calls, each appending its own line to
/// `log` and then sleeping a little, so that hosts' runs overlap.
fn calls_transcript(test: &str, calls: usize, log: &Path) -> Scratch {
    let mut chat = String::from(
        "```json\n{\"flemma\": {\"tools\": {\"require_approval\": false}}}\n```\n\
         @You:\nRun them.\n\n@Assistant:\n",
    );
    for n in 0..calls {
        let command = format!("echo call-{n} >> '{}'; sleep 0.2", log.display());
        let input = serde_json::json!({"label": "append", "command": command, "timeout": null});
        let _ = write!(
            chat,
            "**Tool Use:** `bash` (`toolu_{n:02}`)\n```json\n{input}\n```\n\n"
        );
    }
    scratch(&format!("claims-{test}.chat"), chat.as_bytes())
}

/// `flemma cycle FILE --json` until the report's `next` is no longer `running`; the `next`s seen.
fn cycle_until_settled(file: &Path) -> Vec<String> {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let out = flemma(
            &[
                "cycle",
                path(file),
                "--json",
                "--set",
                "sandbox.enabled=false",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let next = report["next"].as_str().unwrap().to_owned();
        seen.push(next.clone());
        if next != "running" {
            return seen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "never settled: {seen:?}"
        );
    }
}

/// Every tool use has exactly one result, a success with the command's output (none an error:
/// neither a lost host nor a false `Command exited with code 129`).
fn assert_every_result_in_place(file: &Path, calls: usize) {
    let doc = flemma::ast::parse(&std::fs::read_to_string(file).unwrap());
    assert_eq!(doc.diagnostics, Vec::new());
    for n in 0..calls {
        let id = format!("toolu_{n:02}");
        let results: Vec<_> = doc
            .messages
            .iter()
            .flat_map(flemma::ast::Message::tool_results)
            .filter(|r| r.tool_use_id.as_str() == id)
            .collect();
        assert_eq!(results.len(), 1, "{id}");
        let result = results[0];
        assert_eq!(result.status, None, "{id}: {}", result.content);
        assert!(
            result.content.starts_with("(no output)"),
            "{id}: {}",
            result.content
        );
        assert!(!result.content.contains(LOST), "{id}: {}", result.content);
    }
}

#[test]
fn four_hosts_cycling_one_conversation_run_each_call_once() {
    const HOSTS: usize = 4;
    const CALLS: usize = 20;
    let log = scratch("claims-four.log", b"");
    let file = calls_transcript("four", CALLS, &log);
    let start = Arc::new(Barrier::new(HOSTS));
    let hosts: Vec<_> = (0..HOSTS)
        .map(|_| {
            let (file, start) = (file.to_path_buf(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                cycle_until_settled(&file)
            })
        })
        .collect();
    for host in hosts {
        let seen = host.join().unwrap();
        assert_eq!(seen.last().map(String::as_str), Some("send"), "{seen:?}");
    }
    let lines = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = lines.lines().collect();
    lines.sort_unstable();
    let mut expected: Vec<String> = (0..CALLS).map(|n| format!("call-{n}")).collect();
    expected.sort_unstable();
    assert_eq!(lines, expected, "each call ran exactly once");
    assert_every_result_in_place(&file, CALLS);
}

/// SIGKILL to a process, or to a process group when `pid` is negative; one that is gone
/// already is fine.
fn sigkill(pid: i32) {
    use rustix::process::{Pid, Signal, kill_process, kill_process_group};
    let target = Pid::from_raw(pid.abs()).unwrap();
    let sent = if pid < 0 {
        kill_process_group(target, Signal::KILL)
    } else {
        kill_process(target, Signal::KILL)
    };
    assert!(
        matches!(sent, Ok(()) | Err(rustix::io::Errno::SRCH)),
        "{sent:?}"
    );
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `flemma cycle` on a `sleep 30` call, waits until the command runs, and kills the
/// host by SIGKILL (and the command's own session, which the dead host cannot stop); returns
/// the transcript and the host's pid.
fn kill_host_mid_call(test: &str) -> (Scratch, u32) {
    let pid_file = scratch(&format!("claims-{test}.pid"), b"");
    std::fs::remove_file(&pid_file).unwrap();
    let command = format!("echo $$ > '{}'; sleep 30", pid_file.display());
    let input = serde_json::json!({"label": "waiting", "command": command, "timeout": 60});
    let chat = format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"require_approval\": false}}}}}}\n```\n\
         @You:\nWait.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_k`)\n```json\n{input}\n```\n"
    );
    let file = scratch(&format!("claims-{test}.chat"), chat.as_bytes());
    let mut host = crate::flemma_command()
        .args(["cycle", path(&file), "--set", "sandbox.enabled=false"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The command runs once its shell has written its pid.
    wait_until("the command to run", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let shell: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    sigkill(i32::try_from(host.id()).unwrap());
    host.wait().unwrap();
    sigkill(-shell);
    (file, host.id())
}

/// The `tool_result` blocks of an Anthropic request body.
fn tool_results(body: &serde_json::Value) -> Vec<serde_json::Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect()
}

#[test]
fn a_call_whose_host_was_killed_is_answered_with_an_error_and_sent_as_one() {
    let (file, host) = kill_host_mid_call("killed");
    // The host left the empty block of a call in progress.
    let left = std::fs::read_to_string(&file).unwrap();
    assert!(
        left.ends_with("**Tool Result:** `toolu_k`\n```\n```\n"),
        "{left}"
    );

    // `check` says the call was interrupted.
    let out = flemma(&["check", path(&file)], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let name = file.file_name().unwrap().to_str().unwrap();
    let line = left.lines().count() - 2;
    assert!(
        text(&out.stdout).contains(&format!(
            "{name}:{line}: warning: tool_result: call `toolu_k` was interrupted: its host (pid {host}) ended before it completed"
        )),
        "{}",
        text(&out.stdout)
    );

    // `request` warns that the block would go out as an empty result.
    let out = flemma(
        &[
            "request",
            path(&file),
            "--provider",
            "anthropic",
            "--templates",
            "jinja",
        ],
        None,
    );
    assert!(
        text(&out.stderr).contains(&format!(
            "{name}:{line}: warning: call `toolu_k` was interrupted"
        )),
        "{}",
        text(&out.stderr)
    );

    // The next host answers it with an error.
    let out = flemma(
        &[
            "cycle",
            path(&file),
            "--json",
            "--set",
            "sandbox.enabled=false",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (report["completed"].clone(), report["next"].clone()),
        (
            serde_json::json!([{"id": "toolu_k", "tool": "bash", "success": false}]),
            serde_json::json!("send")
        )
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(&format!(
            "**Tool Result:** `toolu_k` (error)\n```\n{LOST}\n```\n"
        )),
        "{after}"
    );
    let out = flemma(&["check", path(&file)], None);
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), String::new())
    );

    // The provider is told it failed.
    let out = flemma(
        &[
            "request",
            path(&file),
            "--provider",
            "anthropic",
            "--templates",
            "jinja",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = tool_results(&body);
    assert_eq!(results.len(), 1, "{body}");
    assert_eq!(results[0]["tool_use_id"], "toolu_k");
    assert_eq!(results[0]["is_error"], true, "{body}");
    assert!(
        results[0]["content"]
            .to_string()
            .contains("Tool execution lost"),
        "{body}"
    );
}

/// One system call of a traced run: its name and the line `strace -y` printed for it.
#[cfg(target_os = "linux")]
struct Traced {
    name: String,
    line: String,
}

/// The calls `strace -f -y -o log` wrote to `log`, in the order they were made.
#[cfg(target_os = "linux")]
fn traced(log: &Path) -> Vec<Traced> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|line| {
            // "PID name(args) = result"; resumed and signal lines are not calls.
            let rest = line.split_once(' ')?.1.trim_start();
            let (name, _) = rest.split_once('(')?;
            (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')).then(
                || Traced {
                    name: name.to_owned(),
                    line: line.to_owned(),
                },
            )
        })
        .collect()
}

/// A machine crash must never leave a call's block in progress (status-less and empty)
/// without its claim: the next host would send it as an empty success. On a file system that
/// orders nothing between files (btrfs), only a sync of the claims directory makes the claim's
/// name durable; it must come after the claim is renamed into place and before the transcript
/// is written with the cleared block (a write can reach the disk at any time after it is made)
/// and before the command starts. Watched with strace on the real binary.
#[cfg(target_os = "linux")]
#[test]
fn a_claim_is_durable_before_its_block_reads_as_in_progress() {
    let script = scratch(
        "claims-durable.script.json",
        br#"[{"tool_uses": [{"name": "bash", "input": {"command": "echo ran"}}]}, {"text": "Done."}]"#,
    );
    let chat = scratch("claims-durable.chat", b"@You:\nGo.\n");
    let dir = chat.parent().unwrap().to_owned();
    let log = dir.join("strace.log");
    let out = Command::new("strace")
        .args(["-f", "-y", "-qq", "-o"])
        .arg(&log)
        .args([
            "-e",
            "trace=rename,renameat,renameat2,fsync,fdatasync,write,pwrite64,execve",
            "--",
            env!("CARGO_BIN_EXE_flemma"),
            "run",
            path(&chat),
            "--provider",
            "scripted",
            "--script",
            path(&script),
            "--approve",
            "all",
            "--set",
            "sandbox.enabled=false",
        ])
        .env("XDG_STATE_HOME", crate::state_home())
        .stdin(Stdio::null())
        .output()
        .expect("strace runs (scripts/test installs it: Debian package strace)");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(&chat).unwrap().contains("ran"),
        "the call ran"
    );
    let calls = traced(&log);
    let position = |what: &str, from: usize, found: &dyn Fn(&Traced) -> bool| {
        let Some(n) = calls[from..].iter().position(found) else {
            panic!("no {what} after call {from} in {}", log.display())
        };
        n + from
    };
    let chat_name = path(&chat).to_owned();
    let claimed = position("claim renamed into calls/", 0, &|c| {
        c.name.starts_with("rename") && c.line.contains("/calls/") && c.line.contains(".json\"")
    });
    let synced = position("sync of the claims directory", claimed, &|c| {
        c.name == "fsync" && c.line.contains("/calls>")
    });
    // The transcript written after the claim: renamed over, or written in place.
    let written = position("write of the transcript", claimed, &|c| {
        (c.name.starts_with("rename") && c.line.contains(&format!("\"{chat_name}\"")))
            || (c.name.contains("write") && c.line.contains(&format!("<{chat_name}>")))
    });
    let started = position("the command's start", claimed, &|c| {
        c.name == "execve" && c.line.contains("bash")
    });
    assert!(
        synced < written && synced < started,
        "the claim's directory synced at call {synced}, the transcript written at {written}, \
         the command started at {started} (log {})",
        log.display()
    );
}
