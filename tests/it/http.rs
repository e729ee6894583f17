//! The full loop against a real local HTTP server replaying recorded streams: request → tool
//! use → the tool runs → its result → a second request carrying the result → the answer.

use std::sync::Arc;
use std::time::Duration;

use flemma::providers::{ApiKey, Endpoint, HttpProvider, TransportConfig};
use flemma::runtime::{Session, Stop};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Match, Mock, MockServer, Request, ResponseTemplate};

use crate::{chat, peer, registry};

/// An HTTP provider that does not retry.
fn plain(endpoint: Endpoint) -> HttpProvider {
    HttpProvider::new(
        endpoint,
        TransportConfig {
            max_retries: 0,
            first_byte_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
            ..TransportConfig::default()
        },
    )
    .unwrap()
}

/// Matches requests whose body does (or does not) contain `needle`.
struct BodyHas(&'static str, bool);

impl Match for BodyHas {
    fn matches(&self, request: &Request) -> bool {
        String::from_utf8_lossy(&request.body).contains(self.0) == self.1
    }
}

/// Serves `first` until a request carries `marker` (a tool result), then `second`; runs the
/// loop; returns the transcript and the bodies received.
async fn replay(
    provider: impl FnOnce(Endpoint) -> HttpProvider,
    endpoint: fn(ApiKey) -> Endpoint,
    marker: &'static str,
    first: &str,
    second: &str,
) -> (String, Vec<Value>) {
    let server = MockServer::start().await;
    for (recording, has_result) in [(first, false), (second, true)] {
        Mock::given(method("POST"))
            .and(BodyHas(marker, has_result))
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", "text/event-stream")
                    .set_body_bytes(std::fs::read(peer(recording)).unwrap()),
            )
            .mount(&server)
            .await;
    }
    let provider = provider(endpoint(ApiKey::new("sk-test")).with_base_url(server.uri()));
    let chat = chat(&["calculator"], "What is 15 multiplied by 7?");
    let session = Session::builder(chat.clone(), registry(), Arc::new(provider)).build();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let bodies = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    (chat.text(), bodies)
}

#[tokio::test]
async fn anthropic_full_loop_sends_the_tool_result_back() {
    let (text, bodies) = replay(
        plain,
        Endpoint::anthropic,
        "tool_result",
        "anthropic_tool_use_streaming.txt",
        "anthropic_final_response_streaming.txt",
    )
    .await;
    assert_eq!(bodies.len(), 2);
    let tools: Vec<&Value> = bodies[0]["tools"].as_array().unwrap().iter().collect();
    assert!(tools.iter().any(|t| t["name"] == "calculator"));
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_01MiSdzFh4udQYmCHCVbtDHw", "name": "calculator", "input": {"expression": "15 * 7"}})
    );
    // The latest message carries the moving cache breakpoint: the result now, the question
    // in the first request.
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01MiSdzFh4udQYmCHCVbtDHw", "content": "105", "cache_control": {"type": "ephemeral"}}]})
    );
    assert_eq!(
        bodies[0]["messages"][0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(messages[0]["content"][0].get("cache_control").is_none());
    insta::assert_snapshot!("anthropic_loop", text);
}

#[tokio::test]
async fn openai_responses_full_loop_sends_the_tool_result_back() {
    let (text, bodies) = replay(
        plain,
        Endpoint::openai_responses,
        "function_call_output",
        "openai_tool_use_streaming.txt",
        "openai_final_response_streaming.txt",
    )
    .await;
    assert_eq!(bodies.len(), 2);
    let input = bodies[1]["input"].as_array().unwrap();
    let output = input
        .iter()
        .find(|item| item["type"] == "function_call_output")
        .expect("the second request carries the result");
    assert_eq!(
        output,
        &json!({"type": "function_call_output", "call_id": "call_KXAyUFOnxWTpzW3JS6qKZ7mI", "output": "105"})
    );
    // One prompt cache key for the conversation's requests: its id, not its path.
    let key = bodies[0]["prompt_cache_key"].as_str().expect("a cache key");
    assert_eq!(bodies[1]["prompt_cache_key"], key);
    assert_eq!(key.len(), 36, "{key}");
    insta::assert_snapshot!("openai_loop", text);
}

#[tokio::test]
async fn vertex_full_loop_sends_the_function_response_back() {
    // Synthetic Vertex ids are time-based; a fixed one keeps the transcript stable.
    let fixed = |endpoint| {
        plain(endpoint).with_decoder(|| {
            Box::new(flemma::providers::VertexDecoder::with_id_source(
                |name: &str| format!("urn:flemma:tool:{name}:test0001"),
            ))
        })
    };
    let (text, bodies) = replay(
        fixed,
        |key| Endpoint::vertex(key, "proj", "loc", "gemini"),
        "functionResponse",
        "vertex_function_call_streaming.txt",
        "vertex_final_response_streaming.txt",
    )
    .await;
    assert_eq!(bodies.len(), 2);
    let contents = bodies[1]["contents"].as_array().unwrap();
    let response = contents
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .find_map(|p| p.get("functionResponse"))
        .expect("the second request carries the result");
    assert_eq!(
        response,
        &json!({"name": "calculator", "response": {"output": "105"}})
    );
    insta::assert_snapshot!("vertex_loop", text);
}

#[tokio::test]
async fn an_error_status_disarms_and_leaves_the_transcript_as_it_was() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_string(
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        ))
        .mount(&server)
        .await;
    let provider = plain(Endpoint::anthropic(ApiKey::new("sk-bad")).with_base_url(server.uri()));
    let chat = chat(&[], "Hi.");
    let before = chat.text();
    let session = Session::builder(chat.clone(), registry(), Arc::new(provider)).build();
    let error = session.run().await.unwrap_err();
    let mut causes = vec![error.to_string()];
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    assert_eq!(
        causes,
        [
            "the anthropic request failed",
            "the provider answered with an error",
            "HTTP 401: invalid x-api-key",
        ]
    );
    assert_eq!(chat.text(), before);
    assert_eq!(session.state(), flemma::runtime::AutopilotState::Idle);
}
