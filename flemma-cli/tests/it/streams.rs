//! `flemma run` against a server that stalls: the `http.*` options are honoured, each retry is
//! shown as it happens, and the error names its cause once.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use crate::{scratch, text};

/// A server on 127.0.0.1 that answers `connections` requests with the headers of a streamed
/// response and then nothing; each connection ends when the client closes it.
fn headers_then_nothing(connections: usize) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for socket in listener.incoming().take(connections) {
            let Ok(mut socket) = socket else { return };
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head).is_err() {
                    return;
                }
                while matches!(socket.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    url
}

#[test]
fn run_shows_each_retry_and_stops_at_the_configured_first_byte_timeout() {
    let url = headers_then_nothing(2);
    let chat = scratch("stall.chat", b"@You:\nHi.\n");
    let started = Instant::now();
    let out = crate::flemma_command()
        .args(["run", chat.to_str().unwrap(), "--provider", "anthropic"])
        .args(["--set", "http.first_byte_timeout=0.3"])
        .args(["--set", "http.max_retries=1"])
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("FLEMMA_BASE_URL", url)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.contains(&"retrying in 500 ms: no response within 300 ms (attempt 2 of 2)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("the anthropic request failed: no response within 300 ms after 2 attempts"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&chat).unwrap(), "@You:\nHi.\n");
}
