//! Servers that misbehave on purpose: a scripted fake server (Python, no SDK: it writes
//! what a real SDK never would) bursts `notifications/tools/list_changed`, writes invalid
//! UTF-8 on stderr, answers with messages that cannot be decoded, and offers tools whose
//! names are too long or carry terminal escapes.

use std::time::Duration;

use flemma_core::ToolOutput;
use flemma_mcp::McpServerConfig;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::scratch::Scratch;
use crate::support::{call, eventually, python, registry_with, scratch};

/// The fake server: JSON-RPC over stdio by hand. Its tools are `echo`, `burst` (sends N
/// list changes, after which the list also has `after`), `lists` (how many `tools/list`
/// it answered), `stderr` (writes an invalid byte and 256 KiB on stderr, with the default
/// SIGPIPE: it dies if its stderr is no longer read), and answers that cannot be decoded:
/// `huge` (17 MiB, its id last, as the TypeScript SDK writes), `bad_utf8`, `truncated`
/// (its id first) and `truncated_ts` (no id to read). With `names`, it also offers a tool
/// whose name is too long on the wire and one whose name holds a terminal escape.
const SERVER: &str = r#"
import json, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
out = sys.stdout.buffer
names = "names" in sys.argv
lists = 0
after = False

def send(message):
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()

def tool(name, schema=None):
    return {"name": name, "inputSchema": schema or {"type": "object"}}

def tools():
    listed = [tool(n) for n in ["echo", "burst", "lists", "stderr", "huge", "bad_utf8", "truncated", "truncated_ts"]]
    if after:
        listed.append(tool("after"))
    if names:
        listed.append(tool("x" * 62))
        listed.append(tool("evil\x1b[2K\u202ename", {"type": "string"}))
    return listed

