//! The server over an in-memory connection, driven by a small client: the handshake, text
//! sync (incremental changes with non-ASCII text, emoji and CRLF lines), diagnostics,
//! document symbols, folding ranges and the shutdown.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod frames;

use std::thread::JoinHandle;
use std::time::Duration;

use flemma_lsp::{LspError, Server, ServerOptions};
use lsp_server::{Connection, Message, Notification, Request, RequestId};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// A client on one end of an in-memory connection, the server on the other.
struct Client {
    connection: Connection,
    server: Option<JoinHandle<Result<(), LspError>>>,
    next_id: i32,
}

const URI: &str = "file:///tmp/flemma-lsp-test/chat.chat";

impl Client {
    fn start(options: ServerOptions) -> Self {
        let (server, connection) = Connection::memory();
        let server = std::thread::spawn(move || Server::new(options).run(&server));
        let mut client = Self {
            connection,
            server: Some(server),
            next_id: 0,
        };
        let result = client.request("initialize", json!({"capabilities": {}}));
        assert_eq!(result["capabilities"]["textDocumentSync"], 2, "{result}");
        assert_eq!(result["serverInfo"]["name"], "flemma-lsp");
        client.notify("initialized", json!({}));
        client
    }

    fn notify(&self, method: &str, params: Value) {
        self.connection
            .sender
            .send(Message::Notification(Notification::new(
                method.to_owned(),
                params,
            )))
            .unwrap();
    }

    /// Sends a request and returns its result, skipping the notifications before it.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = RequestId::from(self.next_id);
        self.connection
            .sender
            .send(Message::Request(Request::new(
                id.clone(),
                method.to_owned(),
                params,
            )))
            .unwrap();
        loop {
            match self.receive() {
                Message::Response(response) if response.id == id => {
                    if let Some(error) = response.error {
                        panic!("{method}: {error:?}");
                    }
                    return response.result.unwrap_or(Value::Null);
                }
                _ => {}
            }
        }
    }

    fn receive(&self) -> Message {
        self.connection
            .receiver
            .recv_timeout(Duration::from_secs(10))
            .expect("the server answers")
    }

    /// The next `publishDiagnostics` notification's parameters.
    fn diagnostics(&self) -> Value {
        loop {
            if let Message::Notification(n) = self.receive()
                && n.method == "textDocument/publishDiagnostics"
            {
                return n.params;
            }
        }
    }

    fn open(&self, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": URI, "languageId": "chat", "version": 1, "text": text}}),
        );
    }

    #[expect(
        clippy::needless_pass_by_value,
        reason = "callers build the changes in place"
    )]
    fn change(&self, version: i32, changes: Value) {
        self.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": version}, "contentChanges": changes}),
        );
    }

    fn symbols(&mut self) -> Value {
        self.request(
            "textDocument/documentSymbol",
            json!({"textDocument": {"uri": URI}}),
        )
    }

    fn shutdown(mut self) {
        assert_eq!(self.request("shutdown", Value::Null), Value::Null);
        self.notify("exit", Value::Null);
        let server = self.server.take().unwrap();
        server.join().unwrap().unwrap();
    }
}

fn range(start: (u32, u32), end: (u32, u32)) -> Value {
    json!({"start": {"line": start.0, "character": start.1}, "end": {"line": end.0, "character": end.1}})
}

const CHAT: &str = "@You:\r\nCafé ☕ and 😀 emoji.\r\n\r\n@Assistant:\r\n**Tool Use:** `bash` (`toolu_1`)\r\n```json\r\n{\"command\": \"ls\"}\r\n```\r\n";

#[test]
fn incremental_changes_in_utf16_reach_the_parser_and_the_outline() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open(CHAT);
    let published = client.diagnostics();
    assert_eq!(published["uri"], URI);
    assert_eq!(published["version"], 1);
    assert_eq!(published["diagnostics"], json!([]));

    // Replace "emoji" on line 1: after "Café ☕ and 😀 " (the emoji is two UTF-16 units).
    let start = "Café ☕ and 😀 ".encode_utf16().count() as u32;
    client.change(
        2,
        json!([{"range": range((1, start), (1, start + 5)), "text": "smileys"}]),
    );
    // And insert a second call after the first, with a position at the end of the text.
    client.change(
        3,
        json!([{"range": range((8, 0), (8, 0)), "text": "**Tool Use:** `read` (`toolu_2`)\r\n```json\r\n{\"path\": \"ü.txt\"}\r\n```\r\n"}]),
    );
    // Without a debounce the first change may be published before the second arrives.
    let mut published = client.diagnostics();
    while published["version"] == 2 {
        published = client.diagnostics();
    }
    assert_eq!(published["version"], 3);
    let symbols = client.symbols();
    let names: Vec<&str> = symbols
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["@You", "@Assistant"]);
    let calls: Vec<(&str, Value)> = symbols[1]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["range"].clone()))
        .collect();
    assert_eq!(
        calls,
        [
            ("bash (toolu_1)", range((4, 0), (7, 3))),
            ("read (toolu_2)", range((8, 0), (11, 3))),
        ]
    );
    // The message ends at its last line's end, in UTF-16 units.
    assert_eq!(symbols[0]["range"], range((0, 0), (2, 0)), "{}", symbols[0]);
    let folds = folds(&mut client);
    assert_eq!(folds, [(0, 2), (3, 11), (4, 7), (8, 11)]);
    client.shutdown();
}

