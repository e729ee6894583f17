//! Servers that stall: before the headers, after the headers, in the middle of a stream. Each
//! is a real server on 127.0.0.1 whose connections stay open until the test ends; the
//! transport's timeouts are a few hundred milliseconds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flemma_providers::{
    ApiKey, Endpoint, HttpTransport, Retry, RetryReason, StreamEvent, Timeout, TransportConfig,
    TransportError, stream_events,
};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::peer;

const SHORT: Duration = Duration::from_millis(300);

/// A server that answers every request with `prefix` (raw HTTP bytes, possibly nothing) and
/// then keeps the connection open, silent; counts connections.
async fn stalling_server(prefix: Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            let prefix = prefix.clone();
            tokio::spawn(async move {
                // Read the request head, then answer with the prefix and fall silent.
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                if socket.write_all(&prefix).await.is_err() {
                    return;
                }
                // Silent until the client goes away (or the test's runtime ends).
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    (url, connections)
}

/// The status line and headers of a streamed 200 response.
fn streaming_head() -> Vec<u8> {
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        .to_vec()
}

/// `data` as one HTTP chunk.
fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

fn transport(max_retries: u32) -> HttpTransport {
    HttpTransport::new(TransportConfig {
        connect_timeout: SHORT,
        first_byte_timeout: SHORT,
        idle_timeout: SHORT,
        max_retries,
        base_backoff: Duration::from_millis(1),
    })
    .unwrap()
}

fn endpoint(url: &str) -> Endpoint {
    Endpoint::anthropic(ApiKey::new("sk-test")).with_base_url(url)
}

/// Posts through `transport`, collecting the retries it announces.
async fn post(
    transport: &HttpTransport,
    url: &str,
) -> (
    Result<flemma_providers::ResponseStream, TransportError>,
    Vec<Retry>,
) {
    let retries = Mutex::new(Vec::new());
    let result = transport
        .post_stream_observed(&endpoint(url), "{}".to_owned(), &|r: &Retry| {
            retries.lock().unwrap().push(r.clone());
        })
        .await;
    (result, retries.into_inner().unwrap())
}

#[tokio::test]
async fn headers_then_nothing_is_a_first_byte_timeout_and_is_retried() {
    let (url, connections) = stalling_server(streaming_head()).await;
    let started = Instant::now();
    let (result, retries) = post(&transport(2), &url).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            TransportError::Timeout {
                timeout: Timeout::FirstByte(SHORT),
                attempts: 3,
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "no response within 300 ms after 3 attempts"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 3);
    let shown: Vec<String> = retries.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "retrying in 1 ms: no response within 300 ms (attempt 2 of 3)",
            "retrying in 2 ms: no response within 300 ms (attempt 3 of 3)",
        ]
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_server_that_never_answers_gives_up_after_its_retries() {
    let (url, connections) = stalling_server(Vec::new()).await;
    let started = Instant::now();
    let (result, retries) = post(&transport(3), &url).await;
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            TransportError::Timeout {
                timeout: Timeout::FirstByte(_),
                attempts: 4,
            }
        ),
        "{err:?}"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 4);
    assert_eq!(retries.len(), 3);
    assert!(
        retries
            .iter()
            .all(|r| r.reason == RetryReason::Timeout(Timeout::FirstByte(SHORT))),
        "{retries:?}"
    );
    // Four waits of 300 ms, not four of the old 120 s.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_stream_that_stalls_midway_ends_with_an_idle_timeout_and_is_not_retried() {
    let recording = String::from_utf8(peer("anthropic_hello_success_stream.txt")).unwrap();
    let cut = recording.rfind("event: content_block_delta").unwrap();
    let mut response = streaming_head();
    response.extend(chunk(&recording.as_bytes()[..cut]));
    let (url, connections) = stalling_server(response).await;
    let started = Instant::now();
    let events = stream_events(&transport(3), &endpoint(&url), "{}".to_owned())
        .await
        .unwrap();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello! How");
    let first_error = events.iter().find_map(|e| match e {
        StreamEvent::Error { message } => Some(message.as_str()),
        _ => None,
    });
    assert_eq!(
        first_error,
        Some("the stream stalled: nothing received for 300 ms")
    );
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::Done { .. })));
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "mid-stream is not retried"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_429_announces_its_retry_with_the_wait_it_asked_for() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "0.05"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_bytes(peer("anthropic_hello_success_stream.txt")),
        )
        .mount(&server)
        .await;
    let (result, retries) = post(&transport(3), &server.uri()).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0].reason, RetryReason::Status(429));
    assert_eq!(retries[0].delay, Duration::from_millis(50));
    assert_eq!(
        retries[0].to_string(),
        "retrying in 50 ms: HTTP 429 (attempt 2 of 4)"
    );
}
