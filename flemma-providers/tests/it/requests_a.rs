//! Anthropic and OpenAI Responses request bodies of the peer transcripts (spec §13.2, §13.3).

use flemma_providers::{
    Thinking, anthropic_request, body_to_string, build_prompt, openai_responses_request,
};
use serde_json::{Value, json};

use crate::{options, prompt};

const TRANSCRIPTS: [&str; 5] = [
    "conversation_with_tools",
    "conversation_parallel_incomplete",
    "conversation_tool_error",
    "conversation_with_anthropic_signature",
    "conversation_with_redacted_thinking",
];

fn anthropic(name: &str) -> String {
    anthropic_request(
        &prompt(&format!("{name}.chat")),
        &options("claude-sonnet-4-5"),
    )
    .to_json()
}

fn openai(name: &str) -> String {
    openai_responses_request(&prompt(&format!("{name}.chat")), &options("gpt-5")).to_json()
}

fn parsed(body: &str) -> Value {
    serde_json::from_str(body).unwrap()
}

#[test]
fn anthropic_bodies() {
    for name in TRANSCRIPTS {
        insta::assert_snapshot!(format!("anthropic__{name}"), anthropic(name));
    }
}

#[test]
fn openai_bodies() {
    for name in TRANSCRIPTS {
        insta::assert_snapshot!(format!("openai__{name}"), openai(name));
    }
}

#[test]
fn anthropic_tool_results_precede_text() {
    let doc = flemma_ast::parse(
        "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `calculator` (`call:1`)\n\n```json\n{\"expression\": \"1\"}\n```\n\n\
         @You:\nThanks, and now?\n\n**Tool Result:** `call:1`\n\n```\n1\n```\n",
    );
    let prompt = build_prompt(&doc);
    let body = anthropic_request(&prompt, &options("claude-sonnet-4-5")).to_value();
    let user = &body["messages"][2]["content"];
    assert_eq!(
        user[0],
        json!({"type": "tool_result", "tool_use_id": "call_1", "content": "1"})
    );
    assert_eq!(user[1]["type"], "text");
    assert_eq!(body["messages"][1]["content"][0]["id"], "call_1");
}

#[test]
fn unresolved_call_gets_synthetic_result() {
    let body = parsed(&anthropic("conversation_parallel_incomplete"));
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "the two user messages are merged");
    assert_eq!(
        messages[2]["content"],
        json!([
            {"content": "105", "tool_use_id": "toolu_01AAA", "type": "tool_result"},
            {"cache_control": {"type": "ephemeral"}, "content": "No result provided", "is_error": true, "tool_use_id": "toolu_01BBB", "type": "tool_result"},
        ])
    );
    let body = parsed(&openai("conversation_parallel_incomplete"));
    let input = body["input"].as_array().unwrap();
    assert_eq!(
        input[input.len() - 1],
        json!({"type": "function_call_output", "call_id": "toolu_01BBB", "output": "Error: No result provided"})
    );
}

#[test]
fn tool_errors() {
    let body = parsed(&anthropic("conversation_tool_error"));
    assert_eq!(body["messages"][2]["content"][0]["is_error"], true);
    let body = parsed(&openai("conversation_tool_error"));
    assert_eq!(
        body["input"][4]["output"],
        "Error: Division by zero is undefined"
    );
}

#[test]
fn anthropic_thinking_comes_first_with_signatures() {
    let body = parsed(&anthropic("conversation_with_redacted_thinking"));
    let content = body["messages"][1]["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(content[0]["signature"], "sig-abc123");
    assert_eq!(content[0]["thinking"], "Let me verify.");
    assert_eq!(
        content[1],
        json!({"type": "redacted_thinking", "data": "encrypted-redacted-data-xyz789"})
    );
    assert_eq!(
        content[2],
        json!({"type": "text", "text": "The answer is 4."})
    );

    let body = parsed(&anthropic("conversation_with_anthropic_signature"));
    let content = body["messages"][1]["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "thinking");
    assert!(
        content[0]["signature"]
            .as_str()
            .unwrap()
            .starts_with("Ev0BCkYI")
    );
    assert_eq!(content[1]["type"], "text");
}

#[test]
fn foreign_thinking_is_text() {
    let text = "@You:\nHi\n\n@Assistant:\nHello.\n\n<thinking openai:signature=\"eyJ0eXBlIjoicmVhc29uaW5nIiwiaWQiOiJyc18xIiwic3VtbWFyeSI6W119\">\nA thought.\n</thinking>\n\n@You:\nAgain\n";
    let doc = flemma_ast::parse(text);
    let prompt = build_prompt(&doc);
    let body = anthropic_request(&prompt, &options("claude-sonnet-4-5")).to_value();
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "text", "text": "<thinking>\nA thought.\n</thinking>"},
            {"type": "text", "text": "Hello."},
        ])
    );
    // OpenAI gets its own reasoning item back, decoded from the signature.
    let body = openai_responses_request(&prompt, &options("gpt-5")).to_value();
    assert_eq!(
        body["input"][1],
        json!({"type": "reasoning", "id": "rs_1", "summary": []})
    );
    assert_eq!(body["input"][2]["id"], "msg_1_1");
}