#[test]
fn diagnostics_are_on_the_offending_line_and_cleared_on_close() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open(
        "@You:\nHi.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{not json}\n```\n",
    );
    let published = client.diagnostics();
    let diagnostics = published["diagnostics"].as_array().unwrap();
    assert!(!diagnostics.is_empty(), "{published}");
    let first = &diagnostics[0];
    assert_eq!(first["source"], "flemma");
    assert_eq!(first["range"]["start"]["line"], 4, "{first}");
    // Fixing the input clears it.
    client.change(2, json!([{"range": range((6, 0), (6, 10)), "text": "{}"}]));
    assert_eq!(client.diagnostics()["diagnostics"], json!([]));
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": URI}}),
    );
    let cleared = client.diagnostics();
    assert_eq!(cleared["diagnostics"], json!([]));
    assert_eq!(cleared["version"], Value::Null);
    // A request about a closed document answers null.
    assert_eq!(client.symbols(), Value::Null);
    client.shutdown();
}

/// A marker that names no role is a warning in the editor, as in `flemma check`.
#[test]
fn an_unknown_role_marker_is_a_warning_with_the_role_meant() {
    let client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open("@User:\nHi.\n");
    let published = client.diagnostics();
    assert_eq!(
        published["diagnostics"],
        json!([{
            "range": range((0, 0), (0, 6)),
            "severity": 2,
            "code": "role",
            "source": "flemma",
            "message": "@User: is not a role: its message is not sent (did you mean @You:?)"
        }])
    );
    client.shutdown();
}

#[test]
fn a_burst_of_changes_is_published_once_after_the_debounce() {
    let client = Client::start(ServerOptions::default().debounce(Duration::from_secs(1)));
    client.open("@You:\n");
    client.diagnostics();
    for (i, c) in "Hello".chars().enumerate() {
        let at = i as u32;
        client.change(
            2 + i32::try_from(i).unwrap(),
            json!([{"range": range((1, at), (1, at)), "text": c.to_string()}]),
        );
    }
    let published = client.diagnostics();
    assert_eq!(published["version"], 6);
    // Nothing else was published.
    assert!(
        client
            .connection
            .receiver
            .recv_timeout(Duration::from_millis(400))
            .is_err()
    );
    client.shutdown();
}

#[test]
fn a_change_that_does_not_fit_is_reported_and_a_full_change_recovers() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open("@You:\nHi.\n");
    client.diagnostics();
    client.change(2, json!([{"range": range((40, 0), (41, 0)), "text": "x"}]));
    let shown = loop {
        if let Message::Notification(n) = client.receive()
            && n.method == "window/showMessage"
        {
            break n.params;
        }
    };
    assert!(
        shown["message"].as_str().unwrap().contains("does not fit"),
        "{shown}"
    );
    client.change(3, json!([{"text": "@You:\nHello.\n\n@Assistant:\nHi.\n"}]));
    // The failed change may have been published first (at version 1, not taken).
    let mut published = client.diagnostics();
    while published["version"] == 1 {
        published = client.diagnostics();
    }
    assert_eq!(published["version"], 3);
    assert_eq!(client.symbols().as_array().unwrap().len(), 2);
    client.shutdown();
}

#[test]
fn exit_without_shutdown_is_an_error() {
    let mut client = Client::start(ServerOptions::default());
    client.notify("exit", Value::Null);
    let result = client.server.take().unwrap().join().unwrap();
    assert!(
        matches!(result, Err(LspError::ExitWithoutShutdown)),
        "{result:?}"
    );
}

#[test]
fn an_unknown_request_is_method_not_found() {
    let mut client = Client::start(ServerOptions::default());
    client.next_id += 1;
    let id = RequestId::from(client.next_id);
    client
        .connection
        .sender
        .send(Message::Request(Request::new(
            id.clone(),
            "flemma/unknown".to_owned(),
            Value::Null,
        )))
        .unwrap();
    let response = loop {
        if let Message::Response(r) = client.receive() {
            break r;
        }
    };
    assert_eq!(response.id, id);
    assert_eq!(response.error.unwrap().code, -32601);
    client.shutdown();
}

