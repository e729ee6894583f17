//! What the harness writes (spec §1.16, §1.17, §8.5).

use flemma_ast::writer::{
    self, JobPlacement, ResultBody, WriterOptions, abort_marker, append_prefix, fence_for,
    thinking_block,
};
use flemma_ast::{AstError, JobId, TextEdit, ToolName, ToolStatus, ToolUseId, apply_edits, parse};
use pretty_assertions::assert_eq;

const COMPACT: WriterOptions = WriterOptions {
    compact_headers: true,
};
const SPACED: WriterOptions = WriterOptions {
    compact_headers: false,
};

const TWO_CALLS: &str = "\
@Assistant:
**Tool Use:** `bash` (`t0`)
```json
{}
```
**Tool Use:** `bash` (`t1`)
```json
{}
```
";

fn placed(text: &str, id: &str, status: ToolStatus, opts: WriterOptions) -> String {
    let placement = writer::insert_placeholder(&parse(text), id, status, opts).unwrap();
    let out = apply_edits(text, placement.edit.as_slice()).unwrap();
    let line = out.lines().nth(placement.header_line as usize - 1).unwrap();
    assert!(
        line.starts_with(&format!("**Tool Result:** `{id}`")),
        "header_line points at {line:?}"
    );
    out
}

#[test]
fn placeholder_creates_a_you_message_after_the_assistant() {
    let out = placed(TWO_CALLS, "t0", ToolStatus::Pending, COMPACT);
    assert_eq!(
        out,
        format!("{TWO_CALLS}\n@You:\n\n**Tool Result:** `t0` (pending)\n```\n```\n")
    );
    let out = placed(TWO_CALLS, "t0", ToolStatus::Approved, SPACED);
    assert_eq!(
        out,
        format!("{TWO_CALLS}\n@You:\n\n**Tool Result:** `t0` (approved)\n\n```\n```\n")
    );
}

#[test]
fn placeholders_stay_in_tool_use_order() {
    // t1 first: no predecessor among existing results, so it goes after the marker.
    let first = placed(TWO_CALLS, "t1", ToolStatus::Pending, COMPACT);
    // t0 then: existing results but none for an earlier tool use -> before the first result.
    let both = placed(&first, "t0", ToolStatus::Denied, COMPACT);
    assert_eq!(
        both,
        format!(
            "{TWO_CALLS}\n@You:\n\n**Tool Result:** `t0` (denied)\n```\n```\n\n**Tool Result:** `t1` (pending)\n```\n```\n"
        )
    );
    // The other order: t1 has t0 as predecessor and goes after it.
    let first = placed(TWO_CALLS, "t0", ToolStatus::Pending, COMPACT);
    let both_again = placed(&first, "t1", ToolStatus::Pending, COMPACT);
    assert_eq!(
        both_again,
        format!(
            "{TWO_CALLS}\n@You:\n\n**Tool Result:** `t0` (pending)\n```\n```\n\n**Tool Result:** `t1` (pending)\n```\n```\n"
        )
    );
    assert!(parse(&both).is_clean() && parse(&both_again).is_clean());
}

#[test]
fn placeholders_go_before_user_text() {
    let text = format!("{TWO_CALLS}\n@You:\nWhat next?\n");
    let out = placed(&text, "t0", ToolStatus::Pending, COMPACT);
    assert_eq!(
        out,
        format!("{TWO_CALLS}\n@You:\n\n**Tool Result:** `t0` (pending)\n```\n```\n\nWhat next?\n")
    );
}

#[test]
fn an_existing_result_is_left_alone() {
    let text = placed(TWO_CALLS, "t0", ToolStatus::Pending, COMPACT);
    let again =
        writer::insert_placeholder(&parse(&text), "t0", ToolStatus::Approved, COMPACT).unwrap();
    assert_eq!(again.edit, None);
    assert_eq!(again.header_line, 13);
    let err =
        writer::insert_placeholder(&parse(&text), "zz", ToolStatus::Approved, COMPACT).unwrap_err();
    assert!(
        matches!(err, AstError::UnknownToolUse { ref id } if id == "zz"),
        "{err}"
    );
}

