//! The HTTP transport against a local server (wiremock on 127.0.0.1): every recording through
//! the full decode path, retries, error bodies, a cut stream, cancellation, key secrecy.

use std::time::Duration;

use flemma_providers::{
    ApiKey, Endpoint, HttpTransport, ProviderError, ProviderKind, StreamDecoder, StreamEvent,
    TransportConfig, TransportError, VertexDecoder, stream_events, stream_events_with, with_cancel,
};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::recordings::replay;
use crate::{peer, stream_files};

const KEY: &str = "sk-test-SECRET-0123456789";
const VERTEX_PATH: &str =
    "/v1beta1/projects/proj/locations/loc/publishers/google/models/gemini:streamGenerateContent";

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

fn transport(max_retries: u32, base_backoff: Duration) -> HttpTransport {
    HttpTransport::new(TransportConfig {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        max_retries,
        base_backoff,
    })
    .unwrap()
}

fn fast() -> HttpTransport {
    transport(3, Duration::from_millis(1))
}

fn endpoint(kind: ProviderKind, server: &MockServer) -> Endpoint {
    let key = ApiKey::new(KEY);
    let endpoint = match kind {
        ProviderKind::Anthropic => Endpoint::anthropic(key),
        ProviderKind::OpenAiResponses => Endpoint::openai_responses(key),
        ProviderKind::OpenAiChat => Endpoint::openai_chat(key),
        ProviderKind::Vertex => Endpoint::vertex(key, "proj", "loc", "gemini"),
    };
    endpoint.with_base_url(server.uri())
}

fn kind_of(name: &str) -> ProviderKind {
    if name.starts_with("anthropic_") {
        ProviderKind::Anthropic
    } else if name.starts_with("openai_") {
        ProviderKind::OpenAiResponses
    } else if name.starts_with("chat_completions_") {
        ProviderKind::OpenAiChat
    } else if name.starts_with("vertex_") {
        ProviderKind::Vertex
    } else {
        panic!("unknown provider for {name}")
    }
}

fn decoder(kind: ProviderKind) -> Box<dyn StreamDecoder> {
    match kind {
        // Synthetic ids are time-based; a fixed source makes the two paths comparable.
        ProviderKind::Vertex => Box::new(VertexDecoder::with_id_source(|name: &str| {
            format!("urn:flemma:tool:{name}:test0001")
        })),
        other => other.decoder(),
    }
}

fn sse(bytes: Vec<u8>) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_bytes(bytes)
}

fn path_of(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "/v1/messages",
        ProviderKind::OpenAiResponses => "/v1/responses",
        ProviderKind::OpenAiChat => "/v1/chat/completions",
        ProviderKind::Vertex => VERTEX_PATH,
    }
}

