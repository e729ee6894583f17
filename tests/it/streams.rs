//! Streams that stop: a response cut in the middle (marked incomplete, sent again by the next
//! run) and a server that stalls (retried, each retry announced, an error naming its cause
//! once). Real servers on 127.0.0.1.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use flemma::providers::{ApiKey, Endpoint, HttpProvider, TransportConfig};
use flemma::runtime::{Session, SessionError, SessionEvent, Stop};
use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::{chat, peer, registry};

fn sse(body: Vec<u8>) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_bytes(body)
}

/// An error and its causes, joined by `: `.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}

#[tokio::test]
async fn a_cut_stream_is_marked_incomplete_and_the_next_run_sends_the_request_again() {
    let recording = std::fs::read(peer("anthropic_hello_success_stream.txt")).unwrap();
    let text = String::from_utf8(recording.clone()).unwrap();
    // The server closes after "Hello! How", before the rest of the answer.
    let cut = text.rfind("event: content_block_delta").unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(recording[..cut].to_vec()))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(recording))
        .mount(&server)
        .await;
    let provider = HttpProvider::new(
        Endpoint::anthropic(ApiKey::new("sk-test")).with_base_url(server.uri()),
        TransportConfig {
            max_retries: 0,
            ..TransportConfig::default()
        },
    )
    .unwrap();
    let chat = chat(&[], "Hi.");
    let asked = chat.text();
    let session = Session::builder(chat.clone(), registry(), Arc::new(provider)).build();

    let error = session.run().await.unwrap_err();
    match &error {
        SessionError::Stream { message, .. } => {
            assert_eq!(message, flemma::providers::STREAM_CUT);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        chat.text(),
        format!(
            "{asked}\n@Assistant:\nHello! How\n\n<!-- flemma:aborted: Response incomplete: the stream ended before the response completed. -->\n"
        )
    );
    // The marker is spec §1.10's: the parser reads the message as aborted.
    let doc = flemma::ast::parse(&chat.text());
    assert!(doc.messages.last().unwrap().is_aborted());

    // The next run sends the same request again, in place of the incomplete response.
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body, requests[0].body);
    assert_eq!(
        chat.text(),
        format!("{asked}\n@Assistant:\nHello! How can I assist you today?\n\n@You:\n")
    );
}

/// A server that answers every request with the headers of a streamed response and then
/// nothing, the connection open; counts connections.
async fn headers_then_nothing() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head).await.is_err() {
                    return;
                }
                while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    (url, connections)
}

#[tokio::test]
async fn a_stalled_server_is_retried_with_each_retry_announced_and_one_cause_in_the_error() {
    let (url, connections) = headers_then_nothing().await;
    let provider = HttpProvider::new(
        Endpoint::anthropic(ApiKey::new("sk-test")).with_base_url(url),
        TransportConfig {
            first_byte_timeout: Duration::from_millis(300),
            max_retries: 2,
            base_backoff: Duration::from_millis(1),
            ..TransportConfig::default()
        },
    )
    .unwrap();
    let chat = chat(&[], "Hi.");
    let before = chat.text();
    let session = Session::builder(chat.clone(), registry(), Arc::new(provider)).build();
    let mut events = session.subscribe();
    let started = Instant::now();
    let error = session.run().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(
            &error,
            SessionError::Send {
                source: flemma::providers::SendError::Transport(
                    flemma::providers::TransportError::Timeout {
                        timeout: flemma::providers::Timeout::FirstByte(_),
                        attempts: 3,
                    }
                ),
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        chain(&error),
        "the anthropic request failed: no response within 300 ms after 3 attempts"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 3);
    let mut retries = Vec::new();
    while let Some(event) = events.try_recv() {
        if let SessionEvent::Retrying(retry) = event {
            retries.push(retry.to_string());
        }
    }
    assert_eq!(
        retries,
        [
            "retrying in 1 ms: no response within 300 ms (attempt 2 of 3)",
            "retrying in 2 ms: no response within 300 ms (attempt 3 of 3)",
        ]
    );
    // Nothing arrived: the transcript is as it was.
    assert_eq!(chat.text(), before);
}

#[tokio::test]
async fn a_cut_response_with_a_complete_tool_call_answers_it_with_the_marker_and_goes_on() {
    use flemma::providers::{ScriptedProvider, Turn};
    let cut = Turn {
        error: Some(flemma::providers::STREAM_CUT.to_owned()),
        ..Turn::text("Let me compute.")
            .with_tool_use("calculator", serde_json::json!({"expression": "2 + 2"}))
    };
    let provider = Arc::new(ScriptedProvider::new([cut, Turn::text("Sorry, again?")]));
    let chat = chat(&["calculator"], "What is 2 + 2?");
    let session = Session::builder(chat.clone(), registry(), provider.clone()).build();
    assert!(matches!(
        session.run().await.unwrap_err(),
        SessionError::Stream { .. }
    ));
    let marker = "<!-- flemma:aborted: Response incomplete: the stream ended before the response completed. -->";
    assert!(chat.text().trim_end().ends_with(marker), "{}", chat.text());
    // Spec §7.1: the call of an aborted message is not run; its result is the marker's
    // message, and the conversation goes on with the cut response kept.
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let text = chat.text();
    assert!(text.contains("Let me compute."), "{text}");
    assert!(
        text.contains(
            "(error)\n```\nResponse incomplete: the stream ended before the response completed.\n```"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("@Assistant:\nSorry, again?\n\n@You:\n"),
        "{text}"
    );
    assert_eq!(provider.remaining(), 0);
}
