//! Black-box tests of the `flemma` binary: exit codes, JSON contracts, files and stdin.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use pretty_assertions::assert_eq;

fn peer_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/peer")
}

fn flemma(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flemma"))
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

fn scratch(name: &str, content: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flemma-cli-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
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

#[test]
fn check_reports_the_malformed_result_with_its_line_and_exits_1() {
    let path = peer_dir().join("conversation_malformed_tool_result.chat");
    let out = flemma(&["check", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(&format!(
            "{}:19: warning: tool_result: Tool result is fenced as json but is not valid JSON",
            path.display()
        )),
        "{stdout}"
    );
    let out = flemma(&["check", path.to_str().unwrap(), "--json"], None);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["diagnostics"][0]["line"], 19);
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
            "flemma: {}: invalid UTF-8 at byte offset 8\n",
            path.display()
        )
    );
}

#[test]
fn io_and_usage_errors_exit_2() {
    let out = flemma(&["check", "/nonexistent/x.chat"], None);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("flemma: /nonexistent/x.chat: ") && stderr.lines().count() == 1,
        "{stderr}"
    );
    assert_eq!(flemma(&["frobnicate"], None).status.code(), Some(2));
    assert_eq!(flemma(&["parse"], None).status.code(), Some(2));
}

#[test]
fn empty_input_is_an_empty_document() {
    let out = flemma(&["parse", "-", "--json"], Some(b""));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["messages"], serde_json::json!([]));
    assert_eq!(json["frontmatter"], serde_json::Value::Null);
}
