//! The server over an in-memory connection, driven by a small client: the handshake, text
//! sync (incremental changes with non-ASCII text, emoji and CRLF lines), diagnostics,
//! document symbols, folding ranges and the shutdown.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

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

    #[expect(clippy::needless_pass_by_value, reason = "callers build the changes in place")]
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
    let published = client.diagnostics();
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
    assert_eq!(
        symbols[0]["range"],
        range((0, 0), (2, 0)),
        "{}",
        symbols[0]
    );
    let folds = client.request(
        "textDocument/foldingRange",
        json!({"textDocument": {"uri": URI}}),
    );
    let folds: Vec<(u64, u64)> = folds
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["startLine"].as_u64().unwrap(),
                f["endLine"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(folds, [(0, 2), (3, 11), (4, 7), (8, 11)]);
    client.shutdown();
}

#[test]
fn diagnostics_are_on_the_offending_line_and_cleared_on_close() {
    let mut client = Client::start(ServerOptions::default().debounce(Duration::ZERO));
    client.open("@You:\nHi.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{not json}\n```\n");
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

#[test]
fn a_burst_of_changes_is_published_once_after_the_debounce() {
    let client = Client::start(ServerOptions::default().debounce(Duration::from_millis(200)));
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
    assert_eq!(client.diagnostics()["version"], 3);
    assert_eq!(client.symbols().as_array().unwrap().len(), 2);
    client.shutdown();
}

#[test]
fn exit_without_shutdown_is_an_error() {
    let mut client = Client::start(ServerOptions::default());
    client.notify("exit", Value::Null);
    let result = client.server.take().unwrap().join().unwrap();
    assert!(matches!(result, Err(LspError::ExitWithoutShutdown)), "{result:?}");
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