/// `text` with the protocol's edits (`[{range, newText}]`, against `text`) applied.
fn apply(text: &str, edits: &Value) -> String {
    let index = flemma_lsp::LineIndex::new(text);
    let mut edits: Vec<(usize, usize, String)> = edits
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let position = |p: &Value| {
                lsp_types::Position::new(
                    u32::try_from(p["line"].as_u64().unwrap()).unwrap(),
                    u32::try_from(p["character"].as_u64().unwrap()).unwrap(),
                )
            };
            let start = index.offset(text, position(&e["range"]["start"])).unwrap();
            let end = index.offset(text, position(&e["range"]["end"])).unwrap();
            (start, end, e["newText"].as_str().unwrap().to_owned())
        })
        .collect();
    edits.sort_by_key(|e| std::cmp::Reverse(e.0));
    let mut out = text.to_owned();
    for (start, end, new) in edits {
        out.replace_range(start..end, &new);
    }
    out
}

const PENDING: &str = "@You:\r\nRun it ☕.\r\n\r\n@Assistant:\r\n**Tool Use:** `bash` (`toolu_1`)\r\n```json\r\n{\"command\": \"ls 😀\"}\r\n```\r\n**Tool Use:** `bash` (`toolu_2`)\r\n```json\r\n{\"command\": \"pwd\"}\r\n```\r\n\r\n@You:\r\n**Tool Result:** `toolu_1` (pending)\r\n```\r\n```\r\n\r\n**Tool Result:** `toolu_2` (pending)\r\n```\r\n```\r\n";

#[test]
fn code_actions_make_the_edit_flemma_approve_makes() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open(PENDING);
    client.diagnostics();
    // On the first result's header (line 14).
    let actions = client.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": URI}, "range": range((14, 3), (14, 3)), "context": {"diagnostics": []}}),
    );
    let titles: Vec<&str> = actions
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        titles,
        [
            "Approve toolu_1",
            "Reject toolu_1",
            "Approve all pending",
            "Run the tool cycle"
        ]
    );
    assert_eq!(actions[3]["command"]["command"], "flemma.cycle");
    // A rejection carries the edit `flemma reject` makes; an approval runs the server's
    // command, which records the person's approval before it sends the edit.
    let doc = flemma_ast::parse(PENDING);
    let expected = flemma_runtime::reject(
        &doc,
        "toolu_1",
        None,
        flemma_ast::writer::WriterOptions::default(),
    )
    .unwrap();
    assert_eq!(
        apply(PENDING, &actions[1]["edit"]["changes"][URI]),
        flemma_ast::apply_edits(PENDING, &expected).unwrap()
    );
    assert_eq!(actions[0]["edit"], Value::Null);
    assert_eq!(actions[0]["command"]["command"], "flemma.approve");
    assert_eq!(actions[0]["command"]["arguments"], json!([URI, "toolu_1"]));
    assert_eq!(actions[2]["command"]["command"], "flemma.approveAll");
    assert_eq!(actions[2]["command"]["arguments"], json!([URI]));

    // Code lenses: approve and reject on each pending call.
    let lenses = client.request(
        "textDocument/codeLens",
        json!({"textDocument": {"uri": URI}}),
    );
    let lenses: Vec<(u64, &str)> = lenses
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["range"]["start"]["line"].as_u64().unwrap(),
                l["command"]["command"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        lenses,
        [
            (14, "flemma.approve"),
            (14, "flemma.reject"),
            (18, "flemma.approve"),
            (18, "flemma.reject")
        ]
    );

    client.shutdown();
}

#[test]
fn a_lens_command_asks_the_client_to_apply_the_edit() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open(PENDING);
    client.diagnostics();
    // A lens's command: the server asks the client to apply the edit.
    client.next_id += 1;
    let id = RequestId::from(client.next_id);
    client
        .connection
        .sender
        .send(Message::Request(Request::new(
            id.clone(),
            "workspace/executeCommand".to_owned(),
            json!({"command": "flemma.reject", "arguments": [URI, "toolu_2", "use ls instead"]}),
        )))
        .unwrap();
    let apply_request = loop {
        if let Message::Request(r) = client.receive() {
            break r;
        }
    };
    assert_eq!(apply_request.method, "workspace/applyEdit");
    let rejected = apply(PENDING, &apply_request.params["edit"]["changes"][URI]);
    assert!(
        rejected.contains(
            "**Tool Result:** `toolu_2` (rejected)\r\n```\r\nUser feedback: use ls instead\r\n```"
        ),
        "{rejected}"
    );
    let answer = loop {
        if let Message::Response(r) = client.receive() {
            break r;
        }
    };
    assert_eq!(answer.id, id);
    assert!(answer.error.is_none(), "{answer:?}");
    // A call that is not pending: the command fails with the action's text.
    let error = client.connection.sender.send(Message::Request(Request::new(
        RequestId::from(900),
        "workspace/executeCommand".to_owned(),
        json!({"command": "flemma.approve", "arguments": [URI, "toolu_9"]}),
    )));
    error.unwrap();
    let failed = loop {
        if let Message::Response(r) = client.receive() {
            break r;
        }
    };
    assert_eq!(failed.error.unwrap().message, "Tool not found: toolu_9");
    client.shutdown();
}

