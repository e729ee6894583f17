//! Black-box tests of the `flemma` binary: exit codes, JSON contracts, files and stdin.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

#[cfg(unix)]
mod claims;
mod compaction;
mod hooks;
mod input;
#[cfg(unix)]
mod jobs;
#[cfg(feature = "lsp")]
mod lsp;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(all(unix, feature = "mcp"))]
mod mcp_serve;
mod notices;
#[cfg(feature = "otel")]
mod otel;
mod output;
mod paths;
#[cfg(feature = "lua")]
mod policy;
mod protect;
mod run;
mod scratch;
mod secrets;
mod selection;
#[cfg(unix)]
mod signals;
mod streams;
// Linux: the terminal is opened close-on-exec (`O_CLOEXEC` on `/dev/ptmx`, TIOCGPTPEER) and
// its command started by util-linux `setsid`.
#[cfg(target_os = "linux")]
mod terminal;
mod tools;
#[cfg(unix)]
mod trust;
mod usage;
#[cfg(all(unix, feature = "object-store"))]
mod worker;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;

use crate::scratch::Scratch;

pub(crate) fn peer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/peer")
}

/// Where the commands the tests run keep their ledger of placements (not the user's state).
/// Where the `flemma` processes of this test run keep their state (the ledger of
/// placements): one directory per test process, so that no entry left by an earlier run
/// can approve a call in this one, and nothing is written under the home directory.
pub(crate) fn state_home() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("flemma-cli-state")
        .join(std::process::id().to_string())
}

/// The `flemma` binary under test, keeping its state in [`state_home`].
pub(crate) fn flemma_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_flemma"));
    command.env("XDG_STATE_HOME", state_home());
    command
}

fn flemma(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = flemma_command()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The file `name` holding `content`, in a directory of its own (`flemma-cli-test-PID-NAME`
/// under the temporary directory) that is removed when the returned guard is dropped.
fn scratch(name: &str, content: &[u8]) -> Scratch {
    Scratch::new(format!("flemma-cli-test-{}-{name}", std::process::id())).file(name, content)
}

fn peer_chats() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(peer_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "chat"))
        .collect();
    files.sort();
    assert!(files.len() >= 17, "peer fixtures missing");
    files
}

