//! Printing: canonical files print back byte for byte, printed output re-parses to an equal
//! document, and no input makes the parser panic.

use std::fmt::Write as _;

use flemma_ast::writer::{self, ResultBody, WriterOptions};
use flemma_ast::{ToolStatus, apply_edits, parse, parse_bytes, print};
use flemma_ids::{JobId, ToolName, ToolUseId};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

use crate::common::{check_spans, without_positions};

/// Parses `text`, prints it, and checks that the printed text parses to the same document
/// (positions aside) and is a fixed point of printing.
fn assert_reprints(text: &str) -> String {
    let doc = parse(text);
    check_spans(&doc);
    let printed = print(&doc);
    let reparsed = parse(&printed);
    check_spans(&reparsed);
    assert_eq!(
        without_positions(&reparsed),
        without_positions(&doc),
        "reprint of {text:?}"
    );
    assert_eq!(
        print(&reparsed),
        printed,
        "print is not idempotent for {text:?}"
    );
    printed
}

#[test]
fn peer_transcripts_reprint_to_equal_documents() {
    for entry in std::fs::read_dir(crate::common::shared_dir().join("fixtures/peer")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "chat") {
            assert_reprints(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn canonical_peer_transcripts_print_byte_for_byte() {
    // These files are already canonical: one blank line between messages, a final newline.
    for name in [
        "conversation_with_tools.chat",
        "conversation_nested_backticks.chat",
        "conversation_parallel_tools.chat",
        "conversation_tool_error.chat",
        "conversation_tool_result_yaml.chat",
        "conversation_with_redacted_thinking.chat",
        "conversation_truncated_background_jobs.chat",
    ] {
        let text = crate::common::peer(name);
        assert_eq!(print(&parse(&text)), text, "{name}");
    }
}

#[test]
fn empty_and_blank_inputs() {
    assert_eq!(print(&parse("")), "");
    assert!(parse("").messages.is_empty());
    assert_eq!(parse("").line_count, 0);
    assert_eq!(parse("\n\n").line_count, 2);
    assert_reprints("\n\n  \n");
}

/// Found by the property tests: block fences whose length or opener text matters to the
/// message-level fence tracking around them must print as written.
#[test]
fn block_fences_print_as_written() {
    for text in [
        // A one-backtick block inside a message-level fence does not close it.
        "@You:\n```\n**Tool Result:** `t1`\n`\n@You:\n```",
        // A closer longer than its opener opens a message-level fence when printed alone.
        "@You:\n**Tool Result:** `t1`\n`\n```\n@You:",
        // An opener with a backtick after the ticks is no message-level fence.
        "@You:\n**Tool Result:** `t1`\n```**Tool Use:** `bash` (`t1`)\n```\n@You:",
    ] {
        let printed = assert_reprints(text);
        assert_eq!(printed.trim_end(), text.trim_end(), "{text:?}");
    }
}

#[test]
fn crlf_parses_like_lf() {
    let lf = "@You:\nHi {{ x }}\n\n@Assistant:\n**Tool Use:** `a` (`t`)\n```json\n{}\n```\n";
    let crlf = lf.replace('\n', "\r\n");
    assert_eq!(parse(&crlf), parse(lf));
    assert_eq!(print(&parse(&crlf)), lf);
}

#[test]
fn invalid_utf8_names_the_offset() {
    let err = parse_bytes(b"@You:\nab\xffcd").unwrap_err();
    assert_eq!(err.to_string(), "invalid UTF-8 at byte offset 8");
}

/// Lines built from the pieces constructs are made of, so that generated documents hit
/// every rule and its edges.
fn line() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "@You:",
        "@Assistant:",
        "@System:",
        "@Other:",
        "```",
        "````",
        "```json",
        "`",
        "``",
        "{}",
        "{\"a\":1}",
        "[1]",
        "{",
        "}",
        "**Tool Use:** `bash` (`t1`)",
        "**Tool Use:** `x.y` (`t2`)",
        "**Tool Result:** `t1`",
        "**Tool Result:** `t2` (pending)",
        "**Tool Result:** `t1` (error job=j1 x nil rejected)",
        "**Job Result:** `j1`",
        "**Job Result:** `j1` (error pending)",
        "**Compaction:** (messages=3 tokens=100)",
        "**Compaction:** (pending)",
        "<thinking>",
        "</thinking>",
        "<thinking redacted>",
        "<thinking anthropic:signature=\"s\">",
        "<thinking v:signature=\"s\"/>",
        "<!-- flemma:aborted: stop -->",
        "{{ x }}",
        "{%- if y -%}",
        "{{ \"}}\" }}",
        "-- c",
        "[[",
        "]]",
        " ",
        "\t",
        "\r",
        "text",
        "é",
        "(",
        ")",
        "'",
        "\"",
        "=",
        ",",
    ]);
    prop::collection::vec(pieces, 0..4).prop_map(|p| p.concat())
}

fn document() -> impl Strategy<Value = String> {
    prop::collection::vec(line(), 0..40).prop_map(|lines| lines.join("\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn printed_output_reparses_to_an_equal_document(text in document()) {
        assert_reprints(&text);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(doc) = parse_bytes(&bytes) {
            check_spans(&doc);
        }
        let lossy = String::from_utf8_lossy(&bytes);
        assert_reprints(&lossy);
    }

    #[test]
    fn arbitrary_text_reprints(text in "(?s).{0,300}") {
        assert_reprints(&text);
    }

    #[test]
    fn documents_built_by_the_writer_print_byte_for_byte(turns in prop::collection::vec(turn(), 1..5), compact in any::<bool>()) {
        let text = build(&turns, WriterOptions { compact_headers: compact });
        prop_assert!(parse(&text).is_clean(), "{}", text);
        prop_assert_eq!(print(&parse(&text)), text.clone());
        assert_reprints(&text);
    }
}

/// One exchange the harness could write.
#[derive(Debug, Clone)]
struct Turn {
    user: String,
    thinking: Option<(String, bool)>,
    reply: String,
    tools: Vec<(String, serde_json::Value, Outcome)>,
    job: Option<(String, bool)>,
}

#[derive(Debug, Clone)]
enum Outcome {
    Status(ToolStatus),
    Result(ResultBody),
}

fn words() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            "fix",
            "the",
            "```",
            "`x`",
            "{{ a }}",
            "{% b %}",
            "é",
            "parser",
            "**bold**",
            "@You",
            "<thinking>",
        ]),
        1..8,
    )
    .prop_map(|w| format!("- {}", w.join(" ")))
}

