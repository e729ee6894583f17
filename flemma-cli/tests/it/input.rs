//! How every command reads FILE: only regular files, only UTF-8 (the read stops at the first
//! bad byte), exit 2 otherwise; and a tool use the parser refuses is never run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use pretty_assertions::assert_eq;

use crate::scratch::Scratch;
use crate::{scratch, text};

/// How long a command may take to refuse its input. Generous for a loaded CI machine; the
/// unbounded reads this guards against never end (and grow by gigabytes in that time).
const PROMPTLY: Duration = Duration::from_secs(60);

/// Runs `flemma args` with `stdin`, and fails the test (killing the process) if it has not
/// exited within [`PROMPTLY`].
fn flemma_within(args: &[&str], stdin: Stdio) -> Output {
    let child = crate::flemma_command()
        .args(args)
        // `run` builds its provider before it reads FILE; no request is ever sent here.
        .env("ANTHROPIC_API_KEY", "test-key-never-sent")
        .env("FLEMMA_BASE_URL", "http://127.0.0.1:9")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let Ok(output) = finished.recv_timeout(PROMPTLY) else {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        panic!("flemma {args:?} still running after {PROMPTLY:?}");
    };
    output.unwrap()
}

fn flemma(args: &[&str]) -> (i32, String) {
    let out = flemma_within(args, Stdio::null());
    (out.status.code().unwrap(), text(&out.stderr))
}

/// Every command that reads FILE, with the arguments it needs besides FILE.
fn commands(file: &str) -> Vec<Vec<&str>> {
    let no_key = ["--set", "sandbox.enabled=false"];
    vec![
        vec!["parse", file],
        vec!["parse", file, "--json"],
        vec!["check", file],
        vec!["fmt", file],
        vec!["fmt", file, "--check"],
        vec!["tools", file],
        vec!["request", "--provider", "anthropic", file],
        vec!["approval", "explain", file, "--tool", "bash"],
        vec!["cycle", file, no_key[0], no_key[1]],
        vec!["approve", file, "t1"],
        vec!["reject", file, "t1"],
        vec!["approve-all", file],
        vec!["run", file],
        vec![
            "run",
            file,
            "--output",
            "/nonexistent-dir/never-written.chat",
        ],
    ]
}

/// Each command refuses `file` with exit 2 and the message `expected`, before doing anything.
fn assert_every_command_refuses(file: &str, expected: &str) {
    for args in commands(file) {
        let (code, stderr) = flemma(&args);
        assert_eq!(
            (code, stderr.as_str()),
            (2, expected),
            "flemma {}",
            args.join(" ")
        );
    }
}

#[test]
fn a_character_device_is_refused_at_once_by_every_command() {
    // `check /dev/zero` used to read without end (2.9 GB in 5 s), `parse /dev/urandom` too.
    for device in ["/dev/zero", "/dev/urandom"] {
        assert_every_command_refuses(
            device,
            &format!(
                "flemma: cannot read {device}: it is a character device, not a regular file\n"
            ),
        );
    }
}