for line in sys.stdin.buffer:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if id is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
    elif method == "tools/list":
        lists += 1
        send({"jsonrpc": "2.0", "id": id, "result": {"tools": tools()}})
    elif method == "tools/call":
        name = message["params"]["name"]
        text = lambda t: {"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": t}]}}
        if name == "burst":
            for _ in range(2000):
                out.write(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n')
            out.flush()
            after = True
            send(text("burst sent"))
        elif name == "lists":
            send(text(str(lists)))
        elif name == "stderr":
            err = sys.stderr.buffer
            err.write(b"invalid \xff byte\n")
            err.flush()
            for i in range(4096):
                err.write(b"%d %s\n" % (i, b"e" * 60))
            err.flush()
            send(text("still here"))
        elif name == "huge":
            body = b'{"result":{"content":[{"type":"text","text":"' + b"h" * (17 * 1024 * 1024) + b'"}]},"jsonrpc":"2.0","id":' + json.dumps(id).encode() + b"}\n"
            out.write(body)
            out.flush()
        elif name == "bad_utf8":
            out.write(b'{"jsonrpc":"2.0","id":' + json.dumps(id).encode() + b',"result":{"content":[{"type":"text","text":"\xff"}]}}\n')
            out.flush()
        elif name == "truncated":
            out.write(b'{"jsonrpc":"2.0","id":' + json.dumps(id).encode() + b',"result":{"content":[{"type":"te\n')
            out.flush()
        elif name == "truncated_ts":
            out.write(b'{"result":{"content":[{"type":"te\n')
            out.flush()
        else:
            send(text("ok"))
"#;

/// The fake server as server `name` (`args` as its command-line arguments), and the directory
/// of its script (to keep until the server is gone).
fn hostile(name: &str, args: &[&str]) -> (Scratch, McpServerConfig) {
    let dir = scratch(&format!("hostile-{name}"));
    let script = dir.join("server.py");
    std::fs::write(&script, SERVER).unwrap();
    let mut all = vec![script.to_string_lossy().into_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let server = McpServerConfig::stdio(name, python().to_string_lossy())
        .unwrap()
        .with_args(all)
        .with_startup_timeout(Duration::from_secs(30));
    (dir, server)
}

fn text(out: &ToolOutput) -> String {
    match out {
        ToolOutput::Success(flemma_core::Output::Text(text)) => text.clone(),
        other => panic!("a text result expected: {other:?}"),
    }
}

#[tokio::test]
async fn a_burst_of_list_changes_is_coalesced_into_few_listings() {
    let (_dir, server) = hostile("burst", &[]);
    let (registry, _) = registry_with(vec![server]).await;
    assert_eq!(
        call(&registry, "burst.burst", json!({})).await,
        ToolOutput::text("burst sent")
    );
    eventually("the list after the burst registered", || {
        registry.contains("burst.after")
    })
    .await;
    // The server answers in order: `lists` is answered after every listing asked before
    // it. The first listing, one for the 2,000 notifications, at most a few more for
    // those handled after it ended (not one each).
    let lists: usize = text(&call(&registry, "burst.lists", json!({})).await)
        .parse()
        .unwrap();
    assert!(lists <= 5, "{lists} listings for one burst");
    assert!(registry.take_warnings().is_empty());
}

#[tokio::test]
async fn invalid_utf8_on_stderr_does_not_stop_its_reader() {
    // Had flemma stopped reading stderr, the server (default SIGPIPE) would die writing.
    let (_dir, server) = hostile("noisy", &[]);
    let (registry, _) = registry_with(vec![server]).await;
    assert_eq!(
        call(&registry, "noisy.stderr", json!({})).await,
        ToolOutput::text("still here")
    );
    assert_eq!(
        call(&registry, "noisy.stderr", json!({})).await,
        ToolOutput::text("still here")
    );
}

#[tokio::test]
async fn an_answer_that_cannot_be_decoded_fails_its_call_at_once_naming_the_cause() {
    // A timeout longer than the test may take: the failure must come from the answer.
    let (_dir, server) = hostile("garbled", &[]);
    let server = server.with_tool_timeout(Duration::from_secs(600));
    let (registry, _) = registry_with(vec![server]).await;
    let failures = [
        (
            "garbled.huge",
            "the message is over the size limit of 16 MiB (16777216 bytes; 17825865 received)",
        ),
        (
            "garbled.bad_utf8",
            "the message is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 68",
        ),
        (
            "garbled.truncated",
            "the message is not valid JSON: EOF while parsing a string at line 1 column 56",
        ),
        (
            "garbled.truncated_ts",
            "the message is not valid JSON: EOF while parsing a string at line 1 column 33",
        ),
    ];
    for (tool, cause) in failures {
        // The size counts the id's digits: the first call's id is the same on every run.
        let out = tokio::time::timeout(Duration::from_secs(120), call(&registry, tool, json!({})))
            .await
            .unwrap_or_else(|_| panic!("{tool}: no answer"));
        assert_eq!(
            out,
            ToolOutput::error(format!(
                "MCP server 'garbled' answered the call with a message flemma could not decode: {cause}"
            )),
            "{tool}"
        );
        // The connection still serves the next call.
        assert_eq!(
            call(&registry, "garbled.echo", json!({})).await,
            ToolOutput::text("ok")
        );
    }
}

#[tokio::test]
async fn a_tool_too_long_on_the_wire_is_not_offered_and_names_are_shown_escaped() {
    let (_dir, server) = hostile("h", &["names"]);
    let (registry, _) = registry_with(vec![server]).await;
    let long = "x".repeat(62);
    assert!(registry.contains("h.echo"));
    assert!(!registry.contains(&format!("h.{long}")));
    let warnings: Vec<String> = registry
        .take_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            "h: tool 'evil\\x1b[2K\\u{202e}name' registered as 'h.evil_2K_name' (the tool-name rule)".to_owned(),
            "h: tool 'evil\\x1b[2K\\u{202e}name' skipped: its input schema cannot be used: its type is \"string\", not \"object\"".to_owned(),
            format!("h: tool '{long}' skipped: its name 'h.{long}' is 65 characters on the wire, and providers accept at most 64"),
        ]
    );
}