#[tokio::test]
async fn every_recording_decodes_the_same_over_http() {
    let server = MockServer::start().await;
    let transport = fast();
    for name in stream_files() {
        let kind = kind_of(&name);
        let bytes = peer(&name);
        server.reset().await;
        Mock::given(method("POST"))
            .and(path(path_of(kind)))
            .respond_with(sse(bytes.clone()))
            .expect(1)
            .mount(&server)
            .await;
        let mut events = Vec::new();
        stream_events_with(
            &transport,
            &endpoint(kind, &server),
            "{}".to_owned(),
            decoder(kind).as_mut(),
            |e| events.push(e),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (expected, _) = replay(&bytes, decoder(kind).as_mut());
        assert_eq!(events, expected, "{name}");
        server.verify().await;
    }
}

#[tokio::test]
async fn requests_carry_the_provider_headers() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .and(header("content-type", "application/json"))
        .respond_with(sse(peer("anthropic_hello_success_stream.txt")))
        .expect(1)
        .mount(&server)
        .await;
    for kind in [ProviderKind::OpenAiResponses, ProviderKind::OpenAiChat] {
        Mock::given(method("POST"))
            .and(path(path_of(kind)))
            .and(header("authorization", format!("Bearer {KEY}").as_str()))
            .and(header("content-type", "application/json"))
            .respond_with(sse(peer("openai_hello_success_stream.txt")))
            .expect(1)
            .mount(&server)
            .await;
    }
    Mock::given(method("POST"))
        .and(path(VERTEX_PATH))
        .and(query_param("alt", "sse"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(sse(peer("vertex_final_response_streaming.txt")))
        .expect(1)
        .mount(&server)
        .await;
    let transport = fast();
    for kind in [
        ProviderKind::Anthropic,
        ProviderKind::OpenAiResponses,
        ProviderKind::OpenAiChat,
        ProviderKind::Vertex,
    ] {
        stream_events(&transport, &endpoint(kind, &server), "{\"a\":1}".to_owned())
            .await
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    }
    let requests = server.received_requests().await.unwrap();
    assert!(requests.iter().all(|r| r.body == b"{\"a\":1}"));
    server.verify().await;
}

#[tokio::test]
async fn a_429_then_a_200_succeeds_honouring_retry_after() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "0"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(sse(peer("anthropic_hello_success_stream.txt")))
        .mount(&server)
        .await;
    // A long backoff: only `retry-after: 0` lets this finish in time.
    let transport = transport(3, Duration::from_secs(30));
    let events = tokio::time::timeout(
        Duration::from_secs(5),
        stream_events(
            &transport,
            &endpoint(ProviderKind::Anthropic, &server),
            "{}".to_owned(),
        ),
    )
    .await
    .expect("retry-after was not honoured")
    .unwrap();
    assert!(
        events.iter().any(|e| matches!(e, StreamEvent::Done { .. })),
        "{events:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_until_exhausted() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string(
            r#"{"type":"error","error":{"type":"api_error","message":"Overloaded right now"}}"#,
        ))
        .mount(&server)
        .await;
    let err = stream_events(
        &transport(2, Duration::from_millis(1)),
        &endpoint(ProviderKind::Anthropic, &server),
        "{}".to_owned(),
    )
    .await
    .unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
    match &err {
        TransportError::Provider {
            attempts: 3,
            source:
                ProviderError::Http {
                    status: 500,
                    message,
                    kind,
                },
        } => {
            assert_eq!(message, "Overloaded right now");
            assert_eq!(kind.as_deref(), Some("api_error"));
        }
        other => panic!("{other:?}"),
    }
    // The status and message once, as the cause.
    assert_eq!(
        chain(&err),
        "the provider answered with an error after 3 attempts: HTTP 500: Overloaded right now"
    );
}

#[tokio::test]
async fn a_401_is_not_retried_and_reads_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401)
                .insert_header("content-type", "application/json")
                .set_body_bytes(peer("openai_invalid_key_error.txt")),
        )
        .mount(&server)
        .await;
    let endpoint = endpoint(ProviderKind::OpenAiResponses, &server);
    let err = stream_events(&fast(), &endpoint, "{}".to_owned())
        .await
        .unwrap_err();
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let text = chain(&err);
    assert!(
        text.starts_with(
            "the provider answered with an error: HTTP 401: You didn't provide an API key."
        ),
        "{text}"
    );
    assert!(
        matches!(err, TransportError::Provider { attempts: 1, .. }),
        "{err:?}"
    );
    assert!(!text.contains(KEY) && !format!("{err:?}").contains(KEY));
}

#[tokio::test]
async fn a_stream_cut_mid_tool_call_yields_no_tool_call() {
    let text = String::from_utf8(peer("anthropic_tool_use_streaming.txt")).unwrap();
    let cut = text.find("event: content_block_stop").unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(text.as_bytes()[..cut].to_vec()))
        .mount(&server)
        .await;
    let events = stream_events(
        &fast(),
        &endpoint(ProviderKind::Anthropic, &server),
        "{}".to_owned(),
    )
    .await
    .unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::ToolCallStart { .. })),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::ToolCall { .. })),
        "{events:?}"
    );
    assert!(
        matches!(events.last(), Some(StreamEvent::Error { .. })),
        "{events:?}"
    );
}