/// Issue 34, item 2: the editor's approval is a person's, recorded in the conversation's
/// ledger (the one `flemma approve` and the next cycle use) before the client's text says
/// `(approved)`; a rejection records nothing.
#[test]
fn the_approve_command_records_the_persons_approval() {
    use flemma_core::placements::PlacedBy;
    use flemma_runtime::placements::for_file;
    // The ledger the server uses for the test's URI.
    let chat =
        flemma_config::conversation_path(std::path::Path::new("/tmp/flemma-lsp-test/chat.chat"));
    let ledger = for_file(Some(&chat));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let id = |id: &str| flemma_ids::ToolUseId::new(id).unwrap();
    for call in ["toolu_1", "toolu_2"] {
        rt.block_on(ledger.remove(&id(call))).unwrap();
    }
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open(PENDING);
    client.diagnostics();
    let approved = client.request(
        "workspace/executeCommand",
        json!({"command": "flemma.approve", "arguments": [URI, "toolu_1"]}),
    );
    assert_eq!(approved, Value::Null);
    let rejected = client.request(
        "workspace/executeCommand",
        json!({"command": "flemma.reject", "arguments": [URI, "toolu_2"]}),
    );
    assert_eq!(rejected, Value::Null);
    client.shutdown();
    let entry = rt.block_on(ledger.get(&id("toolu_1"))).unwrap().unwrap();
    assert_eq!(entry.by, PlacedBy::Person);
    assert!(entry.is_for(
        &flemma_ids::ToolName::new("bash").unwrap(),
        &json!({"command": "ls 😀"})
    ));
    assert_eq!(rt.block_on(ledger.get(&id("toolu_2"))).unwrap(), None);
    rt.block_on(ledger.remove(&id("toolu_1"))).unwrap();
}

const JOBS: &str = "@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"command\": \"sleep 1\", \"background\": true}\n```\n\n@You:\n**Tool Result:** `toolu_1` (job=job_ab12)\n```\nRunning as a background job.\n```\n\n@Assistant:\nWaiting.\n\n@You:\n**Job Result:** `job_ab12`\n```\ndone\n```\n\nSee @./notes.md please.\n";

#[test]
fn definition_references_and_hover_follow_calls_jobs_and_files() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open(JOBS);
    client.diagnostics();
    let doc = flemma_ast::parse(JOBS);
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let line_of = |needle: &str| JOBS.lines().position(|l| l.contains(needle)).unwrap() as u32;
    let use_line = line_of("**Tool Use:**");
    let result_line = line_of("**Tool Result:**");
    let job_line = line_of("**Job Result:**");
    let at = |line: u32| json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": 2}});
    let target = |v: &Value| v[0]["range"]["start"]["line"].as_u64().unwrap() as u32;
    // Tool Use → its result; a result with job= → its Job Result; the Job Result → the result.
    let definition = client.request("textDocument/definition", at(use_line));
    assert_eq!(target(&definition), result_line);
    let definition = client.request("textDocument/definition", at(result_line));
    assert_eq!(target(&definition), job_line);
    let definition = client.request("textDocument/definition", at(job_line));
    assert_eq!(target(&definition), result_line);
    // References: every block of the call.
    let mut params = at(use_line);
    params["context"] = json!({"includeDeclaration": true});
    let references = client.request("textDocument/references", params);
    let lines: Vec<u32> = references
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["range"]["start"]["line"].as_u64().unwrap() as u32)
        .collect();
    assert_eq!(lines, [use_line, result_line, job_line]);
    // Hover on the result: the job's state above the block's summary.
    let hover = client.request("textDocument/hover", at(result_line));
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(
        value.starts_with("**Job** `job_ab12`: delivered\n"),
        "{value}"
    );
    assert!(value.contains("modeline: job=job_ab12"), "{value}");
    let hover = client.request("textDocument/hover", at(use_line));
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(
        value.contains("**Tool Use** `bash` (`toolu_1`): result written"),
        "{value}"
    );
    assert!(value.contains("\"command\": \"sleep 1\""), "{value}");
    client.shutdown();
}