#[test]
fn parse_json_prints_the_documented_ast_for_every_peer_transcript() {
    for path in peer_chats() {
        let out = flemma(&["parse", path.to_str().unwrap(), "--json"], None);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            path.display(),
            text(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let expected =
            serde_json::to_value(flemma::ast::parse(&std::fs::read_to_string(&path).unwrap()))
                .unwrap();
        assert_eq!(json, expected, "{}", path.display());
        check_contract(&json);
    }
}

/// The field names ARCHITECTURE.md promises.
fn check_contract(doc: &serde_json::Value) {
    let obj = doc.as_object().unwrap();
    for key in ["frontmatter", "messages", "diagnostics"] {
        assert!(obj.contains_key(key), "missing {key}");
    }
    if let Some(fm) = doc["frontmatter"].as_object() {
        for key in ["language", "code", "span"] {
            assert!(fm.contains_key(key), "frontmatter lacks {key}");
        }
    }
    for message in doc["messages"].as_array().unwrap() {
        assert!(
            message["role"].is_string()
                && message["span"]["start_line"].is_u64()
                && message["span"]["end_line"].is_u64()
        );
        for segment in message["segments"].as_array().unwrap() {
            let keys: &[&str] = match segment["kind"].as_str().unwrap() {
                "text" => &["value"],
                "expression" | "code" => &["code"],
                "thinking" => &["content", "signature", "redacted"],
                "tool_use" => &["id", "name", "input"],
                "tool_result" => &["tool_use_id", "status", "meta", "content"],
                "job_result" => &["job_id", "status", "meta", "content"],
                "aborted" => &["message"],
                "malformed" => &["text"],
                other => panic!("undocumented segment kind {other}"),
            };
            for key in keys {
                assert!(segment.get(key).is_some(), "{segment} lacks {key}");
            }
        }
    }
    for d in doc["diagnostics"].as_array().unwrap() {
        for key in ["kind", "severity", "message", "line"] {
            assert!(d.get(key).is_some(), "diagnostic lacks {key}");
        }
    }
}

/// Spec §1.7: a result's fence language is not interpreted, so a `json` fence around text that
/// is not JSON is no problem (the reference's own test expects no diagnostics).
#[test]
fn check_accepts_a_json_fenced_result_that_is_not_json() {
    let path = peer_dir().join("conversation_malformed_tool_result.chat");
    let out = flemma(&["check", path.to_str().unwrap()], None);
    assert_eq!(
        (out.status.code(), text(&out.stdout), text(&out.stderr)),
        (Some(0), String::new(), String::new())
    );
}

/// The coverage the malformed-result fixture used to give: a parser diagnostic, with its line,
/// as text and as JSON, and exit 1.
#[test]
fn check_reports_a_parser_diagnostic_with_its_line_and_exits_1() {
    let path = scratch(
        "no_fence.chat",
        b"@You:\n**Tool Result:** `t1`\nno fence here\n",
    );
    let out = flemma(&["check", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        format!(
            "{}:2: warning: tool_result: Tool result requires a fenced code block\n",
            path.display()
        )
    );
    let out = flemma(&["check", path.to_str().unwrap(), "--json"], None);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["diagnostics"][0]["line"], 2);
    assert_eq!(json["diagnostics"][0]["kind"], "tool_result");
}

#[test]
fn check_passes_clean_files_silently() {
    let path = peer_dir().join("conversation_with_tools.chat");
    let out = flemma(&["check", path.to_str().unwrap()], None);
    assert_eq!((out.status.code(), out.stdout.len()), (Some(0), 0));
}

#[test]
fn parse_reads_standard_input_and_prints_a_tree() {
    let out = flemma(
        &["parse", "-"],
        Some(b"@You:\nhi {{ x }}\n\n@Assistant:\n<thinking>\nhm\n</thinking>\n"),
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "@You (lines 1-3)\n  text \"hi \" (line 2)\n  expression \" x \" (line 2)\n@Assistant (lines 4-7)\n  thinking, unsigned (lines 5-7)\n"
    );
}

#[test]
fn fmt_rewrites_in_place_keeps_crlf_and_checks() {
    let path = scratch(
        "messy.chat",
        b"@You:  \r\nhi\r\n\r\n\r\n\r\n@Assistant:\r\nyo",
    );
    let arg = path.to_str().unwrap();
    assert_eq!(
        flemma(&["fmt", arg, "--check"], None).status.code(),
        Some(1)
    );
    let out = flemma(&["fmt", arg], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\r\nhi\r\n\r\n@Assistant:\r\nyo\r\n"
    );
    let out = flemma(&["fmt", arg, "--check", "--json"], None);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["changed"], false);
    let out = flemma(&["fmt", "-"], Some(b"@You:\nhi\n\n\n"));
    assert_eq!(text(&out.stdout), "@You:\nhi\n");
}

