//! Language server benchmarks (issue 22 targets): `cargo bench -p flemma-lsp --bench lsp`.
//!
//! The document is the 10 MB transcript of `../shared/tools/gen_chat.py 10000000 7` (generated
//! once into `target/bench-10000000-7.chat`, or the file named by `FLEMMA_BENCH_CHAT`),
//! opened in a server on a Unix socket pair ([`flemma_lsp::serve_io`], the protocol's framing),
//! driven the way an editor drives it: each case is one message sent and the server's answer
//! received, as bytes (parsing the answer is the editor's cost, not measured).
//!
//! - `lsp/edit_to_diagnostics`: a one-character `didChange` in the middle of the document
//!   (alternately inserting and deleting one `x`), until its `publishDiagnostics` arrives
//!   (debounce 0). Target ≤ 5 ms.
//! - `lsp/hover`: a hover on the tool result nearest the middle line. Target ≤ 1 ms.
//! - `lsp/document_symbols`: the outline of the whole document. Target ≤ 20 ms.
//!
//! The memory of the open document (its [`OpenDocument`]: the parser's text and document, the
//! line index) is measured as the growth of the process's resident memory while it is built
//! (Linux `/proc/self/status`), and printed once as a multiple of the text's size. Target
//! ≤ 3x.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    missing_docs,
    clippy::cast_precision_loss,
    clippy::cast_possible_wrap,
    clippy::needless_pass_by_value,
    clippy::print_stderr,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::time::Duration;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::unix::net::UnixStream;

use criterion::Criterion;
use flemma_lsp::{OpenDocument, ServerOptions};
use serde_json::{Value, json};

#[path = "../../benches/common/transcript.rs"]
mod common;
use common::transcript;

/// This process's resident memory, in bytes (`VmRSS` of `/proc/self/status`).
fn resident() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: i64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

const URI: &str = "file:///bench/chat.chat";

/// An editor's side of a socket to the server: framed messages written, framed messages read
/// as bytes (an editor's own JSON parser is not what is measured).
struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next: i32,
}

impl Client {
    fn write(&mut self, message: &Value) {
        let body = message.to_string();
        write!(self.writer, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("write");
        self.writer.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message's body.
    fn read(&mut self) -> Vec<u8> {
        let mut length = 0;
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("a header");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("Content-Length: ") {
                length = n.parse().expect("a length");
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("a body");
        body
    }

    /// Sends a request and reads until its response; returns the response's size.
    fn request(&mut self, method: &str, params: Value) -> usize {
        self.next += 1;
        let id = self.next;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let prefix = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},");
        loop {
            let body = self.read();
            if body.starts_with(prefix.as_bytes()) {
                return body.len();
            }
        }
    }

    /// Reads until a `publishDiagnostics` notification.
    fn diagnostics(&mut self) -> usize {
        loop {
            let body = self.read();
            if body.len() < 4096
                && String::from_utf8_lossy(&body).contains("textDocument/publishDiagnostics")
            {
                return body.len();
            }
        }
    }
}

fn memory(text: &str) {
    let copy = text.to_owned();
    let before = resident();
    let doc = OpenDocument::new(copy, 1);
    let held = resident() - before + text.len() as i64;
    // The tool index is built on first use (hover, definition): counted too.
    let _ = doc.parser().tool_index();
    let with_index = resident() - before + text.len() as i64;
    eprintln!(
        "lsp/memory: the open document holds {:.2} MB for {:.2} MB of text: {:.2}x ({:.2}x with the tool index)",
        held as f64 / 1e6,
        text.len() as f64 / 1e6,
        held as f64 / text.len() as f64,
        with_index as f64 / text.len() as f64,
    );
    drop(doc);
}

fn bench(c: &mut Criterion) {
    let text = transcript();
    memory(&text);
    let (server, client) = UnixStream::pair().expect("a socket pair");
    let input = server.try_clone().expect("a socket");
    let thread = std::thread::spawn(move || {
        flemma_lsp::serve_io(
            ServerOptions::default().debounce(Duration::ZERO),
            input,
            server,
        )
    });
    let mut client = Client {
        writer: client.try_clone().expect("a socket"),
        reader: BufReader::new(client),
        next: 0,
    };
    client.request("initialize", json!({"capabilities": {}}));
    client.notify("initialized", json!({}));
    client.notify(
        "textDocument/didOpen",
        json!({"textDocument": {"uri": URI, "languageId": "chat", "version": 1, "text": text}}),
    );
    client.diagnostics();
    let lines: Vec<&str> = text.lines().collect();
    let middle = lines.len() / 2;
    // The tool result nearest the middle, for the hover.
    let result_line = (middle..lines.len())
        .chain((0..middle).rev())
        .find(|&i| lines[i].starts_with("**Tool Result:**"))
        .expect("the transcript has tool results");
    let mut group = c.benchmark_group("lsp");
    group.sample_size(50);
    let mut version = 1;
    let mut inserted = false;
    group.bench_function("edit_to_diagnostics", |b| {
        b.iter(|| {
            version += 1;
            let range = if inserted {
                json!({"start": {"line": middle, "character": 0}, "end": {"line": middle, "character": 1}})
            } else {
                json!({"start": {"line": middle, "character": 0}, "end": {"line": middle, "character": 0}})
            };
            let text = if inserted { "" } else { "x" };
            inserted = !inserted;
            client.notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": URI, "version": version}, "contentChanges": [{"range": range, "text": text}]}),
            );
            client.diagnostics()
        });
    });
    let at =
        json!({"textDocument": {"uri": URI}, "position": {"line": result_line, "character": 3}});
    group.bench_function("hover", |b| {
        b.iter(|| client.request("textDocument/hover", at.clone()));
    });
    group.sample_size(20);
    group.bench_function("document_symbols", |b| {
        b.iter(|| {
            client.request(
                "textDocument/documentSymbol",
                json!({"textDocument": {"uri": URI}}),
            )
        });
    });
    let doc = OpenDocument::new(text.clone(), 1);
    let symbols = flemma_lsp::document_symbols(&doc);
    eprintln!(
        "lsp/document_symbols: {} symbols, {} children",
        symbols.len(),
        symbols
            .iter()
            .map(|s| s.children.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
    );
    group.bench_function("document_symbols_built", |b| {
        b.iter(|| flemma_lsp::document_symbols(&doc));
    });
    group.finish();
    client.request("shutdown", Value::Null);
    client.notify("exit", Value::Null);
    thread
        .join()
        .expect("the server thread")
        .expect("a clean shutdown");
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
