//! `flemma lsp` as an editor starts it: the protocol's framing on standard input and
//! output, from the handshake to `shutdown` and `exit`.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{flemma, text};

/// One message in the protocol's framing.
fn frame(message: &Value) -> Vec<u8> {
    let body = message.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// The messages of the server's standard output.
fn messages(out: &[u8]) -> Vec<Value> {
    let out = text(out);
    let mut rest = out.as_str();
    let mut messages = Vec::new();
    while let Some(at) = rest.find("Content-Length: ") {
        let header = &rest[at + "Content-Length: ".len()..];
        let end = header.find("\r\n\r\n").unwrap();
        let length: usize = header[..end].parse().unwrap();
        let body = &header[end + 4..end + 4 + length];
        messages.push(serde_json::from_str(body).unwrap());
        rest = &header[end + 4 + length..];
    }
    messages
}

#[test]
fn an_editor_session_over_stdio_ends_cleanly() {
    let uri = "file:///tmp/flemma-cli-lsp/chat.chat";
    let text_of_chat = "@You:\nHi 😀.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{not json}\n```\n";
    let mut input = Vec::new();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "chat", "version": 1, "text": text_of_chat}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/documentSymbol", "params": {"textDocument": {"uri": uri}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}),
        json!({"jsonrpc": "2.0", "method": "exit"}),
    ] {
        input.extend(frame(&message));
    }
    let out = flemma(&["lsp"], Some(&input));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let messages = messages(&out.stdout);
    assert_eq!(messages[0]["id"], 1);
    assert_eq!(messages[0]["result"]["capabilities"]["textDocumentSync"], 2);
    let diagnostics = &messages[1];
    assert_eq!(diagnostics["method"], "textDocument/publishDiagnostics");
    assert_eq!(
        diagnostics["params"]["diagnostics"][0]["range"]["start"]["line"],
        4
    );
    let symbols = &messages[2];
    assert_eq!(symbols["id"], 2);
    assert_eq!(symbols["result"][1]["name"], "@Assistant");
    assert_eq!(
        messages[3],
        json!({"jsonrpc": "2.0", "id": 3, "result": null})
    );
}

#[test]
fn standard_input_closed_without_shutdown_is_a_failure() {
    let input = frame(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
    );
    let out = flemma(&["lsp"], Some(&input));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("without shutdown"),
        "{}",
        text(&out.stderr)
    );
}

/// The conversation the editor opens: a pending call, non-ASCII text before it.
const PENDING: &str = "@You:\nList the café's files 😀.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"command\": \"ls ☕\"}\n```\n\n@You:\n**Tool Result:** `toolu_1` (pending)\n```\n```\n";

#[test]
fn neovim_approves_a_call_through_flemma_lsp_as_flemma_approve_would() {
    if std::process::Command::new("nvim")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("nvim is missing: run scripts/test, which installs Debian's neovim");
    }
    let chat = crate::scratch("lsp-nvim.chat", PENDING.as_bytes());
    let by_cli = crate::scratch("lsp-cli.chat", PENDING.as_bytes());
    let report_path = chat.with_file_name("report.json");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/lsp/client.lua");
    let out = std::process::Command::new("nvim")
        .args(["--headless", "--clean", "-n", "-i", "NONE"])
        .arg(&chat)
        .arg("-c")
        .arg(format!("luafile {}", script.display()))
        .env("FLEMMA_BIN", env!("CARGO_BIN_EXE_flemma"))
        .env("FLEMMA_OUT", &report_path)
        // The language server Neovim starts keeps its ledger of placements where the
        // `flemma cycle` below reads it.
        .env("XDG_STATE_HOME", crate::state_home())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
    assert_eq!(report["error"], Value::Null, "{report}");
    assert_eq!(
        report["steps"],
        json!(["initialized", "approved and saved", "stopped"])
    );
    assert!(
        report["hover"]
            .as_str()
            .unwrap()
            .contains("**Tool Use** `bash` (`toolu_1`): result: pending"),
        "{report}"
    );
    assert_eq!(report["definition"], report["result_line"]);
    assert_eq!(
        report["actions"],
        json!([
            "Approve toolu_1",
            "Reject toolu_1",
            "Approve all pending",
            "Run the tool cycle"
        ])
    );
    assert!(
        report["hover_after"]
            .as_str()
            .unwrap()
            .contains("**Tool Result** `toolu_1` (approved)"),
        "{report}"
    );
    assert_eq!(report["symbols"], json!(["@You", "@Assistant", "@You"]));
    // The file Neovim saved is the file `flemma approve` writes.
    let approved = flemma(&["approve", by_cli.to_str().unwrap(), "toolu_1"], None);
    assert_eq!(
        approved.status.code(),
        Some(0),
        "{}",
        text(&approved.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&chat).unwrap(),
        std::fs::read_to_string(&by_cli).unwrap()
    );
    // The editor's approval is a person's: the next cycle runs the call (it does not go
    // back to pending, as an `(approved)` that came in the file would).
    let cycle = flemma(
        &[
            "cycle",
            chat.to_str().unwrap(),
            "--set",
            "sandbox.enabled=false",
        ],
        None,
    );
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    let after = std::fs::read_to_string(&chat).unwrap();
    assert!(
        !after.contains("(pending)") && !after.contains("(approved)"),
        "{after}"
    );
}
