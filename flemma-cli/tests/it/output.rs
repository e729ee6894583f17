//! What `flemma run` shows without a terminal: each response's text set apart on stdout, each
//! result's first lines under its status line on stderr, plain text (no escape codes); and its
//! error wording: the causes, once each, and `-v` / `RUST_LOG` diagnostics.

use std::path::Path;
use std::process::{Output, Stdio};

use pretty_assertions::assert_eq;

use crate::scratch::Scratch;
use crate::{scratch, text};

/// `flemma run FILE --provider scripted --script SCRIPT --approve all ARGS`, the sandbox off,
/// run from FILE's directory (the command line and the output name no temporary path).
fn run(chat: &Path, script: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let dir = chat.parent().unwrap();
    std::fs::write(dir.join("script.json"), script).unwrap();
    crate::flemma_command()
        .args(["run", chat.file_name().unwrap().to_str().unwrap()])
        .args(["--provider", "scripted", "--script", "script.json"])
        .args(["--approve", "all", "--set", "sandbox.enabled=false"])
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn chat(name: &str, content: &str) -> Scratch {
    scratch(&format!("{name}.chat"), content.as_bytes())
}

#[test]
fn turns_are_set_apart_and_results_show_under_their_status_lines() {
    let chat = chat("shown", "@You:\nCount.\n");
    let out = run(
        &chat,
        r#"[
            {"text": "Two lines first.", "tool_uses": [{"name": "bash", "input": {"command": "printf 'a\\nb\\n'", "label": "two"}}]},
            {"text": "Now ten.", "tool_uses": [{"name": "bash", "input": {"command": "seq 1 10; exit 3", "label": "ten"}}]},
            {"text": "Done."}
        ]"#,
        &[],
        &[],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stdout.contains('\x1b') && !stderr.contains('\x1b'));
    insta::assert_snapshot!(stdout, @r"
    Two lines first.

    Now ten.

    Done.
    ");
    insta::assert_snapshot!(stderr, @r"
    request 1
    running: bash: $ printf 'a\nb\n' — two
    ok: bash: $ printf 'a\nb\n' — two
        a
        b
    request 2
    running: bash: $ seq 1 10; exit 3 — ten
    error: bash: $ seq 1 10; exit 3 — ten
        1
        2
        3
        … 8 more lines
        Command exited with code 3
    request 3
    stopped: finished
    ");
}

/// A call the transcript rejects: its line says so, with the text the model is told.
#[test]
fn a_rejected_call_shows_why_on_stderr() {
    let chat = chat(
        "rejected",
        "@You:\nClean.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_r`)\n```json\n\
         {\"command\": \"rm -rf build\", \"label\": \"cleaning\"}\n```\n\n\
         @You:\n**Tool Result:** `toolu_r` (rejected)\n```\n```\n",
    );
    let out = run(&chat, r#"[{"text": "Understood."}]"#, &[], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("error: bash (toolu_r)\n    This tool has been rejected by the user.\n"),
        "{stderr}"
    );
}

/// `Failed to start job` is the model's text (spec §13); the cause reaches the user as a
/// warning on stderr, which `RUST_LOG=off` silences.
#[test]
fn a_command_that_cannot_start_names_its_cause() {
    let chat = chat("nostart", "@You:\nSay hi.\n");
    let script = r#"[{"tool_uses": [{"name": "bash", "input": {"command": "echo hi", "label": "greeting"}}]}, {"text": "Done."}]"#;
    let args = ["--set", "tools.bash.cwd=/nonexistent/dir"];
    let out = run(&chat, script, &args, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            " WARN bash: cannot start bash in /nonexistent/dir: No such file or directory \
             (os error 2) tool_id=toolu_scripted_1_1\n"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: bash: $ echo hi — greeting\n    Failed to start job\n"),
        "{stderr}"
    );
    std::fs::write(&chat, "@You:\nSay hi.\n").unwrap();
    let out = run(&chat, script, &args, &[("RUST_LOG", "off")]);
    assert!(!text(&out.stderr).contains("WARN"), "{}", text(&out.stderr));
}

/// `-v` is repeatable: `-vv` shows the library's debug events, with their targets.
#[test]
fn verbose_shows_the_library_diagnostics() {
    let chat = chat("verbose", "@You:\nHi.\n");
    let out = run(&chat, r#"[{"text": "Hello."}]"#, &["-vv"], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The span names the conversation by its id (a UUID of the file's path); the cycle runs
    // inside the run's `invoke_agent` span, which names it too.
    let done = stderr
        .lines()
        .find(|line| line.contains("}: flemma_runtime::executor: cycle done"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(done.starts_with("DEBUG invoke_agent{"), "{done}");
    let id = done
        .split_once(":flemma.cycle{conversation=")
        .and_then(|(_, rest)| rest.split_once('}'))
        .map_or_else(|| panic!("{done}"), |(id, _)| id);
    assert_eq!(id.len(), 36, "{done}");
    // Without -v: only warnings, and there are none.
    let out = run(&chat, r#"[{"text": "Hello."}]"#, &[], &[]);
    assert!(!text(&out.stderr).contains("DEBUG"));
    // RUST_LOG adds directives of its own.
    let out = run(
        &chat,
        r#"[{"text": "Hello."}]"#,
        &[],
        &[("RUST_LOG", "flemma_runtime=debug")],
    );
    assert!(text(&out.stderr).contains("cycle done"));
}

#[test]
fn a_malformed_script_says_what_was_expected_and_where() {
    let chat = chat("badscript", "@You:\nHi.\n");
    let out = run(&chat, r#"[{"text": "Hi."}, {"txt": "typo"}]"#, &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "flemma: script.json: turn 2 is not a valid turn: unknown field `txt`, expected one of \
         `thinking`, `text`, `tool_uses`, `usage`, `recording`, `provider`, `error`, `delay_ms`\n"
    );
    let out = run(&chat, r#"{"turn": []}"#, &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "flemma: script.json is not a valid script: expected a list of turns or \
         {\"turns\": [...]}, found an object without \"turns\"\n"
    );
}