#[test]
fn final_results_replace_the_block_and_drop_the_suffix() {
    let base = placed(TWO_CALLS, "t0", ToolStatus::Approved, COMPACT);
    let write = |body: &ResultBody, opts| {
        let edit = writer::write_result(&parse(&base), "t0", body, opts).unwrap();
        let out = apply_edits(&base, &[edit]).unwrap();
        out[TWO_CALLS.len() + "\n@You:\n\n".len()..].to_owned()
    };
    assert_eq!(
        write(&ResultBody::Success("a\nb".into()), COMPACT),
        "**Tool Result:** `t0`\n```\na\nb\n```\n"
    );
    assert_eq!(
        write(&ResultBody::Success("x ``` y".into()), SPACED),
        "**Tool Result:** `t0`\n\n````\nx ``` y\n````\n"
    );
    assert_eq!(
        write(&ResultBody::Json(serde_json::json!({"n": 1})), COMPACT),
        "**Tool Result:** `t0`\n```json\n{\"n\":1}\n```\n"
    );
    assert_eq!(
        write(
            &ResultBody::Error {
                message: None,
                partial_output: Some(String::new())
            },
            COMPACT
        ),
        "**Tool Result:** `t0` (error)\n```\nUnknown error\n```\n"
    );
    assert_eq!(
        write(
            &ResultBody::Error {
                message: Some("exit 2".into()),
                partial_output: Some("half".into())
            },
            COMPACT
        ),
        "**Tool Result:** `t0` (error)\n```\nexit 2\n\nPartial output:\nhalf\n```\n"
    );
    let missing = writer::write_result(
        &parse(TWO_CALLS),
        "t0",
        &ResultBody::Success(String::new()),
        COMPACT,
    );
    assert!(matches!(missing, Err(AstError::UnknownToolResult { .. })));
}

#[test]
fn header_and_body_rewrites() {
    let base = placed(TWO_CALLS, "t0", ToolStatus::Pending, COMPACT);
    let doc = parse(&base);
    let approved = apply_edits(
        &base,
        &[writer::set_status(&doc, "t0", Some(ToolStatus::Approved)).unwrap()],
    )
    .unwrap();
    assert!(approved.contains("**Tool Result:** `t0` (approved)\n```\n```\n"));
    let cleared = apply_edits(&base, &[writer::set_status(&doc, "t0", None).unwrap()]).unwrap();
    assert!(cleared.contains("**Tool Result:** `t0`\n```\n```\n"));
    let job = apply_edits(
        &base,
        &[writer::set_modeline(&doc, "t0", "error job=job_ab12cd34").unwrap()],
    )
    .unwrap();
    let result = parse(&job);
    let r = result.messages[1].tool_results().next().unwrap();
    assert_eq!(
        (r.status, r.job_id()),
        (Some(ToolStatus::Error), Some("job_ab12cd34"))
    );
    let body = apply_edits(
        &base,
        &[writer::rewrite_fence_body(&doc, "t0", "Running as a job.", SPACED).unwrap()],
    )
    .unwrap();
    assert!(
        body.ends_with("**Tool Result:** `t0` (pending)\n\n```\nRunning as a job.\n```\n"),
        "{body}"
    );
}