#[test]
fn a_file_reference_leads_to_its_file() {
    let scratch = tempfile::Builder::new()
        .prefix("flemma-lsp-files-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    std::fs::write(dir.join("notes é.md"), "# Notes\n").unwrap();
    let chat = dir.join("chat.chat");
    let uri = flemma_lsp::path_uri(&chat).unwrap();
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri.as_str(), "languageId": "chat", "version": 1, "text": "@You:\nRead @./notes%20é.md and @./missing.md.\nNot @//etc/passwd.\n"}}),
    );
    client.diagnostics();
    let at = |character: u32| json!({"textDocument": {"uri": uri.as_str()}, "position": {"line": 1, "character": character}});
    let definition = client.request("textDocument/definition", at(9));
    let target: lsp_types::Uri = definition[0]["uri"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        flemma_lsp::uri_path(&target).unwrap(),
        dir.join("notes é.md")
    );
    let hover = client.request("textDocument/hover", at(9));
    assert!(
        hover["contents"]["value"]
            .as_str()
            .unwrap()
            .ends_with("/notes é.md`: a file of 8 bytes; the conversation may read it"),
        "{hover}"
    );
    // A file outside the project: the references may not read it.
    let outside = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri.as_str()}, "position": {"line": 2, "character": 8}}),
    );
    assert!(
        outside["contents"]["value"].as_str().unwrap().ends_with(
            "the conversation may not read it (`templates.file_access`): it is sent as text"
        ),
        "{outside}"
    );
    // A missing file: nothing to go to.
    let missing = "Read @./notes%20é.md and @./mis".encode_utf16().count() as u32;
    assert_eq!(
        client.request("textDocument/definition", at(missing)),
        Value::Null
    );
    client.shutdown();
}

#[test]
fn a_lone_carriage_return_is_a_line_for_the_client_but_not_for_the_parser() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    // The protocol's lines: `@You:`, `A`, `B`, ``, `@Assistant:`, `Hi ☕.`; the parser's
    // second line is `A\rB`.
    client.open("@You:\nA\rB\n\n@Assistant:\nHi ☕.\n");
    client.diagnostics();
    let symbols = client.symbols();
    assert_eq!(symbols[0]["range"], range((0, 0), (3, 0)));
    assert_eq!(symbols[1]["range"], range((4, 0), (5, 5)));
    // An edit after the lone `\r`, in the client's lines.
    client.change(
        2,
        json!([{"range": range((5, 0), (5, 2)), "text": "Hello"}]),
    );
    let mut published = client.diagnostics();
    while published["version"] != 2 {
        published = client.diagnostics();
    }
    let symbols = client.symbols();
    assert_eq!(symbols[1]["range"], range((4, 0), (5, 8)));
    client.shutdown();
}

fn with_tools() -> ServerOptions {
    let registry = flemma_runtime::ToolRegistry::new();
    flemma_runtime::register_builtins(&registry).unwrap();
    ServerOptions::default()
        .debounce(Duration::ZERO)
        .registry(registry)
}

/// The published diagnostics as (line, code, message).
fn found(published: &Value) -> Vec<(u64, String, String)> {
    published["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["range"]["start"]["line"].as_u64().unwrap(),
                d["code"].as_str().unwrap().to_owned(),
                d["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A name in `tools.auto_approve` that matches no tool, and options outside a JSON
/// frontmatter's `"flemma"` key: warnings in the editor, as in `flemma check`.
#[test]
fn a_misspelled_auto_approve_name_and_a_stray_option_are_warnings() {
    let client = Client::start(with_tools());
    client.open("```json\n{\n  \"flemma\": {\n    \"tools\": {\"auto_approve\": [\"wirte\"]}\n  }\n}\n```\n@You:\nHi.\n");
    assert_eq!(
        found(&client.diagnostics()),
        [(
            3,
            "options".to_owned(),
            "'wirte' in tools.auto_approve matches no tool: it approves nothing -- did you mean 'write'?".to_owned()
        )]
    );
    client.change(
        2,
        json!([{"range": range((0, 0), (6, 3)), "text": "```json\n{\"tools\": [\"bash\"]}\n```"}]),
    );
    let mut published = client.diagnostics();
    while published["version"] != 2 {
        published = client.diagnostics();
    }
    assert_eq!(
        found(&published),
        [(
            1,
            "options".to_owned(),
            "\"tools\" is a template variable here, not an option: a JSON frontmatter's options go under its \"flemma\" key ({\"flemma\": {\"tools\": …}})".to_owned()
        )]
    );
    client.shutdown();
}

#[test]
fn the_frontmatter_is_checked_against_the_hosts_tools() {
    let client = Client::start(with_tools());
    client.open("```json\n{\n  \"flemma\": {\n    \"tools\": [\"bash\", \"reed\"]\n  }\n}\n```\n@You:\nHi.\n");
    assert_eq!(
        found(&client.diagnostics()),
        [(
            3,
            "options".to_owned(),
            "Unknown tool 'reed' -- did you mean 'read'?".to_owned()
        )]
    );
    // Fixed in the editor: the diagnostic goes.
    client.change(
        2,
        json!([{"range": range((3, 23), (3, 27)), "text": "read"}]),
    );
    let mut published = client.diagnostics();
    while published["version"] != 2 {
        published = client.diagnostics();
    }
    assert_eq!(found(&published), []);
    // An unknown option, with its line.
    client.change(
        3,
        json!([{"range": range((3, 4), (3, 11)), "text": "\"toolz\""}]),
    );
    let mut published = client.diagnostics();
    while published["version"] != 3 {
        published = client.diagnostics();
    }
    let found = found(&published);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].0, found[0].1.as_str()), (3, "frontmatter"));
    assert!(found[0].2.contains("toolz"), "{found:?}");
    client.shutdown();
}