#[test]
fn anthropic_cache_control_on_last_tool_only() {
    let mut opts = options("claude-sonnet-4-5");
    opts.tools.push(
        flemma_schema::ToolSpec::builder(
            flemma_ids::ToolName::new("bash").unwrap(),
            "Run a command.",
        )
        .input(flemma_schema::dsl::object([(
            "command",
            flemma_schema::dsl::string(),
        )]))
        .build()
        .unwrap(),
    );
    let p = prompt("conversation_with_tools.chat");
    let body = anthropic_request(&p, &opts).to_value();
    let tools = body["tools"].as_array().unwrap();
    assert!(tools[0].get("cache_control").is_none());
    assert_eq!(tools[1]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));

    opts.cache_retention = flemma_providers::CacheRetention::Long;
    let body = anthropic_request(&p, &opts).to_value();
    assert_eq!(
        body["tools"][1]["cache_control"],
        json!({"type": "ephemeral", "ttl": "1h"})
    );
    opts.cache_retention = flemma_providers::CacheRetention::None;
    let body = anthropic_request(&p, &opts).to_value();
    assert!(body["tools"][1].get("cache_control").is_none());

    opts.tools.clear();
    let body = anthropic_request(&p, &opts).to_value();
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
}

/// Where a body has its first declaration.
type Pick = fn(&Value) -> Value;

/// Declarations are built once and shared between bodies: a tool whose spec changed (same
/// name, another description and schema) is declared anew in every format, and the old
/// declaration comes back when the old spec does.
#[test]
fn a_changed_tool_spec_is_declared_anew() {
    let spec = |description: &str, field: &str| {
        flemma_schema::ToolSpec::builder(flemma_ids::ToolName::new("probe").unwrap(), description)
            .input(flemma_schema::dsl::object([(
                field,
                flemma_schema::dsl::string(),
            )]))
            .build()
            .unwrap()
    };
    let p = prompt("conversation_with_tools.chat");
    let mut opts = options("claude-sonnet-4-5");
    let formats: [(&str, Pick); 4] = [
        ("anthropic", |b| b["tools"][0].clone()),
        ("responses", |b| b["tools"][0].clone()),
        ("chat", |b| b["tools"][0]["function"].clone()),
        ("vertex", |b| {
            b["tools"][0]["functionDeclarations"][0].clone()
        }),
    ];
    let declared = |opts: &flemma_providers::RequestOptions| -> Vec<Value> {
        let bodies = [
            anthropic_request(&p, opts).to_value(),
            openai_responses_request(&p, opts).to_value(),
            flemma_providers::chat_completions_request(&p, opts).to_value(),
            flemma_providers::vertex_request(&p, opts).to_value(),
        ];
        formats
            .iter()
            .zip(&bodies)
            .map(|((_, pick), body)| pick(body))
            .collect()
    };
    for (first, second) in [("one", "two"), ("two", "one")] {
        opts.tools = vec![spec(&format!("Probe {first}."), first)];
        let before = declared(&opts);
        opts.tools = vec![spec(&format!("Probe {second}."), second)];
        let after = declared(&opts);
        for (((format, _), old), new) in formats.iter().zip(&before).zip(&after) {
            let (old, new) = (old.to_string(), new.to_string());
            assert!(old.contains(&format!("Probe {first}.")), "{format}: {old}");
            assert!(old.contains(&format!("\"{first}\"")), "{format}: {old}");
            assert!(new.contains(&format!("Probe {second}.")), "{format}: {new}");
            assert!(new.contains(&format!("\"{second}\"")), "{format}: {new}");
            assert!(!new.contains(&format!("\"{first}\"")), "{format}: {new}");
        }
    }
}

#[test]
fn thinking_options() {
    let p = prompt("conversation_with_tools.chat");
    let mut opts = options("claude-sonnet-4-5");
    opts.temperature = Some(0.5);
    opts.thinking = Thinking::Budget(8000);
    let body = anthropic_request(&p, &opts).to_value();
    assert_eq!(body["max_tokens"], 12096);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8000})
    );
    assert!(body.get("temperature").is_none());

    opts.thinking = Thinking::Level(flemma_providers::ThinkingLevel::Max);
    let body = openai_responses_request(&p, &opts).to_value();
    assert_eq!(
        body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert!(body.get("temperature").is_none());

    opts.thinking = Thinking::Off;
    opts.max_tokens = Some(100);
    let body = openai_responses_request(&p, &opts).to_value();
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["max_output_tokens"], 100);
    assert!(body.get("reasoning").is_none());
}

/// The reference key order: every object sorted, then the top level's trailing keys moved last.
fn reference_body_string(body: &Value, trailing: &[&str]) -> String {
    let mut body = body.clone();
    body.sort_all_objects();
    if let Value::Object(map) = &mut body {
        for key in trailing {
            if let Some(value) = map.shift_remove(*key) {
                map.insert((*key).to_owned(), value);
            }
        }
    }
    body.to_string()
}

fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-z\"\\\\\n ]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::vec(("[a-z]{1,3}|tools|messages|system", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    #[test]
    fn body_to_string_sorts_every_object_and_moves_trailing_keys_last(body in json_value()) {
        for trailing in [&["system", "tools", "messages"][..], &["tools", "input"], &[]] {
            proptest::prop_assert_eq!(
                body_to_string(&body, trailing),
                reference_body_string(&body, trailing)
            );
        }
    }
}

/// Every `cache_control` marker of a body, as (where, the marker).
fn breakpoints(body: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    fn walk(at: &str, value: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    if key == "cache_control" {
                        out.push((at.to_owned(), value.clone()));
                    } else {
                        walk(&format!("{at}/{key}"), value, out);
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(&format!("{at}/{i}"), item, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", body, &mut out);
    out
}

/// Anthropic's prompt cache: breakpoints on the tools, the system prompt and the latest
/// message, 5 minutes or an hour as `cache_retention` says, none with `none`; the latest
/// message's breakpoint moves as the conversation grows (three of Anthropic's four).
#[test]
fn anthropic_breakpoints_on_tools_system_and_the_latest_message() {
    let text = "@System:\nBe brief.\n@You:\nWhat is 2+2?\n";
    let doc = flemma_ast::parse(text);
    let prompt = flemma_providers::build_prompt(&doc);
    let mut request = options("claude-haiku-4-5");
    let body = anthropic_request(&prompt, &request).to_value();
    let short = json!({"type": "ephemeral"});
    assert_eq!(
        breakpoints(&body),
        [
            ("/messages/0/content/0".to_owned(), short.clone()),
            ("/system/0".to_owned(), short.clone()),
            ("/tools/0".to_owned(), short.clone()),
        ]
    );
    // The conversation grows: the breakpoint is on the new latest message only.
    let grown = format!("{text}@Assistant:\n4.\n@You:\nAnd 3+3?\n");
    let doc = flemma_ast::parse(&grown);
    let prompt = flemma_providers::build_prompt(&doc);
    let body = anthropic_request(&prompt, &request).to_value();
    let marked: Vec<String> = breakpoints(&body).into_iter().map(|(at, _)| at).collect();
    assert_eq!(marked, ["/messages/2/content/0", "/system/0", "/tools/0"]);
    request.cache_retention = flemma_providers::CacheRetention::Long;
    let body = anthropic_request(&prompt, &request).to_value();
    assert!(
        breakpoints(&body)
            .iter()
            .all(|(_, marker)| *marker == json!({"type": "ephemeral", "ttl": "1h"}))
    );
    request.cache_retention = flemma_providers::CacheRetention::None;
    let body = anthropic_request(&prompt, &request).to_value();
    assert!(breakpoints(&body).is_empty());
    assert_eq!(body["system"], "Be brief.");
}

/// Thinking blocks may not carry a breakpoint: a latest message of Anthropic thinking alone
/// gets none (the tools keep theirs).
#[test]
fn anthropic_breakpoint_skips_thinking() {
    let text =
        "@You:\nHi\n@Assistant:\n<thinking anthropic:signature=\"sig\">\nHmm.\n</thinking>\n";
    let doc = flemma_ast::parse(text);
    let prompt = flemma_providers::build_prompt(&doc);
    let body = anthropic_request(&prompt, &options("claude-haiku-4-5")).to_value();
    assert_eq!(
        body["messages"][1]["content"][0]["type"], "thinking",
        "{body}"
    );
    let marked: Vec<String> = breakpoints(&body).into_iter().map(|(at, _)| at).collect();
    assert_eq!(marked, ["/tools/0"]);
}

/// OpenAI's prompt cache: the conversation's key on every request, none without caching.
#[test]
fn openai_prompt_cache_key() {
    let doc = flemma_ast::parse("@You:\nHi\n");
    let prompt = flemma_providers::build_prompt(&doc);
    let mut request = options("gpt-5.4");
    let body = flemma_providers::openai_responses_request(&prompt, &request).to_value();
    assert!(body.get("prompt_cache_key").is_none(), "no key, none sent");
    request.cache_key = Some("0d3e23a3-fd35-8aa7-8784-937105c01be3".to_owned());
    let body = flemma_providers::openai_responses_request(&prompt, &request).to_value();
    assert_eq!(
        body["prompt_cache_key"],
        "0d3e23a3-fd35-8aa7-8784-937105c01be3"
    );
    request.cache_retention = flemma_providers::CacheRetention::None;
    let body = flemma_providers::openai_responses_request(&prompt, &request).to_value();
    assert!(body.get("prompt_cache_key").is_none());
    // Chat Completions may be a compatible server that refuses unknown fields: no key there.
    request.cache_retention = flemma_providers::CacheRetention::Short;
    let body = flemma_providers::chat_completions_request(&prompt, &request).to_value();
    assert!(body.get("prompt_cache_key").is_none());
}