#[test]
fn job_results_follow_the_delivery_rules() {
    let job = JobId::new("job_k7x2m9qa").unwrap();
    let block = |content: &str, error| writer::job_result_lines(&job, error, content, COMPACT);
    let place = |text: &str, content: &str, error| {
        let (edit, how) = writer::place_job_result(&parse(text), &job, block(content, error));
        (apply_edits(text, &[edit]).unwrap(), how)
    };

    // After an assistant message: a new @You: message.
    let (created, how) = place("@Assistant:\nTests are running.\n", "42 passed", false);
    assert_eq!(how, JobPlacement::Created);
    assert_eq!(
        created,
        "@Assistant:\nTests are running.\n\n@You:\n\n**Job Result:** `job_k7x2m9qa`\n```\n42 passed\n```\n"
    );

    // Delivered again: replaced in place.
    let (replaced, how) = place(&created, "1 failed", true);
    assert_eq!(how, JobPlacement::Replaced);
    assert!(replaced.ends_with("**Job Result:** `job_k7x2m9qa` (error)\n```\n1 failed\n```\n"));

    // A last @You: message without user text: appended.
    let other = JobId::new("job_2").unwrap();
    let (edit, how) = writer::place_job_result(
        &parse(&created),
        &other,
        writer::job_result_lines(&other, false, "x", COMPACT),
    );
    assert_eq!(how, JobPlacement::Appended);
    assert!(
        apply_edits(&created, &[edit])
            .unwrap()
            .ends_with("```\n42 passed\n```\n\n**Job Result:** `job_2`\n```\nx\n```\n")
    );

    // A user's draft stays last: a new message goes before it...
    let draft = "@Assistant:\nok\n\n@You:\nmy draft\n";
    let (displaced, how) = place(draft, "done", false);
    assert_eq!(how, JobPlacement::Displaced);
    assert_eq!(
        displaced,
        "@Assistant:\nok\n\n@You:\n\n**Job Result:** `job_k7x2m9qa`\n```\ndone\n```\n\n@You:\nmy draft\n"
    );
    // ...or joins an earlier job-only message.
    let (edit, how) = writer::place_job_result(
        &parse(&displaced),
        &other,
        writer::job_result_lines(&other, false, "y", COMPACT),
    );
    assert_eq!(how, JobPlacement::Displaced);
    let joined = apply_edits(&displaced, &[edit]).unwrap();
    assert_eq!(
        joined,
        "@Assistant:\nok\n\n@You:\n\n**Job Result:** `job_k7x2m9qa`\n```\ndone\n```\n\n**Job Result:** `job_2`\n```\ny\n```\n\n@You:\nmy draft\n"
    );
    assert!(parse(&joined).is_clean());
}

#[test]
fn streamed_blocks_and_separators() {
    assert_eq!(append_prefix(""), "");
    assert_eq!(append_prefix("a\n"), "\n");
    assert_eq!(append_prefix("a"), "\n\n");
    let empty = serde_json::Map::new();
    let block = writer::tool_use_block(
        "",
        &ToolName::new("flemma.jobs.status").unwrap(),
        &ToolUseId::new("t").unwrap(),
        &empty,
    );
    assert_eq!(
        block,
        "**Tool Use:** `flemma.jobs.status` (`t`)\n\n```json\n{}\n```\n"
    );
    let ticks = serde_json::json!({"s": "````"});
    let block = writer::tool_use_block(
        "x\n",
        &ToolName::new("a").unwrap(),
        &ToolUseId::new("t").unwrap(),
        ticks.as_object().unwrap(),
    );
    assert_eq!(
        block,
        "\n**Tool Use:** `a` (`t`)\n\n`````json\n{\"s\":\"````\"}\n`````\n"
    );
    assert_eq!(
        thinking_block("  plan  \n", Some(("anthropic", "c2ln")), false),
        "<thinking anthropic:signature=\"c2ln\">\nplan\n</thinking>\n"
    );
    assert_eq!(
        thinking_block("", Some(("vertex", "s")), false),
        "<thinking vertex:signature=\"s\">\n</thinking>\n"
    );
    assert_eq!(
        thinking_block("opaque", None, true),
        "<thinking redacted>\nopaque\n</thinking>\n"
    );
    assert_eq!(
        abort_marker("done\n", "stop"),
        "\n<!-- flemma:aborted: stop -->\n"
    );
    assert_eq!(fence_for(""), "```");
}

#[test]
fn edits_apply_in_order_and_keep_line_endings() {
    let text = "a\r\nb\r\nc\r\n";
    let out = apply_edits(
        text,
        &[
            TextEdit::replace(2, 2, vec!["B".into(), "B2".into()]),
            TextEdit::insert(4, vec!["d".into()]),
        ],
    )
    .unwrap();
    assert_eq!(out, "a\r\nB\r\nB2\r\nc\r\nd\r\n");
    assert_eq!(
        apply_edits("a", &[TextEdit::insert(2, vec!["b".into()])]).unwrap(),
        "a\nb"
    );
    assert_eq!(
        apply_edits("", &[TextEdit::insert(1, vec!["x".into()])]).unwrap(),
        "x\n"
    );
    assert!(matches!(
        apply_edits("a\n", &[TextEdit::insert(3, vec![])]),
        Err(AstError::EditOutOfRange { .. })
    ));
    assert!(matches!(
        apply_edits(
            "a\nb\nc\n",
            &[
                TextEdit::replace(1, 2, vec![]),
                TextEdit::replace(2, 3, vec![])
            ]
        ),
        Err(AstError::OverlappingEdits { line: 2 })
    ));
}
