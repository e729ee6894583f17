//! The provider-neutral prompt built from real and inline transcripts.

use flemma_ids::Severity;
use flemma_providers::{
    NO_RESULT_PROVIDED, Part, Prompt, PromptDiagnostic, PromptDiagnosticKind, PromptMessage,
    PromptRole, ThinkingSignature, build_prompt,
};
use pretty_assertions::assert_eq;
use serde_json::json;

fn fixture(name: &str) -> Prompt<'static> {
    let text = String::from_utf8(crate::peer(name)).unwrap();
    build_prompt(&flemma_ast::parse(&text)).into_owned()
}

fn inline(text: &str) -> Prompt<'static> {
    build_prompt(&flemma_ast::parse(text)).into_owned()
}

fn text(text: &str) -> Part<'static> {
    Part::text(text.to_owned())
}

fn user(parts: Vec<Part<'static>>) -> PromptMessage<'static> {
    PromptMessage {
        role: PromptRole::User,
        parts,
    }
}

fn assistant(parts: Vec<Part<'static>>) -> PromptMessage<'static> {
    PromptMessage {
        role: PromptRole::Assistant,
        parts,
    }
}

fn tool_use(id: &str, name: &str, input: serde_json::Value) -> Part<'static> {
    Part::ToolUse {
        id: id.to_owned().into(),
        name: name.to_owned().into(),
        input: match input {
            serde_json::Value::Object(map) => std::borrow::Cow::Owned(map),
            other => panic!("not an object: {other}"),
        },
    }
}

fn result(id: &str, name: Option<&str>, content: &str, is_error: bool) -> Part<'static> {
    Part::ToolResult {
        tool_use_id: id.to_owned().into(),
        name: name.map(|n| n.to_owned().into()),
        parts: if content.is_empty() {
            vec![]
        } else {
            vec![text(content)]
        },
        is_error,
    }
}

fn synthetic(id: &str, name: &str) -> Part<'static> {
    result(id, Some(name), NO_RESULT_PROVIDED, true)
}

fn unresolved(line: u32, id: &str, name: &str) -> PromptDiagnostic {
    PromptDiagnostic {
        kind: PromptDiagnosticKind::ToolUse,
        severity: flemma_ids::Severity::Warning,
        line,
        message: format!(
            "Tool call '{name}' ({id}) has no matching tool result. A synthetic 'No result provided' error response will be sent to the API."
        ),
    }
}

const SYSTEM: &str = "You are a helpful assistant with access to a calculator tool.";

#[test]
fn conversation_with_tools() {
    let prompt = fixture("conversation_with_tools.chat");
    assert_eq!(
        prompt,
        Prompt {
            system: Some(SYSTEM.into()),
            messages: vec![
                user(vec![text("What is 15 multiplied by 7?")]),
                assistant(vec![
                    text("I'll calculate that for you.\n"),
                    tool_use(
                        "toolu_01A09q90qw90lq917835lgs0",
                        "calculator",
                        json!({"expression": "15 * 7"})
                    ),
                ]),
                user(vec![result(
                    "toolu_01A09q90qw90lq917835lgs0",
                    Some("calculator"),
                    "105",
                    false
                )]),
                assistant(vec![text("15 multiplied by 7 equals **105**.")]),
            ],
            diagnostics: vec![],
        }
    );
}

#[test]
fn tool_error_is_an_error_result() {
    let prompt = fixture("conversation_tool_error.chat");
    assert_eq!(prompt.diagnostics, vec![]);
    assert_eq!(
        prompt.messages[2],
        user(vec![result(
            "toolu_01ERROR123",
            Some("calculator"),
            "Division by zero is undefined",
            true
        )])
    );
}

#[test]
fn parallel_incomplete_gets_one_synthetic_result() {
    let prompt = fixture("conversation_parallel_incomplete.chat");
    assert_eq!(prompt.messages.len(), 4);
    assert_eq!(
        prompt.messages[2],
        user(vec![result(
            "toolu_01AAA",
            Some("calculator"),
            "105",
            false
        )])
    );
    assert_eq!(
        prompt.messages[3],
        user(vec![synthetic("toolu_01BBB", "calculator")])
    );
    assert_eq!(
        prompt.diagnostics,
        vec![unresolved(18, "toolu_01BBB", "calculator")]
    );
}