#[test]
fn unanswered_calls_are_checked_against_their_schema_and_before_a_send() {
    let mut client = Client::start(with_tools());
    let text = "@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"label\": \"x\"}\n```\n\n@You:\nNever mind.\n";
    client.open(text);
    let found = found(&client.diagnostics());
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!((found[0].0, found[0].1.as_str()), (1, "tool_input"));
    assert!(
        found[0]
            .2
            .starts_with("The input does not match the `bash` tool's schema: "),
        "{found:?}"
    );
    assert!(found[0].2.contains("command"), "{found:?}");
    assert_eq!(
        found[1],
        (
            1,
            "tool_use".to_owned(),
            "Tool call 'bash' (toolu_1) has no matching tool result. A synthetic 'No result provided' error response will be sent to the API.".to_owned()
        )
    );
    // The hover names the tool's purpose.
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": URI}, "position": {"line": 1, "character": 2}}),
    );
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(
        value.contains("**Tool Use** `bash` (`toolu_1`): no result yet\n\n"),
        "{value}"
    );
    assert!(
        value
            .lines()
            .nth(2)
            .is_some_and(|l| !l.is_empty() && !l.starts_with("```")),
        "{value}"
    );
    client.shutdown();
}

#[test]
fn a_calls_input_is_checked_as_the_executor_reads_it() {
    let client = Client::start(with_tools());
    // The model-facing schemas are strict: every property required, optional ones nullable,
    // the harness parameters and `label` included. None of that is what a call needs to run.
    let text = "@Assistant:\n\
        **Tool Use:** `bash` (`toolu_1`)\n```json\n{\"command\": \"ls\"}\n```\n\n\
        **Tool Use:** `read` (`toolu_2`)\n```json\n{\"path\": \"a.txt\", \"limit\": null, \"flemma.save_to\": \"b.txt\"}\n```\n\n\
        **Tool Use:** `bash` (`toolu_3`)\n```json\n{\"label\": \"x\", \"timeout\": \"30\", \"flemma.background\": true}\n```\n";
    client.open(text);
    assert_eq!(
        found(&client.diagnostics()),
        [(
            11,
            "tool_input".to_owned(),
            "The input does not match the `bash` tool's schema: input: missing required property \"command\"\ninput.timeout: expected number or null, got string \"30\"".to_owned()
        )]
    );
    client.shutdown();
}

#[cfg(feature = "lua")]
#[test]
fn a_lua_error_is_on_its_line() {
    let client = Client::start(with_tools());
    client.open(
        "```lua\nflemma.opt.tools.max_concurrent = 2\nflemma.opt.tools.nope(\n```\n@You:\nHi.\n",
    );
    let found = found(&client.diagnostics());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, "frontmatter");
    assert_eq!(found[0].0, 2, "{found:?}");
    client.shutdown();
}

#[test]
fn the_frontmatter_completes_tool_names_and_presets() {
    let mut client = Client::start(with_tools());
    client.open("```json\n{\"flemma\": {\"tools\": [\"$st\", \"+re\"]}}\n```\n@You:\nre\n");
    client.diagnostics();
    let labels = |client: &mut Client, line: u32, character: u32| -> Vec<String> {
        let items = client.request(
            "textDocument/completion",
            json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": character}}),
        );
        let mut labels: Vec<String> = items
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["label"].as_str().unwrap().to_owned())
            .collect();
        labels.sort();
        labels
    };
    let line = "{\"flemma\": {\"tools\": [\"$st";
    assert_eq!(labels(&mut client, 1, line.len() as u32), ["$standard"]);
    let line = "{\"flemma\": {\"tools\": [\"$st\", \"+re";
    assert_eq!(labels(&mut client, 1, line.len() as u32), ["read"]);
    // Outside the frontmatter: nothing.
    assert!(labels(&mut client, 4, 2).is_empty());
    client.shutdown();
}

