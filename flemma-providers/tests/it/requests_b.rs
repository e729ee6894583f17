//! Chat Completions and Vertex request bodies built from peer transcripts (spec §13.4, §13.5).

use flemma_providers::{
    ForeignThinking, ProviderKind, RequestOptions, Thinking, anthropic_request, body_to_string,
    build_prompt, chat_completions_request, openai_responses_request, vertex_request,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::{options, prompt};

fn chat(name: &str) -> Value {
    chat_completions_request(&prompt(name), &options("kimi-k2.5")).to_value()
}

fn vertex(name: &str) -> Value {
    vertex_request(&prompt(name), &options("gemini-2.5-pro")).to_value()
}

#[test]
fn chat_and_vertex_snapshots() {
    let cases = [
        (
            ProviderKind::OpenAiChat,
            "kimi-k2.5",
            "chat",
            [
                "conversation_with_tools",
                "conversation_parallel_incomplete",
                "conversation_tool_error",
            ],
        ),
        (
            ProviderKind::Vertex,
            "gemini-2.5-pro",
            "vertex",
            [
                "conversation_with_tools_vertex",
                "conversation_with_thought_signature_vertex",
                "conversation_tool_error_vertex",
            ],
        ),
    ];
    for (kind, model, label, names) in cases {
        for name in names {
            let prompt = prompt(&format!("{name}.chat"));
            let body = kind.request(&prompt, &options(model)).to_json();
            insta::assert_snapshot!(format!("{label}__{name}"), body);
        }
    }
}

#[test]
fn chat_tool_messages_precede_user_text() {
    let text = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `calculator` (`call:1`)\n\n```json\n{\"expression\":\"1+1\"}\n```\n\n@You:\nThanks.\n\n**Tool Result:** `call:1`\n\n```\n2\n```\n";
    let body = chat_completions_request(
        &build_prompt(&flemma_ast::parse(text)),
        &RequestOptions::new("m"),
    )
    .to_value();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "call:1", "name": "calculator", "content": "2"})
    );
    assert_eq!(messages[3], json!({"role": "user", "content": "Thanks."}));
    assert_eq!(messages.len(), 4);
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

#[test]
fn chat_synthetic_results_follow_the_real_one() {
    let body = chat("conversation_parallel_incomplete.chat");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[3]["tool_call_id"], "toolu_01AAA");
    assert_eq!(messages[3]["content"], "105");
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "toolu_01BBB", "name": "calculator", "content": "Error: No result provided"})
    );
    assert_eq!(
        messages[2]["tool_calls"][1]["function"]["arguments"],
        r#"{"expression":"23 * 3"}"#
    );
}

#[test]
fn chat_error_results_and_reasoning() {
    let text = "@You:\nGo.\n\n@Assistant:\n<thinking>\nHmm.\n</thinking>\n\n**Tool Use:** `a.b` (`c1`)\n\n```json\n{}\n```\n\n@You:\n**Tool Result:** `c1` (error)\n\n```\n```\n\n**Tool Result:** `zz`\n\n```\nx\n```\n";
    let body = chat_completions_request(
        &build_prompt(&flemma_ast::parse(text)),
        &RequestOptions::new("m"),
    )
    .to_value();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "a__b", "arguments": "{}"}}], "reasoning_content": "Hmm."})
    );
    assert_eq!(messages[2]["name"], "a__b");
    assert_eq!(messages[2]["content"], "Error: Tool execution failed");
    // A result whose tool use is unknown is named after its id.
    assert_eq!(messages[3]["name"], "zz");
}

#[test]
fn vertex_thought_signature_on_first_function_call() {
    let text = "@You:\nGo.\n\n@Assistant:\nSure.\n\n**Tool Use:** `calculator` (`urn:flemma:tool:calculator:1`)\n\n```json\n{\"expression\":\"1\"}\n```\n\n**Tool Use:** `calculator` (`urn:flemma:tool:calculator:2`)\n\n```json\n{\"expression\":\"2\"}\n```\n\n<thinking vertex:signature=\"sig-1\">\nThink.\n</thinking>\n";
    let body = vertex_request(
        &build_prompt(&flemma_ast::parse(text)),
        &RequestOptions::new("m"),
    )
    .to_value();
    let parts = body["contents"][1]["parts"].as_array().unwrap();
    assert_eq!(parts[0], json!({"text": "Sure."}));
    assert_eq!(parts[1]["thoughtSignature"], "sig-1");
    assert!(parts[2].get("thoughtSignature").is_none());

    let body = vertex("conversation_with_thought_signature_vertex.chat");
    let parts = body["contents"][1]["parts"].as_array().unwrap();
    assert!(parts[0].get("thoughtSignature").is_none());
    assert_eq!(
        parts[1]["thoughtSignature"],
        "test-thought-signature-abc123"
    );
}