#[test]
fn redacted_and_signed_thinking_are_kept() {
    let prompt = fixture("conversation_with_redacted_thinking.chat");
    assert_eq!(prompt.system.as_deref(), Some("You are helpful."));
    assert_eq!(
        prompt.messages,
        vec![
            user(vec![text("What is 2+2?")]),
            assistant(vec![
                text("The answer is 4.\n"),
                Part::Thinking {
                    content: "Let me verify.".into(),
                    signature: Some(ThinkingSignature {
                        provider: "anthropic".into(),
                        value: "sig-abc123".into(),
                    }),
                    redacted: false,
                },
                Part::Thinking {
                    content: "encrypted-redacted-data-xyz789".into(),
                    signature: None,
                    redacted: true,
                },
            ]),
            user(vec![text("And 3+3?")]),
        ]
    );
    assert_eq!(prompt.diagnostics, vec![]);
}

#[test]
fn truncated_background_jobs_get_four_synthetic_results() {
    let prompt = fixture("conversation_truncated_background_jobs.chat");
    assert_eq!(prompt.messages.len(), 3);
    let calls: Vec<_> = prompt.messages[1]
        .parts
        .iter()
        .filter(|p| matches!(p, Part::ToolUse { .. }))
        .collect();
    assert_eq!(calls.len(), 4);
    assert!(matches!(
        prompt.messages[1].parts.last(),
        Some(Part::Thinking {
            signature: None,
            redacted: false,
            ..
        })
    ));
    assert_eq!(
        prompt.messages[2],
        user(vec![
            synthetic("toolu_calc_2_plus_2", "calculator_async"),
            synthetic("toolu_calc_4_plus_4", "calculator_async"),
            synthetic("toolu_count_lua_modules", "bash"),
            synthetic("toolu_git_branch", "bash"),
        ])
    );
    assert_eq!(
        prompt.diagnostics,
        vec![
            unresolved(16, "toolu_calc_2_plus_2", "calculator_async"),
            unresolved(22, "toolu_calc_4_plus_4", "calculator_async"),
            unresolved(28, "toolu_count_lua_modules", "bash"),
            unresolved(34, "toolu_git_branch", "bash"),
        ]
    );
}

const BACKGROUND_CALL: &str = "@You:\nRun it.\n\n@Assistant:\n**Tool Use:** `bash` (`t1`)\n\n```json\n{\"command\":\"make\"}\n```\n\n@You:\n**Tool Result:** `t1` (job=job_1)\n\n```\nStarted job job_1\n```\n\n";

#[test]
fn job_results_become_text_in_document_order() {
    let prompt = inline(&format!(
        "{BACKGROUND_CALL}@Assistant:\nWaiting.\n\n@You:\nBefore.\n\n**Job Result:** `job_1`\n\n```\nbuilt\n```\n\nAfter.\n"
    ));
    assert_eq!(
        prompt.messages[2],
        user(vec![result("t1", Some("bash"), "Started job job_1", false)])
    );
    assert_eq!(
        prompt.messages[4],
        user(vec![
            text("Before.\n"),
            text("[Job result for bash (t1)]\nbuilt"),
            // Text keeps its blank separator lines; adapters trim where a provider needs it.
            text("\nAfter."),
        ])
    );
    assert_eq!(prompt.diagnostics, vec![]);
}

/// Spec §8.6: "The `(error)` status of a Job Result is not conveyed separately — only its
/// text is sent." (The reference's fixtures hold no failed Job Result to say otherwise.)
#[test]
fn a_failed_job_result_sends_only_its_text() {
    let prompt = inline(&format!(
        "{BACKGROUND_CALL}@Assistant:\nWaiting.\n\n@You:\n**Job Result:** `job_1` (error)\n\n```\nJob lost: session ended before completion.\n```\n"
    ));
    assert_eq!(
        prompt.messages[4],
        user(vec![text(
            "[Job result for bash (t1)]\nJob lost: session ended before completion."
        )])
    );
}

#[test]
fn job_result_of_an_unknown_job() {
    let prompt = inline("@You:\nHi.\n\n@You:\n**Job Result:** `job_9`\n\n```\nlost output\n```\n");
    assert_eq!(
        prompt.messages,
        vec![
            user(vec![text("Hi.")]),
            user(vec![text(
                "[Job result for unknown tool (job: job_9)]\nlost output"
            )]),
        ]
    );
    assert_eq!(prompt.diagnostics.len(), 1);
    assert_eq!(prompt.diagnostics[0].line, 5);
}