fn multiline() -> impl Strategy<Value = String> {
    prop::collection::vec(words(), 1..4).prop_map(|l| l.join("\n"))
}

fn turn() -> impl Strategy<Value = Turn> {
    let outcome = prop_oneof![
        prop::sample::select(vec![
            ToolStatus::Pending,
            ToolStatus::Approved,
            ToolStatus::Denied,
            ToolStatus::Rejected
        ])
        .prop_map(Outcome::Status),
        multiline().prop_map(|s| Outcome::Result(ResultBody::Success(s))),
        words().prop_map(|s| Outcome::Result(ResultBody::Json(
            serde_json::json!({ "out": s, "n": 3 })
        ))),
        (prop::option::of(words()), prop::option::of(multiline())).prop_map(
            |(message, partial_output)| Outcome::Result(ResultBody::Error {
                message,
                partial_output
            })
        ),
    ];
    let tool = (
        prop::sample::select(vec!["bash", "read", "flemma.jobs.status"]).prop_map(str::to_owned),
        words().prop_map(|w| serde_json::json!({ "command": w, "timeout": null })),
        outcome,
    );
    (
        multiline(),
        prop::option::of((multiline(), any::<bool>())),
        multiline(),
        prop::collection::vec(tool, 0..3),
        prop::option::of((multiline(), any::<bool>())),
    )
        .prop_map(|(user, thinking, reply, tools, job)| Turn {
            user,
            thinking,
            reply,
            tools,
            job,
        })
}

/// Writes the turns the way the harness does: streamed responses, then placeholders and results.
fn build(turns: &[Turn], opts: WriterOptions) -> String {
    let mut text = String::new();
    for (t, turn) in turns.iter().enumerate() {
        if !text.is_empty() {
            text.push('\n');
        }
        write!(text, "@You:\n{}\n\n@Assistant:\n", turn.user).unwrap();
        let mut response = turn.reply.clone();
        for (k, (name, input, _)) in turn.tools.iter().enumerate() {
            let id = ToolUseId::new(format!("toolu_{t}_{k}")).unwrap();
            response.push_str(&writer::tool_use_block(
                &response,
                &ToolName::new(name.as_str()).unwrap(),
                &id,
                input.as_object().unwrap(),
            ));
        }
        if let Some((thought, signed)) = &turn.thinking {
            response.push_str(writer::append_prefix(&response));
            let signature = signed.then_some(("anthropic", "c2ln"));
            response.push_str(&writer::thinking_block(thought, signature, false));
        }
        text.push_str(&response);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        for (k, (_, _, outcome)) in turn.tools.iter().enumerate() {
            let id = format!("toolu_{t}_{k}");
            let status = match outcome {
                Outcome::Status(s) => *s,
                Outcome::Result(_) => ToolStatus::Approved,
            };
            let placed = writer::insert_placeholder(&parse(&text), &id, status, opts).unwrap();
            text = apply_edits(&text, placed.edit.as_slice()).unwrap();
            if let Outcome::Result(body) = outcome {
                let edit = writer::write_result(&parse(&text), &id, body, opts).unwrap();
                text = apply_edits(&text, &[edit]).unwrap();
            }
        }
        if let Some((content, is_error)) = &turn.job {
            let job = JobId::new(format!("job_{t:08}")).unwrap();
            let block = writer::job_result_lines(&job, *is_error, content, opts);
            let (edit, _) = writer::place_job_result(&parse(&text), &job, block);
            text = apply_edits(&text, &[edit]).unwrap();
        }
    }
    text
}

/// Inputs built to make a naive parser quadratic; each must still parse (in linear time).
#[test]
fn hostile_inputs_parse() {
    let n = 20_000;
    let thinking = format!("@Assistant:\n{}", "<thinking>\n".repeat(n));
    let doc = parse(&thinking);
    assert_eq!(doc.diagnostics.len(), n, "one warning per unclosed tag");

    let jobs = format!("@You:\n{}", "**Job Result:** `j`\n````x\n".repeat(n));
    let doc = parse(&jobs);
    assert_eq!(doc.messages[0].job_results().count(), n);
    assert!(doc.messages[0].job_results().all(|j| j.content.is_empty()));

    let results = format!(
        "@You:\n{}",
        "**Tool Result:** `t` (pending)\n````x\n```\n".repeat(n)
    );
    assert_eq!(
        parse(&results).diagnostics.len(),
        1,
        "the first unclosed fence skips the rest"
    );

    let mut tokens = String::new();
    for i in 0..n {
        write!(tokens, " k{i}=v p{i}").unwrap();
    }
    let doc = parse(&format!(
        "@You:\n**Tool Result:** `t` (pending{tokens})\n```\n```\n"
    ));
    let result = doc.messages[0].tool_results().next().unwrap();
    assert_eq!(result.meta.len(), 2 * n);

    let templates = format!("@You:\n{}", "{{ '".repeat(n));
    assert_eq!(parse(&templates).messages[0].segments.len(), 1);
}
