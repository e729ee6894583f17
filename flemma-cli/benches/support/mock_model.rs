//! A mock Anthropic Messages server for timing `flemma run` as a whole process.
//!
//! [`MockModel::start`] listens on `127.0.0.1` on an ephemeral port and answers every
//! `POST /v1/messages` with a streamed response in the event format of the recorded streams
//! (`../shared/fixtures/peer/anthropic_tool_use_streaming.txt` and
//! `anthropic_final_response_streaming.txt`): while the request carries fewer than `turns`
//! results of its own calls (`"tool_use_id":"toolu_mock_<n>"`; results already in the
//! conversation do not count), a short text and one `bash` call of `echo hi`
//! (`stop_reason: tool_use`); then a final text (`end_turn`). The answer depends only on the
//! request, so every process that runs the same conversation from the start gets the same
//! turns.
//!
//! [`MockModel::start_with_command`] makes the call run another command, one per conversation
//! and turn: `{tag}` in it becomes the text of the request's `[conversation TAG]` marker and
//! `{n}` the turn's number (the fleet test's counter).
//!
//! It stops by itself: when the [`MockModel`] is dropped, or when no request came for the
//! idle time given to [`MockModel::serve_until_idle`]. Plain HTTP/1.1 with keep-alive and
//! `content-length` bodies (chunked request bodies are read too), one thread per connection;
//! no TLS, loopback only.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A running mock model.
#[derive(Debug)]
pub(crate) struct MockModel {
    address: SocketAddr,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    turns: usize,
    /// The calls' command, `{tag}` and `{n}` filled in; `echo hi` without one.
    command: Option<String>,
    /// Whether the calls ask to run as background jobs (`"flemma.background": true`).
    background: bool,
    stop: AtomicBool,
    requests: AtomicUsize,
    /// Milliseconds since `started` of the last request.
    last_request: AtomicU64,
    started: Instant,
}

impl MockModel {
    /// Starts a server answering `turns` tool turns, then a final text.
    #[allow(
        dead_code,
        reason = "the fleet test starts it with a command of its own"
    )]
    pub(crate) fn start(turns: usize) -> std::io::Result<Self> {
        Self::serve(turns, None)
    }

    /// Starts a server whose calls run `command` (`{tag}`, `{n}` filled in per request).
    #[allow(dead_code, reason = "only the fleet test runs a command of its own")]
    pub(crate) fn start_with_command(turns: usize, command: &str) -> std::io::Result<Self> {
        Self::serve(turns, Some(command.to_owned()))
    }

    /// Starts a server whose calls run `command` as background jobs
    /// (`"flemma.background": true`).
    #[allow(dead_code, reason = "only the worker's job test runs jobs")]
    pub(crate) fn start_in_background(turns: usize, command: &str) -> std::io::Result<Self> {
        Self::serve_with(turns, Some(command.to_owned()), true)
    }

    fn serve(turns: usize, command: Option<String>) -> std::io::Result<Self> {
        Self::serve_with(turns, command, false)
    }

    fn serve_with(
        turns: usize,
        command: Option<String>,
        background: bool,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let address = listener.local_addr()?;
        let state = Arc::new(State {
            turns,
            command,
            background,
            stop: AtomicBool::new(false),
            requests: AtomicUsize::new(0),
            last_request: AtomicU64::new(0),
            started: Instant::now(),
        });
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let _ = serve(stream, &shared);
                });
            }
        });
        Ok(Self { address, state })
    }

    /// The base URL to give `flemma run` as `FLEMMA_BASE_URL`.
    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// How many requests were answered.
    #[allow(dead_code, reason = "not every user of this module counts requests")]
    pub(crate) fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Blocks until no request came for `idle` (counted from the start before the first
    /// one), then stops.
    #[allow(dead_code, reason = "only the standalone example serves until idle")]
    pub(crate) fn serve_until_idle(self, idle: Duration) {
        loop {
            let last = Duration::from_millis(self.state.last_request.load(Ordering::SeqCst));
            let quiet = self.state.started.elapsed().saturating_sub(last);
            if quiet >= idle {
                return;
            }
            std::thread::sleep(idle.saturating_sub(quiet).min(Duration::from_millis(200)));
        }
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread, which then sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

/// Answers the requests of one connection until the client closes it or goes quiet.
fn serve(stream: TcpStream, state: &State) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        if state.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let Some(body) = read_request(&mut reader)? else {
            return Ok(());
        };
        state.requests.fetch_add(1, Ordering::SeqCst);
        let millis = u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        state.last_request.store(millis, Ordering::SeqCst);
        let results = count(&body, b"\"tool_use_id\":\"toolu_mock_");
        let events = if results < state.turns {
            let command = state.command.as_ref().map(|c| {
                c.replace("{tag}", &tag(&body))
                    .replace("{n}", &(results + 1).to_string())
            });
            tool_turn(
                results + 1,
                command.as_deref().unwrap_or("echo hi"),
                state.background,
            )
        } else {
            final_turn()
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
             content-length: {}\r\n\r\n",
            events.len()
        );
        writer.write_all(head.as_bytes())?;
        writer.write_all(events.as_bytes())?;
        writer.flush()?;
    }
}