#[test]
fn empty_job_result_sends_nothing() {
    let prompt = inline(&format!(
        "{BACKGROUND_CALL}@You:\n**Job Result:** `job_1`\n\n```\n```\n"
    ));
    assert_eq!(prompt.messages.len(), 3);
}

#[test]
fn lifecycle_results_are_dropped_and_their_calls_resolved_synthetically() {
    let prompt = inline(
        "@Assistant:\n**Tool Use:** `bash` (`t1`)\n\n```json\n{}\n```\n\n**Tool Use:** `bash` (`t2`)\n\n```json\n{}\n```\n\n**Tool Use:** `bash` (`t3`)\n\n```json\n{}\n```\n\n@You:\n**Tool Result:** `t1` (pending)\n\n```\n```\n\n**Tool Result:** `t2` (rejected)\n\n```\nno\n```\n\n**Tool Result:** `t3`\n\n```\nok\n```\n",
    );
    assert_eq!(
        prompt.messages,
        vec![
            assistant(vec![
                tool_use("t1", "bash", json!({})),
                tool_use("t2", "bash", json!({})),
                tool_use("t3", "bash", json!({})),
            ]),
            user(vec![result("t3", Some("bash"), "ok", false)]),
            user(vec![synthetic("t1", "bash"), synthetic("t2", "bash")]),
        ]
    );
    assert_eq!(
        prompt.diagnostics,
        vec![unresolved(2, "t1", "bash"), unresolved(8, "t2", "bash")]
    );
}

#[test]
fn abort_marker_without_tool_use_becomes_text() {
    let prompt = inline(
        "@You:\nTell me a story.\n\n@Assistant:\nOnce upon a time\n\n<!-- flemma:aborted: Response interrupted by the user. -->\n",
    );
    assert_eq!(
        prompt.messages[1],
        assistant(vec![
            text("Once upon a time\n"),
            text("<!-- Response interrupted by the user. -->"),
        ])
    );
}

#[test]
fn abort_marker_with_tool_use_is_dropped() {
    let prompt = inline(
        "@Assistant:\nLet me look.\n\n**Tool Use:** `bash` (`t1`)\n\n```json\n{\"command\":\"ls\"}\n```\n\n<!-- flemma:aborted: Response interrupted by the user. -->\n\n",
    );
    assert_eq!(
        prompt.messages[0],
        assistant(vec![
            text("Let me look.\n"),
            tool_use("t1", "bash", json!({"command": "ls"})),
        ])
    );
    // The interrupted call is still answered, like any call without a result.
    assert_eq!(prompt.messages[1], user(vec![synthetic("t1", "bash")]));
    assert_eq!(prompt.diagnostics, vec![unresolved(4, "t1", "bash")]);
}

#[test]
fn unknown_roles_are_dropped_and_the_last_system_wins() {
    let prompt = inline(
        "@System:\nFirst.\n\n@Note:\nnot for the model\n\n@You:\nHi {{ name }} {%- if x -%}!{% endif %}\n\n@System:\n  Second.  \n\n@Assistant:\n\n\n",
    );
    assert_eq!(
        prompt,
        Prompt {
            system: Some("Second.".into()),
            // Undefined names render as nothing; `{%-` trims the space before it.
            messages: vec![user(vec![text("Hi ")])],
            // Dropped, but named: a newcomer's `@User:` is never silently lost.
            diagnostics: vec![PromptDiagnostic {
                kind: PromptDiagnosticKind::Role,
                severity: Severity::Warning,
                line: 4,
                message: "@Note: is not a role: its message is not sent (the roles are @System:, @You: and @Assistant:)"
                    .into(),
            }],
        }
    );
}

#[test]
fn malformed_segments_and_empty_thinking_are_not_sent() {
    let prompt = inline(
        "@Assistant:\n<thinking>\n</thinking>\n\n**Tool Use:** `bash` (`t1`)\n\n```json\nnot json\n```\n\nDone.\n",
    );
    assert_eq!(prompt.messages, vec![assistant(vec![text("\nDone.")])]);
}