#[tokio::test]
async fn connection_errors_are_retried_then_reported() {
    // A port nothing listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let endpoint =
        Endpoint::anthropic(ApiKey::new(KEY)).with_base_url(format!("http://127.0.0.1:{port}"));
    let err = stream_events(
        &transport(1, Duration::from_millis(1)),
        &endpoint,
        "{}".to_owned(),
    )
    .await
    .unwrap_err();
    match &err {
        TransportError::Connect {
            attempts: 2,
            source,
        } => assert!(source.is_connect(), "{source:?}"),
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("could not connect after 2 attempts"),
        "{err}"
    );
    assert!(!err.to_string().contains(KEY) && !format!("{err:?}").contains(KEY));
}

#[tokio::test]
async fn a_cancelled_call_stops() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            sse(peer("anthropic_hello_success_stream.txt")).set_delay(Duration::from_secs(10)),
        )
        .mount(&server)
        .await;
    let transport = fast();
    let endpoint = endpoint(ProviderKind::Anthropic, &server);
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        with_cancel(
            stream_events(&transport, &endpoint, "{}".to_owned()),
            tokio::time::sleep(Duration::from_millis(50)),
        ),
    )
    .await
    .expect("cancellation did not stop the call");
    assert!(
        matches!(result, Err(TransportError::Cancelled)),
        "{result:?}"
    );
}

#[test]
fn keys_never_print() {
    let key = ApiKey::new(KEY);
    assert_eq!(format!("{key:?}"), "ApiKey(***)");
    assert_eq!(key.to_string(), "ApiKey(***)");
    for endpoint in [
        Endpoint::anthropic(key.clone()),
        Endpoint::openai_chat(key.clone()),
        Endpoint::vertex(key, "p", "l", "m"),
    ] {
        let debug = format!("{endpoint:?}");
        assert!(!debug.contains(KEY), "{debug}");
    }
}

#[test]
fn default_urls() {
    let key = ApiKey::new(KEY);
    assert_eq!(
        Endpoint::anthropic(key.clone()).url(),
        "https://api.anthropic.com/v1/messages"
    );
    assert_eq!(
        Endpoint::openai_responses(key.clone()).url(),
        "https://api.openai.com/v1/responses"
    );
    assert_eq!(
        Endpoint::openai_chat(key.clone()).url(),
        "https://api.openai.com/v1/chat/completions"
    );
    assert_eq!(
        Endpoint::vertex(key.clone(), "proj", "us-central1", "gemini-2.5-pro").url(),
        "https://us-central1-aiplatform.googleapis.com/v1beta1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        Endpoint::anthropic(key)
            .with_base_url("http://127.0.0.1:9/")
            .url(),
        "http://127.0.0.1:9/v1/messages"
    );
}

#[test]
fn keys_come_from_the_environment_by_name() {
    let vars = |name: &str| match name {
        "ANTHROPIC_API_KEY" | "VERTEX_ACCESS_TOKEN" => Some(KEY.to_owned()),
        "VERTEX_LOCATION" => Some("loc".to_owned()),
        "OPENAI_API_KEY" => Some(String::new()),
        _ => None,
    };
    let anthropic = Endpoint::from_lookup(ProviderKind::Anthropic, "m", vars).unwrap();
    assert_eq!(anthropic.kind(), ProviderKind::Anthropic);
    let err = Endpoint::from_lookup(ProviderKind::OpenAiChat, "m", vars).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable OPENAI_API_KEY is not set"
    );
    let err = Endpoint::from_lookup(ProviderKind::Vertex, "m", vars).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable VERTEX_PROJECT is not set"
    );
    assert!(!format!("{err:?}").contains(KEY));
}

/// A streaming call is `Send + 'static` once its inputs are owned, so it runs on a spawned
/// task of a multi-threaded runtime: this does not compile if a decoder stops being `Send`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_calls_run_on_spawned_tasks() {
    let server = MockServer::start().await;
    let name = stream_files()
        .into_iter()
        .find(|n| kind_of(n) == ProviderKind::Vertex)
        .expect("a Vertex recording");
    let bytes = peer(&name);
    Mock::given(method("POST"))
        .respond_with(sse(bytes.clone()))
        .mount(&server)
        .await;
    let (transport, endpoint) = (fast(), endpoint(ProviderKind::Vertex, &server));
    let events =
        tokio::spawn(async move { stream_events(&transport, &endpoint, "{}".to_owned()).await })
            .await
            .unwrap()
            .unwrap();
    assert!(
        matches!(events.last(), Some(StreamEvent::Done { .. })),
        "{name}: {events:?}"
    );
}