#[test]
fn a_tool_uses_hover_shows_how_the_chain_decides_it_under_the_conversations_options() {
    let mut client = Client::start(with_tools());
    let text = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"+bash\", \"!write\"]}, \"sandbox\": {\"enabled\": false}}}\n```\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"label\": \"l\", \"command\": \"ls\"}\n```\n**Tool Use:** `write` (`toolu_2`)\n```json\n{\"label\": \"w\", \"path\": \"x\", \"content\": \"y\"}\n```\n";
    client.open(text);
    client.diagnostics();
    let hover = |client: &mut Client, line: u32| -> String {
        let hover = client.request(
            "textDocument/hover",
            json!({"textDocument": {"uri": URI}, "position": {"line": line, "character": 2}}),
        );
        hover["contents"]["value"].as_str().unwrap().to_owned()
    };
    let bash = hover(&mut client, 4);
    assert!(bash.contains("**Approval**"), "{bash}");
    assert!(
        bash.contains("approve (decided by urn:flemma:approval:config)"),
        "{bash}"
    );
    let write = hover(&mut client, 8);
    assert!(write.contains("**Approval**"), "{write}");
    assert!(
        !write.contains("approve (decided by urn:flemma:approval:config)"),
        "{write}"
    );
    client.shutdown();
}

#[test]
fn the_journal_tells_a_jobs_state_and_its_watch_notices_a_change() {
    let scratch = tempfile::Builder::new()
        .prefix("flemma-lsp-jobs-")
        .tempdir()
        .unwrap();
    let dir = std::fs::canonicalize(scratch.path()).unwrap();
    let chat = dir.join("chat.chat");
    let text = "@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"label\": \"s\", \"command\": \"sleep 9\"}\n```\n\n@You:\n**Tool Result:** `toolu_1` (job=job_watch1)\n```\nRunning as a background job.\n```\n";
    std::fs::write(&chat, text).unwrap();
    let options = flemma_config::Config::new().options().unwrap();
    let store = flemma_store::Store::new(&options.tools.store, Some(&chat), "1")
        .unwrap()
        .directory()
        .unwrap();
    let journal = store.join("jobs");
    std::fs::create_dir_all(&journal).unwrap();
    let entry = |state: &str| {
        json!({"job_id": "job_watch1", "tool_id": "toolu_1", "tool": "bash", "state": state,
               "started_at": 1.0, "completed_at": 3.5})
        .to_string()
    };
    std::fs::write(journal.join("job_watch1.json"), entry("completed")).unwrap();

    let uri = flemma_lsp::path_uri(&chat).unwrap();
    let mut client = Client::start(with_tools().journal_poll(Some(Duration::from_millis(100))));
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri.as_str(), "languageId": "chat", "version": 1, "text": text}}),
    );
    let job_diagnostics = |published: &Value| -> Vec<String> {
        found(published)
            .into_iter()
            .filter(|(_, code, _)| code == "job")
            .map(|(line, _, message)| format!("{line}: {message}"))
            .collect()
    };
    assert_eq!(
        job_diagnostics(&client.diagnostics()),
        [
            "7: Job `job_watch1` completed; its Job Result is written by the next `flemma cycle` or `flemma run`"
        ]
    );
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri.as_str()}, "position": {"line": 7, "character": 2}}),
    );
    let value = hover["contents"]["value"].as_str().unwrap();
    assert!(
        value.starts_with("**Job** `job_watch1`: completed 2.5s (delivery pending)\n"),
        "{value}"
    );
    // Another process changes the journal: the watch publishes again.
    std::fs::write(journal.join("job_watch1.json"), entry("lost")).unwrap();
    assert_eq!(
        job_diagnostics(&client.diagnostics()),
        ["7: Job `job_watch1` was lost: its process or host ended without a result"]
    );
    client.shutdown();
}

/// Opens `text` as version `version` of `uri`, runs `flemma.cycle` on it and returns the
/// `workspace/applyEdit` request the cycle sends.
fn cycle_of(client: &mut Client, uri: &str, version: i32, text: &str) -> Request {
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": uri, "languageId": "chat", "version": version, "text": text}}),
    );
    client.diagnostics();
    let answer = client.request(
        "workspace/executeCommand",
        json!({"command": "flemma.cycle", "arguments": [uri]}),
    );
    assert_eq!(answer, Value::Null);
    loop {
        if let Message::Request(r) = client.receive()
            && r.method == "workspace/applyEdit"
        {
            return r;
        }
    }
}