/// Reads one request and returns its body; `None` when the connection closed first.
fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    // The request line (blank lines before it are allowed).
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut length = 0_usize;
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().map_err(std::io::Error::other)?;
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = line.trim().split(';').next().unwrap_or("0");
            let size = usize::from_str_radix(size, 16).map_err(std::io::Error::other)?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(Some(body))
}

/// The text of the request's `[conversation TAG]` marker (empty without one).
fn tag(body: &[u8]) -> String {
    let marker = b"[conversation ";
    let Some(at) = memchr::memmem::find(body, marker) else {
        return String::new();
    };
    let rest = &body[at + marker.len()..];
    let end = memchr::memchr(b']', rest).unwrap_or(0);
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    memchr::memmem::find_iter(haystack, needle).count()
}

fn event(out: &mut String, name: &str, data: &str) {
    out.push_str("event: ");
    out.push_str(name);
    out.push_str("\ndata: ");
    out.push_str(data);
    out.push_str("\n\n");
}

fn message_start(out: &mut String, id: &str) {
    event(
        out,
        "message_start",
        &format!(
            r#"{{"type":"message_start","message":{{"model":"claude-sonnet-4-5","id":"{id}","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{{"input_tokens":403,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}}}}"#
        ),
    );
}

fn text_block(out: &mut String, index: usize, parts: &[&str]) {
    event(
        out,
        "content_block_start",
        &format!(
            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"text","text":""}}}}"#
        ),
    );
    for part in parts {
        let text = serde_json::to_string(part).unwrap_or_default();
        event(
            out,
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"text_delta","text":{text}}}}}"#
            ),
        );
    }
    event(
        out,
        "content_block_stop",
        &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
    );
}

fn message_end(out: &mut String, reason: &str) {
    event(
        out,
        "message_delta",
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}","stop_sequence":null}},"usage":{{"output_tokens":46}}}}"#
        ),
    );
    event(out, "message_stop", r#"{"type":"message_stop"}"#);
}

/// The `n`th tool turn: a line of text, then `bash` with `command` (its input streamed in
/// four parts), as a background job when `background`.
fn tool_turn(n: usize, command: &str, background: bool) -> String {
    let mut out = String::new();
    message_start(&mut out, &format!("msg_mock_{n}"));
    text_block(&mut out, 0, &["Running", " it."]);
    event(
        &mut out,
        "content_block_start",
        &format!(
            r#"{{"type":"content_block_start","index":1,"content_block":{{"type":"tool_use","id":"toolu_mock_{n}","name":"bash","input":{{}}}}}}"#
        ),
    );
    let input = if background {
        serde_json::json!({ "command": command, "flemma.background": true })
    } else {
        serde_json::json!({ "command": command })
    }
    .to_string();
    let quarter = input.len().div_ceil(4);
    let mut rest = input.as_str();
    let mut parts = vec![""];
    while !rest.is_empty() {
        let mut at = quarter.min(rest.len());
        while !rest.is_char_boundary(at) {
            at += 1;
        }
        let (part, tail) = rest.split_at(at);
        parts.push(part);
        rest = tail;
    }
    for part in parts {
        let part = serde_json::to_string(part).unwrap_or_default();
        event(
            &mut out,
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":1,"delta":{{"type":"input_json_delta","partial_json":{part}}}}}"#
            ),
        );
    }
    event(
        &mut out,
        "content_block_stop",
        r#"{"type":"content_block_stop","index":1}"#,
    );
    message_end(&mut out, "tool_use");
    out
}

/// The final answer.
fn final_turn() -> String {
    let mut out = String::new();
    message_start(&mut out, "msg_mock_final");
    text_block(&mut out, 0, &["It", " said", " hi."]);
    event(&mut out, "ping", r#"{"type": "ping"}"#);
    message_end(&mut out, "end_turn");
    out
}