#[tokio::test]
async fn a_silent_server_times_out_and_is_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse(peer(&stream_files()[0])).set_delay(Duration::from_secs(30)))
        .mount(&server)
        .await;
    let transport = HttpTransport::new(TransportConfig {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_millis(200),
        idle_timeout: Duration::from_secs(5),
        max_retries: 1,
        base_backoff: Duration::from_millis(1),
    })
    .unwrap();
    let err = stream_events(
        &transport,
        &endpoint(ProviderKind::Anthropic, &server),
        "{}".to_owned(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            TransportError::Timeout {
                timeout: flemma_providers::Timeout::FirstByte(_),
                attempts: 2,
            }
        ),
        "{err:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

/// Hands out `token-1`, `token-2`, … and counts refreshes.
#[derive(Debug, Default)]
struct Tokens {
    issued: std::sync::atomic::AtomicU32,
    refreshes: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl flemma_providers::TokenSource for Tokens {
    async fn token(&self, refresh: bool) -> Result<ApiKey, flemma_providers::TokenError> {
        use std::sync::atomic::Ordering;
        if refresh {
            self.refreshes.fetch_add(1, Ordering::SeqCst);
            self.issued.fetch_add(1, Ordering::SeqCst);
        }
        let n = self.issued.load(Ordering::SeqCst) + 1;
        Ok(ApiKey::new(format!("token-{n}")))
    }
}

#[tokio::test]
async fn an_expired_token_is_refreshed_once() {
    use std::sync::atomic::Ordering;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer token-2"))
        .respond_with(sse(peer("vertex_final_response_streaming.txt")))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer token-1"))
        .respond_with(ResponseTemplate::new(401).set_body_string("token expired"))
        .mount(&server)
        .await;
    let tokens = std::sync::Arc::new(Tokens::default());
    let endpoint =
        Endpoint::vertex_with(tokens.clone(), "proj", "loc", "gemini").with_base_url(server.uri());
    let events = stream_events(
        &transport(0, Duration::from_millis(1)),
        &endpoint,
        "{}".into(),
    )
    .await
    .unwrap();
    assert!(
        events.iter().any(|e| matches!(e, StreamEvent::Text { .. })),
        "{events:?}"
    );
    assert_eq!(tokens.refreshes.load(Ordering::SeqCst), 1);
    assert_eq!(server.received_requests().await.unwrap().len(), 2);

    // A token refused twice is an error: one refresh, no loop.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_string("no"))
        .mount(&server)
        .await;
    let tokens = std::sync::Arc::new(Tokens::default());
    let endpoint =
        Endpoint::vertex_with(tokens.clone(), "proj", "loc", "gemini").with_base_url(server.uri());
    let err = stream_events(&fast(), &endpoint, "{}".into())
        .await
        .unwrap_err();
    assert!(
        matches!(err, TransportError::Provider { attempts: 2, .. }),
        "{err:?}"
    );
    assert_eq!(tokens.refreshes.load(Ordering::SeqCst), 1);
}

/// A token source that fails.
#[derive(Debug)]
struct Broken;

#[async_trait::async_trait]
impl flemma_providers::TokenSource for Broken {
    async fn token(&self, _refresh: bool) -> Result<ApiKey, flemma_providers::TokenError> {
        Err(flemma_providers::TokenError::new(
            "metadata server unreachable",
            Some(Box::new(std::io::Error::other("connection refused"))),
        ))
    }
}

#[tokio::test]
async fn a_failing_token_source_is_reported_without_a_request() {
    let server = MockServer::start().await;
    let endpoint = Endpoint::anthropic(ApiKey::new("unused"))
        .with_token_source(std::sync::Arc::new(Broken))
        .with_base_url(server.uri());
    let err = stream_events(&fast(), &endpoint, "{}".into())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "could not get an access token: metadata server unreachable"
    );
    assert!(std::error::Error::source(&err).is_some());
    assert_eq!(server.received_requests().await.unwrap().len(), 0);
}