#[test]
fn fmt_writes_through_the_store_writer_keeping_the_mode_and_no_backup() {
    use std::os::unix::fs::PermissionsExt as _;
    let path = scratch("mode.chat", b"@You:\nhi\n\n\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = flemma(&["fmt", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "@You:\nhi\n");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    // No `version` backup and no temporary file is left beside it.
    let dir = path.parent().unwrap();
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("mode") && n != "mode.chat" && n != ".mode.chat.lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn canonical_peer_transcripts_pass_fmt_check() {
    let path = peer_dir().join("conversation_parallel_tools.chat");
    assert_eq!(
        flemma(&["fmt", path.to_str().unwrap(), "--check"], None)
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn invalid_utf8_is_an_error_naming_file_and_offset() {
    let path = scratch("bad.chat", b"@You:\nab\xff\n");
    let out = flemma(&["parse", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "flemma: {}: invalid UTF-8 at byte offset 8 (line 2)\n",
            path.display()
        )
    );
}

#[test]
fn io_and_usage_errors_exit_2() {
    let out = flemma(&["check", "/nonexistent/x.chat"], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "flemma: cannot read /nonexistent/x.chat: {}\n",
            std::fs::read("/nonexistent/x.chat").unwrap_err()
        )
    );
    assert_eq!(flemma(&["frobnicate"], None).status.code(), Some(2));
    assert_eq!(flemma(&["parse"], None).status.code(), Some(2));
}

/// `flemma parse big.chat | head -1`: the reader closing the pipe early ends the command
/// quietly, with success.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let mut transcript = String::new();
    for i in 0..40_000 {
        write!(
            transcript,
            "@You:\nQuestion {i}, padded to make the transcript a few megabytes long.\n\n\
             @Assistant:\nAnswer {i}, padded to make the transcript a few megabytes long.\n\n"
        )
        .unwrap();
    }
    let path = scratch("big.chat", transcript.as_bytes());
    for args in [vec!["parse"], vec!["parse", "--json"]] {
        let mut child = flemma_command()
            .args(&args)
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
        assert!(!first.is_empty(), "{args:?}");
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            (out.status.code(), text(&out.stderr)),
            (Some(0), String::new()),
            "{args:?}"
        );
    }
}

#[test]
fn empty_input_is_an_empty_document() {
    let out = flemma(&["parse", "-", "--json"], Some(b""));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["messages"], serde_json::json!([]));
    assert_eq!(json["frontmatter"], serde_json::Value::Null);
}