#[test]
fn the_cycle_command_runs_the_tools_and_sends_its_edit_for_the_version_it_ran_on() {
    let scratch = tempfile::Builder::new()
        .prefix("flemma-lsp-cycle-")
        .tempdir()
        .unwrap();
    let dir = std::fs::canonicalize(scratch.path()).unwrap();
    let chat = dir.join("chat.chat");
    // The `(approved)` came with the file: the host's chain decides the call (it approves
    // `bash` here), not the file.
    let text = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"+bash\"]}}}\n```\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"label\": \"hi\", \"command\": \"echo hi from the cycle\"}\n```\n\n@You:\n**Tool Result:** `toolu_1` (approved)\n```\n```\n";
    std::fs::write(&chat, text).unwrap();
    let uri = flemma_lsp::path_uri(&chat).unwrap();
    let mut client = Client::start(with_tools());
    let request = cycle_of(&mut client, uri.as_str(), 7, text);
    let change = &request.params["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], 7);
    let after = apply(text, &change["edits"]);
    assert!(
        after.contains("**Tool Result:** `toolu_1`\n```\nhi from the cycle\n```"),
        "{after}"
    );
    // The file on disk is the editor's to save: the cycle ran on its text.
    assert_eq!(std::fs::read_to_string(&chat).unwrap(), text);
    client.shutdown();
}

/// Issue 34, item 8: the editor's "Run the tool cycle" applies the host's command hooks (the
/// `[hooks]` of its options files), as `flemma cycle` does, even when the host built its tool
/// registry without them: a call a deny hook blocks is denied, and the canary directory the
/// call would remove stays.
#[test]
fn the_editors_cycle_runs_the_hosts_command_hooks() {
    let scratch = tempfile::Builder::new()
        .prefix("flemma-lsp-hooks-")
        .tempdir()
        .unwrap();
    let dir = std::fs::canonicalize(scratch.path()).unwrap();
    std::fs::create_dir_all(dir.join("victim")).unwrap();
    let hook = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../flemma-runtime/tests/it/hooks/deny_rm.sh");
    let mut config = flemma_config::Config::new();
    config
        .load_toml_str(
            &format!(
                "[tools]\nrequire_approval = false\n\n[[hooks.PreToolUse]]\nname = \"no-rm\"\nmatcher = \"bash\"\ncommand = \"{}\"\n",
                hook.display()
            ),
            &dir.join("flemma.toml"),
        )
        .unwrap();
    let chat = dir.join("chat.chat");
    let text = "@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"command\": \"rm -rf victim\"}\n```\n";
    std::fs::write(&chat, text).unwrap();
    let uri = flemma_lsp::path_uri(&chat).unwrap();
    // The host's registry has no hooks: only its options do.
    let mut client = Client::start(with_tools().config(config));
    let request = cycle_of(&mut client, uri.as_str(), 1, text);
    let after = apply(text, &request.params["edit"]["documentChanges"][0]["edits"]);
    assert!(dir.join("victim").is_dir(), "the denied rm ran: {after}");
    assert!(
        after.contains("The tool was denied by a policy. Hook `no-rm`: Blocked"),
        "{after}"
    );
    client.shutdown();
}

/// The folding ranges of the open document, as (first line, last line).
fn folds(client: &mut Client) -> Vec<(u64, u64)> {
    let folds = client.request(
        "textDocument/foldingRange",
        json!({"textDocument": {"uri": URI}}),
    );
    folds
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["startLine"].as_u64().unwrap(),
                f["endLine"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A compacted conversation: the messages above the block fold as one region, the block is in
/// the outline, and its hover says what it stands for and what each request saves.
#[test]
fn a_compaction_block_folds_what_it_stands_for_and_its_hover_tells_the_tokens_saved() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open(
        "@You:\nHi.\n\n@Assistant:\nHello.\n\n@You:\n**Compaction:** (messages=2 tokens=900 summary=40)\n```\nThey said hi.\n```\n\n@You:\nAnd?\n",
    );
    assert_eq!(client.diagnostics()["diagnostics"], json!([]));
    let folds = folds(&mut client);
    // Above the block (lines 0-5), each message, the block (7-10).
    assert_eq!(folds, [(0, 5), (0, 2), (3, 5), (6, 11), (7, 10), (12, 13)]);
    let symbols = client.symbols();
    assert_eq!(
        symbols[2]["children"][0]["name"], "compaction (2 messages)",
        "{symbols}"
    );
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": URI}, "position": {"line": 7, "character": 3}}),
    );
    let text = hover["contents"]["value"].as_str().unwrap();
    assert!(
        text.contains("Stands for 2 messages (about 900 tokens) in a summary of about 40 tokens: about 860 tokens fewer in every request."),
        "{text}"
    );
    assert!(text.contains("Requests start here"), "{text}");
    client.shutdown();
}