#[test]
fn a_directory_is_refused_as_a_directory() {
    // `run /tmp` used to say `no such file`.
    let marker = scratch("dir-marker", b"");
    let dir = marker.parent().unwrap().join("a-dir");
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.to_str().unwrap();
    assert_every_command_refuses(
        dir,
        &format!("flemma: cannot read {dir}: it is a directory, not a regular file\n"),
    );
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let marker = scratch("fifo-marker", b"");
    let fifo = marker.parent().unwrap().join("a.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.to_str().unwrap();
    // No writer ever opens it: a blocking open would never return.
    assert_every_command_refuses(
        fifo,
        &format!("flemma: cannot read {fifo}: it is a FIFO, not a regular file\n"),
    );
}

#[test]
fn invalid_utf8_in_the_middle_is_exit_2_with_offset_and_line_for_every_command() {
    let mut content = b"@You:\nhello\n\n@Assistant:\nfine so far\nthen \xc3\x28 breaks\n".to_vec();
    content.extend(b"more text\n".repeat(10_000));
    let path = scratch("middle.chat", &content);
    let file = path.to_str().unwrap();
    assert_every_command_refuses(
        file,
        &format!("flemma: {file}: invalid UTF-8 at byte offset 42 (line 6)\n"),
    );
    // Nothing was rewritten.
    assert_eq!(std::fs::read(&path).unwrap(), content);
}

#[test]
fn standard_input_stops_at_the_first_invalid_byte() {
    // `parse -` from /dev/urandom: the first bytes are (almost surely) not UTF-8; either way
    // the read must end with an error rather than grow without bound.
    for command in ["parse", "check", "fmt"] {
        let stdin = Stdio::from(std::fs::File::open("/dev/urandom").unwrap());
        let out = flemma_within(&[command, "-"], stdin);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.starts_with("flemma: <stdin>: invalid UTF-8 at byte offset "),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn standard_input_is_bounded_in_size() {
    // /dev/zero is valid UTF-8 forever: the size bound ends it.
    let stdin = Stdio::from(std::fs::File::open("/dev/zero").unwrap());
    let out = flemma_within(&["check", "-"], stdin);
    assert_eq!(
        (out.status.code(), text(&out.stderr).as_str()),
        (
            Some(2),
            "flemma: cannot read <stdin>: larger than 256 MiB, the most a transcript may be\n"
        )
    );
}

/// A transcript whose `bash` call has an input nested `depth` levels deep (the input object
/// counting as 1) and a command that leaves `marker` behind.
fn deep_call(dir: &Path, depth: usize) -> (Scratch, PathBuf) {
    let marker = dir.join(format!("ran-{depth}"));
    let _ = std::fs::remove_file(&marker);
    let nest = format!("{}{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
    let chat = format!(
        "@You:\ngo\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_deep`)\n\n```json\n{{\"command\":\"touch {}\",\"nest\":{nest}}}\n```\n",
        marker.display()
    );
    (
        scratch(&format!("deep-{depth}.chat"), chat.as_bytes()),
        marker,
    )
}

#[test]
fn a_tool_use_nested_too_deep_is_never_run_with_another_input() {
    // It used to parse as `input: {}`, and `cycle` ran bash with no command.
    for depth in [128, 1_000, 100_000] {
        let scratch = scratch("deep-marker", b"");
        let (chat, marker) = deep_call(scratch.parent().unwrap(), depth);
        let before = std::fs::read_to_string(&chat).unwrap();
        let file = chat.to_str().unwrap();
        let (code, stderr) = flemma(&[
            "cycle",
            file,
            "--set",
            r#"tools.auto_approve=["bash"]"#,
            "--set",
            "sandbox.enabled=false",
        ]);
        assert_eq!(code, 0, "{stderr}");
        let after = std::fs::read_to_string(&chat).unwrap();
        assert_eq!(
            after, before,
            "depth {depth}: the call must not be answered"
        );
        assert!(!marker.exists(), "depth {depth}: the call ran");
        let out = flemma_within(&["check", file], Stdio::null());
        let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "depth {depth}: {report}");
        assert!(
            report.contains(
                "Failed to parse tool input: the input nests deeper than 127 levels (the most a tool input may)"
            ),
            "depth {depth}: {report}"
        );
    }
    // At the limit the call runs with its own input.
    let scratch = scratch("deep-marker", b"");
    let (chat, marker) = deep_call(scratch.parent().unwrap(), 127);
    let (code, stderr) = flemma(&[
        "cycle",
        chat.to_str().unwrap(),
        "--set",
        r#"tools.auto_approve=["bash"]"#,
        "--set",
        "sandbox.enabled=false",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        marker.exists(),
        "the depth-127 call did not run its command"
    );
}