#[test]
fn vertex_sends_foreign_thinking_as_text() {
    let text = "@You:\nHi\n\n@Assistant:\nHello.\n\n<thinking anthropic:signature=\"s\">\nA thought.\n</thinking>\n\n<thinking>\nAnother.\n</thinking>\n\n<thinking vertex:signature=\"v\">\nOwn thought.\n</thinking>\n\n@You:\nAgain\n";
    let body = vertex_request(
        &build_prompt(&flemma_ast::parse(text)),
        &RequestOptions::new("m"),
    )
    .to_value();
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{
            "text": "<thinking>\nA thought.\n\nAnother.\n</thinking>\n\nHello.",
            "thoughtSignature": "v",
        }])
    );
}

#[test]
fn foreign_thinking_can_be_dropped() {
    let text = "@You:\nHi\n\n@Assistant:\nHello.\n\n<thinking openai:signature=\"x\">\nA thought.\n</thinking>\n\n@You:\nAgain\n";
    let doc = flemma_ast::parse(text);
    let prompt = build_prompt(&doc);
    let options = RequestOptions {
        foreign_thinking: ForeignThinking::Drop,
        ..RequestOptions::new("m")
    };
    let body = vertex_request(&prompt, &options).to_value();
    assert_eq!(body["contents"][1]["parts"], json!([{"text": "Hello."}]));
    let body = anthropic_request(&prompt, &options).to_value();
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "Hello."}])
    );
    let body = openai_responses_request(&prompt, &options).to_value();
    let input = body["input"].as_array().unwrap();
    assert!(
        input
            .iter()
            .all(|item| !item.to_string().contains("A thought.")),
        "{input:?}"
    );
    let body = anthropic_request(&prompt, &RequestOptions::new("m")).to_value();
    assert_eq!(
        body["messages"][1]["content"][0]["text"],
        "<thinking>\nA thought.\n</thinking>"
    );
}

#[test]
fn vertex_signature_without_calls_goes_on_text() {
    let text =
        "@You:\nGo.\n\n@Assistant:\n<thinking vertex:signature=\"sig-2\">\nThink.\n</thinking>\n";
    let options = RequestOptions {
        thinking: Thinking::Budget(1024),
        max_tokens: Some(100),
        ..RequestOptions::new("m")
    };
    let body = vertex_request(&build_prompt(&flemma_ast::parse(text)), &options).to_value();
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [{"text": "", "thoughtSignature": "sig-2"}]})
    );
    assert_eq!(
        body["generationConfig"],
        json!({"maxOutputTokens": 100, "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": true}})
    );
    assert!(body.get("tools").is_none() && body.get("toolConfig").is_none());
}

#[test]
fn vertex_function_response_names() {
    // Results without a matching tool use: the name comes from a synthetic id, else `unknown`.
    let text = "@You:\n**Tool Result:** `urn:flemma:tool:slack__post:abc1` (error)\n\n```\nboom\n```\n\n**Tool Result:** `toolu_x`\n\n```\nok\n```\n\nAnd?\n";
    let body = vertex_request(
        &build_prompt(&flemma_ast::parse(text)),
        &RequestOptions::new("m"),
    )
    .to_value();
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [
            {"functionResponse": {"name": "slack__post", "response": {"error": "boom"}}},
            {"functionResponse": {"name": "unknown", "response": {"output": "ok"}}},
            {"text": "And?"},
        ]}])
    );
}

#[test]
fn vertex_synthetic_results() {
    let body = vertex_request(
        &prompt("conversation_parallel_incomplete.chat"),
        &options("gemini-2.5-pro"),
    )
    .to_value();
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    assert_eq!(
        contents[2]["parts"],
        json!([
            {"functionResponse": {"name": "calculator", "response": {"output": "105"}}},
            {"functionResponse": {"name": "calculator", "response": {"error": "No result provided", "success": false}}},
        ])
    );
}

/// The bytes a body writes are the bytes of its value with sorted keys and the trailing keys
/// last, for every peer transcript and provider.
#[test]
fn bodies_write_what_their_values_hold() {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/peer");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "chat") {
            continue;
        }
        let prompt = prompt(path.file_name().unwrap().to_str().unwrap());
        let mut options = options("m");
        options.thinking = Thinking::Budget(2048);
        options.max_tokens = Some(1000);
        options.temperature = Some(0.5);
        for body in [
            anthropic_request(&prompt, &options),
            openai_responses_request(&prompt, &options),
            chat_completions_request(&prompt, &options),
            vertex_request(&prompt, &options),
        ] {
            assert_eq!(
                body.to_json(),
                body_to_string(&body.to_value(), body.trailing_keys()),
                "{}",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 60, "{checked}");
}
