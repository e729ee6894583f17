//! The request of a compacted conversation: sent from its last `**Compaction:**` block on.

use flemma_providers::{
    COMPACTION_PREFIX, Part, PromptRole, anthropic_request, build_prompt, chat_completions_request,
    openai_responses_request, vertex_request,
};
use serde_json::Value;

use crate::options;

/// A conversation compacted once, then again: the second block stands for everything above
/// it, the first included.
const COMPACTED: &str = "@System:\nBe brief.\n\n\
@You:\nSecret plan: canary-above-the-block\n\n\
@Assistant:\n**Tool Use:** `calculator` (`call_1`)\n```json\n{\"expression\":\"1+1\"}\n```\n\n\
@You:\n**Tool Result:** `call_1`\n```\n2\n```\n\n\
@You:\n**Compaction:** (messages=3 tokens=900 summary=20)\n```\nFirst summary.\n```\n\n\
@Assistant:\n**Tool Use:** `calculator` (`call_lost`)\n```json\n{\"expression\":\"2\"}\n```\n\n\
@You:\n**Compaction:** (messages=2 tokens=300 summary=20)\n````\nThe user asked for 1+1 (it is 2).\n```\n@You:\n````\n\n\
@Assistant:\n**Tool Use:** `calculator` (`call_2`)\n```json\n{\"expression\":\"3*3\"}\n```\n\n\
@You:\n**Tool Result:** `call_2`\n```\n9\n```\n\nAnd now?\n";

#[test]
fn only_the_messages_from_the_last_compaction_on_are_sent() {
    let doc = flemma_ast::parse(COMPACTED);
    assert!(doc.is_clean(), "{:?}", doc.diagnostics);
    let prompt = build_prompt(&doc);
    assert_eq!(prompt.system.as_deref(), Some("Be brief."));
    let roles: Vec<PromptRole> = prompt.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [PromptRole::User, PromptRole::Assistant, PromptRole::User]
    );
    assert_eq!(
        prompt.messages[0].parts,
        [Part::text(format!(
            "{COMPACTION_PREFIX}The user asked for 1+1 (it is 2).\n```\n@You:"
        ))]
    );
    // The call above the block that never got a result is not answered with a synthetic
    // result: it is not sent at all.
    assert!(prompt.diagnostics.is_empty(), "{:?}", prompt.diagnostics);
    let json = serde_json::to_string(&prompt).unwrap();
    assert!(!json.contains("canary-above-the-block"));
    assert!(!json.contains("call_lost"));
    assert!(!json.contains("First summary"));
}

#[test]
fn removing_the_block_sends_the_whole_conversation_again() {
    let doc = flemma_ast::parse(COMPACTED);
    let mut whole = doc.clone();
    whole.messages.retain(|m| m.compaction().is_none());
    let prompt = build_prompt(&whole);
    let json = serde_json::to_string(&prompt).unwrap();
    assert!(json.contains("canary-above-the-block"));
    assert!(json.contains("call_lost"));
    assert!(!json.contains(COMPACTION_PREFIX.trim()));
}

#[test]
fn each_provider_body_of_a_compacted_conversation() {
    let doc = flemma_ast::parse(COMPACTED);
    let prompt = build_prompt(&doc);
    let bodies = [
        (
            "anthropic",
            anthropic_request(&prompt, &options("claude-sonnet-4-5")).to_json(),
        ),
        (
            "openai",
            openai_responses_request(&prompt, &options("gpt-5")).to_json(),
        ),
        (
            "chat",
            chat_completions_request(&prompt, &options("gpt-4o")).to_json(),
        ),
        (
            "vertex",
            vertex_request(&prompt, &options("gemini-2.5-pro")).to_json(),
        ),
    ];
    for (name, body) in bodies {
        let value: Value = serde_json::from_str(&body).unwrap();
        insta::assert_json_snapshot!(format!("compacted__{name}"), value);
        assert!(!body.contains("canary-above-the-block"), "{name}");
    }
}