#[test]
fn approval_explain_reads_lua_frontmatter() {
    let path = peer_dir().join("conversation_truncated_background_jobs.chat");
    let file = path.to_str().unwrap();
    // The frontmatter appends calculator_async to tools.auto_approve.
    let out = flemma(
        &[
            "approval",
            "explain",
            file,
            "--tool",
            "calculator_async",
            "--json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["decision"], "approve");
    assert_eq!(json["resolver"], "urn:flemma:approval:config");
    // read comes from $standard.
    let out = flemma(&["approval", "explain", file, "--tool", "read"], None);
    let stdout = text(&out.stdout);
    let (decision, writable) = stdout.split_once("writable: ").unwrap();
    assert_eq!(
        decision,
        "read: approve (decided by urn:flemma:approval:config)\n   150  urn:flemma:approval:bash-rules   pass\n   100  urn:flemma:approval:config       approve: matched auto_approve entry \"read\"\n    25  urn:flemma:approval:sandbox      pass: the tool does not declare auto_approves_if_sandboxed\n     0  urn:flemma:approval:catch-all    pass\n"
    );
    // Then the writable set (tested in `paths`).
    assert!(
        writable.starts_with("tools may write only under\n  /"),
        "{writable}"
    );
    // bash: no rule; the sandbox decides when a backend is there (any executable stands in).
    let out = flemma(
        &[
            "approval",
            "explain",
            file,
            "--tool",
            "bash",
            "--json",
            "--set",
            "sandbox.backends.bwrap.path=/nonexistent/bwrap",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (json["decision"].as_str(), json["resolver"].as_str()),
        (Some("require_approval"), Some("default"))
    );
    assert_eq!(
        json["trace"][2]["detail"],
        "no sandbox backend is available"
    );
    let out = flemma(
        &[
            "approval",
            "explain",
            file,
            "--tool",
            "bash",
            "--json",
            "--set",
            "sandbox.backends.bwrap.path=/bin/sh",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["resolver"], "urn:flemma:approval:sandbox");
    // A runtime override of the policy (no sandbox backend, so that the catch-all is the
    // one to approve even where bubblewrap is installed).
    let out = flemma(
        &[
            "approval",
            "explain",
            file,
            "--tool",
            "bash",
            "--json",
            "--set",
            "tools.require_approval=false",
            "--set",
            "sandbox.backends.bwrap.path=/nonexistent/bwrap",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["resolver"], "urn:flemma:approval:catch-all");
}

#[test]
fn approval_explain_reads_flemma_toml() {
    let chat = scratch(
        "explain.chat",
        b"```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"!read\"]}}}\n```\n@You:\nhi\n",
    );
    let toml = scratch(
        "flemma.toml",
        b"[tools]\nauto_approve = [\"$readonly\", \"deploy\"]\n",
    );
    let run = |tool: &str| {
        let out = flemma(
            &[
                "approval",
                "explain",
                chat.to_str().unwrap(),
                "--tool",
                tool,
                "--json",
                "--config",
                toml.to_str().unwrap(),
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["decision"].as_str().unwrap().to_owned()
    };
    assert_eq!(run("deploy"), "approve");
    assert_eq!(run("grep"), "approve");
    assert_eq!(
        run("read"),
        "require_approval",
        "the frontmatter removed it"
    );
    assert_eq!(run("write"), "require_approval", "not in $readonly");
}

/// `--set` before the subcommand and after it: both count, in the order given (clap's global
/// arguments kept only the subcommand's).
#[test]
fn set_before_and_after_the_subcommand_both_apply_in_order() {
    let chat = scratch("sets.chat", b"@You:\nhi\n");
    let chat = chat.to_str().unwrap();
    let explain = |args: &[&str]| {
        let out = flemma(args, None);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let json = explain(&[
        "--set",
        r#"tools.auto_approve=["deploy"]"#,
        "approval",
        "explain",
        chat,
        "--tool",
        "deploy",
        "--json",
        "--set",
        "sandbox.enabled=false",
    ]);
    assert_eq!(
        json["decision"], "approve",
        "the --set before the subcommand"
    );
    assert_eq!(
        json["writable"]["reason"], "sandbox.enabled is false",
        "the --set after it"
    );
    // Between the subcommands too, and a later value wins.
    let json = explain(&[
        "--set",
        r#"tools.auto_approve=["deploy"]"#,
        "approval",
        "--set",
        "sandbox.enabled=false",
        "explain",
        chat,
        "--tool",
        "deploy",
        "--json",
        "--set",
        r#"tools.auto_approve=["other"]"#,
    ]);
    assert_eq!(json["decision"], "require_approval", "the last --set wins");
    assert_eq!(json["writable"]["reason"], "sandbox.enabled is false");
}

#[test]
fn bad_options_are_errors_with_places() {
    let chat = scratch(
        "opts.chat",
        b"```lua\nflemma.opt.tools.max_concurent = 4\n```\n@You:\nhi\n",
    );
    let out = flemma(&["check", chat.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        format!(
            "{}:2: error: frontmatter: invalid option: unknown option `tools.max_concurent` -- did you mean `tools.max_concurrent`?\n",
            chat.display()
        )
    );
    let out = flemma(
        &["approval", "explain", chat.to_str().unwrap(), "--tool", "x"],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "flemma: {}:2: invalid option: unknown option `tools.max_concurent` -- did you mean `tools.max_concurrent`?\n",
            chat.display()
        )
    );
    let toml = scratch("broken.toml", b"[tools]\nmax_concurrent = = 4\n");
    let out = flemma(
        &[
            "approval",
            "explain",
            chat.to_str().unwrap(),
            "--tool",
            "x",
            "--config",
            toml.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "flemma: {}:2:18: extra `=`, expected nothing\n",
            toml.display()
        )
    );
    let out = flemma(
        &[
            "approval",
            "explain",
            chat.to_str().unwrap(),
            "--tool",
            "x",
            "--set",
            "tools.auto_approve=[\"+^x\"]",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "flemma: --set \"tools.auto_approve=[\\\"+^x\\\"]\": invalid list item \"+^x\" for \
         `tools.auto_approve`: list operators do not compose\n"
    );
}

#[test]
fn store_path_prints_the_spec_example() {
    let home = std::env::var("HOME").unwrap();
    let chat = format!("{home}/notes/example.chat");
    let out = flemma(
        &["store", "path", &chat, "--tool", "bash", "--id", "toolu_01"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("{home}/notes/.flemma/example.chat/tool_bash_toolu_01.txt\n")
    );
    let out = flemma(
        &[
            "store",
            "path",
            &chat,
            "--tool",
            "flemma.jobs.status",
            "--id",
            "job:1",
            "--source",
            "job",
            "--json",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["path"],
        // The spec's example writes `job--1`; ids escape one to one here (`:` is `--3a`), so
        // that `job:1` and `job 1` never share a file (the book's security chapter, departures).
        format!("{home}/notes/.flemma/example.chat/job_flemma__jobs__status_job--3a1.txt")
    );
}

#[test]
fn store_path_follows_options_and_frontmatter() {
    let chat = scratch("store.chat", b"```json\n{\"flemma\": {\"tools\": {\"store\": {\"path_format\": \"/srv/store/{{ id }}.log\"}}}}\n```\n@You:\nhi\n");
    let out = flemma(
        &[
            "store",
            "path",
            chat.to_str().unwrap(),
            "--tool",
            "bash",
            "--id",
            "../../etc/passwd",
        ],
        None,
    );
    assert_eq!(
        text(&out.stdout),
        "/srv/store/--2e.--2f..--2fetc--2fpasswd.log\n"
    );
    let out = flemma(
        &[
            "store",
            "path",
            "x.chat",
            "--tool",
            "bash",
            "--id",
            "t",
            "--set",
            "tools.store.path_format=$nope",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "flemma: Unknown store preset '$nope' (known: $chat, $state)\n"
    );
}

#[test]
fn request_prints_a_body_for_each_provider() {
    let path = peer_dir().join("conversation_with_tools.chat");
    let file = path.to_str().unwrap();
    for (provider, trailing) in [
        ("anthropic", "\"messages\":"),
        ("openai", "\"input\":"),
        ("openai-chat", "\"messages\":"),
        ("vertex", "\"contents\":"),
    ] {
        let out = flemma(&["request", "--provider", provider, file], None);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{provider}: {}",
            text(&out.stderr)
        );
        let body = text(&out.stdout);
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(json.is_object(), "{provider}");
        // The conversation is the last key, after the tools (prompt-cache stability).
        let tail = body.rfind(trailing).unwrap();
        assert!(
            body.rfind("\"tools\":").unwrap() < tail,
            "{provider}: {body}"
        );
        assert!(
            body.contains("calculator") || body.contains("15 * 7"),
            "{provider}"
        );
    }
    let out = flemma(
        &[
            "request",
            "--provider",
            "anthropic",
            "--model",
            "claude-opus-4-1",
            file,
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["model"], "claude-opus-4-1");
}

#[test]
fn request_warns_about_unresolved_tool_uses() {
    let path = peer_dir().join("conversation_parallel_incomplete.chat");
    let out = flemma(
        &["request", "--provider", "anthropic", path.to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr)
            .contains("Tool call 'calculator' (toolu_01BBB) has no matching tool result."),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("No result provided"));
}

/// The transcript's templates are Lua, the CLI's default engine with the `lua` feature.
#[cfg(feature = "lua")]
#[test]
fn request_renders_templates_and_attaches_referenced_files() {
    let chat = scratch(
        "templated.chat",
        b"```lua\nwho = \"Ada\"\n```\n@You:\nHello from {{ who:lower() }}: @./pixel.png and {{ include('note.txt') }}\n",
    );
    let dir = chat.parent().unwrap();
    std::fs::write(dir.join("pixel.png"), b"\x89PNG\r\n\x1a\nrest").unwrap();
    std::fs::write(dir.join("note.txt"), "a note about {{ who }}").unwrap();
    let out = flemma(
        &["request", "--provider", "anthropic", chat.to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let content = &json["messages"][0]["content"];
    assert_eq!(content[0]["text"], "Hello from ada: ");
    assert_eq!(content[1]["type"], "image");
    assert_eq!(content[1]["source"]["media_type"], "image/png");
    assert_eq!(content[2]["text"], " and a note about Ada");

    // The same conversation as Jinja: `who:lower()` does not compile, so the text is sent as
    // written and the command fails after printing the body.
    let out = flemma(
        &[
            "request",
            "--provider",
            "anthropic",
            "--templates",
            "jinja",
            chat.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("templated.chat:5: error: Template error"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        json["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("{{ who:lower() }}")
    );
}
