//! What the harness writes (spec §1.16, §1.17, §8.5).

use std::fmt::Write as _;

use flemma_ast::writer::{
    self, JobPlacement, ResultBody, WriterOptions, abort_marker, append_prefix, fence_for,
    thinking_block,
};
use flemma_ast::{AstError, IncrementalParser, TextEdit, ToolStatus, apply_edits, parse};
use flemma_ids::{JobId, ToolName, ToolUseId};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

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

/// Applies the batch for `ids` (as given) and checks it against placing the same placeholders
/// one at a time, in tool-use order, re-parsing in between.
fn placed_together(text: &str, ids: &[(&str, ToolStatus)], opts: WriterOptions) -> String {
    let doc = parse(text);
    let edits = writer::insert_placeholders(&doc, ids, opts).unwrap();
    let together = apply_edits(text, &edits).unwrap();
    let mut incremental = IncrementalParser::new(text);
    incremental.apply_edits(&edits).unwrap();
    assert_eq!(incremental.text(), together);
    assert_eq!(incremental.document(), &parse(&together));

    let mut in_order: Vec<(u32, &str, ToolStatus)> = ids
        .iter()
        .map(|&(id, status)| {
            let line = doc
                .messages
                .iter()
                .flat_map(flemma_ast::Message::tool_uses)
                .find(|u| u.id == *id)
                .unwrap()
                .span
                .start_line;
            (line, id, status)
        })
        .collect();
    in_order.sort_by_key(|&(line, ..)| line);
    let mut one_by_one = text.to_owned();
    for (_, id, status) in in_order {
        one_by_one = placed(&one_by_one, id, status, opts);
    }
    assert_eq!(together, one_by_one, "batch vs one at a time for {ids:?}");
    together
}

const THREE_CALLS: &str = "\
@Assistant:
**Tool Use:** `bash` (`t0`)
```json
{}
```
**Tool Use:** `bash` (`t1`)
```json
{}
```
**Tool Use:** `bash` (`t2`)
```json
{}
```
";

fn result(id: &str, status: &str, opts: WriterOptions) -> String {
    let blank = if opts.compact_headers { "" } else { "\n" };
    format!("**Tool Result:** `{id}` ({status})\n{blank}```\n```\n")
}

#[test]
fn separate_placeholder_edits_collide_but_a_batch_does_not() {
    let doc = parse(TWO_CALLS);
    let edits: Vec<TextEdit> = ["t0", "t1"]
        .iter()
        .map(|id| {
            writer::insert_placeholder(&doc, id, ToolStatus::Pending, COMPACT)
                .unwrap()
                .edit
                .unwrap()
        })
        .collect();
    let collided = apply_edits(TWO_CALLS, &edits).unwrap();
    assert_eq!(parse(&collided).messages.len(), 3, "two @You: messages");

    let batch = writer::insert_placeholders(
        &doc,
        &[("t1", ToolStatus::Pending), ("t0", ToolStatus::Pending)],
        COMPACT,
    )
    .unwrap();
    assert_eq!(batch.len(), 1);
    let text = apply_edits(TWO_CALLS, &batch).unwrap();
    assert_eq!(parse(&text).messages.len(), 2);
}

#[test]
fn a_batch_creates_one_you_message_in_tool_use_order() {
    for opts in [COMPACT, SPACED] {
        let out = placed_together(
            THREE_CALLS,
            &[
                ("t2", ToolStatus::Denied),
                ("t0", ToolStatus::Pending),
                ("t1", ToolStatus::Approved),
            ],
            opts,
        );
        assert_eq!(
            out,
            format!(
                "{THREE_CALLS}\n@You:\n\n{}\n{}\n{}",
                result("t0", "pending", opts),
                result("t1", "approved", opts),
                result("t2", "denied", opts)
            )
        );
        let two = placed_together(
            TWO_CALLS,
            &[("t1", ToolStatus::Aborted), ("t0", ToolStatus::Aborted)],
            opts,
        );
        assert_eq!(
            two,
            format!(
                "{TWO_CALLS}\n@You:\n\n{}\n{}",
                result("t0", "aborted", opts),
                result("t1", "aborted", opts)
            )
        );
        assert!(parse(&out).is_clean() && parse(&two).is_clean());
    }
}

#[test]
fn a_batch_fills_a_following_you_message() {
    let p = ToolStatus::Pending;
    // Blank line after the marker, no text.
    let text = format!("{THREE_CALLS}\n@You:\n\n");
    let out = placed_together(&text, &[("t1", p), ("t0", p)], COMPACT);
    assert_eq!(
        out,
        format!(
            "{THREE_CALLS}\n@You:\n\n{}\n{}\n",
            result("t0", "pending", COMPACT),
            result("t1", "pending", COMPACT)
        )
    );
    // User text right after the marker: the placeholders go before it.
    let text = format!("{THREE_CALLS}\n@You:\nWhat next?\n");
    let out = placed_together(&text, &[("t2", p), ("t0", p), ("t1", p)], SPACED);
    assert_eq!(
        out,
        format!(
            "{THREE_CALLS}\n@You:\n\n{}\n{}\n{}\nWhat next?\n",
            result("t0", "pending", SPACED),
            result("t1", "pending", SPACED),
            result("t2", "pending", SPACED)
        )
    );
}

#[test]
fn a_batch_slots_in_around_existing_results() {
    let p = ToolStatus::Pending;
    let existing = |ids: &[&str]| {
        let blocks: Vec<String> = ids
            .iter()
            .map(|id| format!("**Tool Result:** `{id}`\n```\nok\n```\n"))
            .collect();
        format!("{THREE_CALLS}\n@You:\n{}\nThanks.\n", blocks.join("\n"))
    };
    // t1 exists: t0 has no predecessor (before it), t2 follows it.
    let out = placed_together(&existing(&["t1"]), &[("t2", p), ("t0", p)], COMPACT);
    assert_eq!(
        out,
        format!(
            "{THREE_CALLS}\n@You:\n{}\n**Tool Result:** `t1`\n```\nok\n```\n\n{}\nThanks.\n",
            result("t0", "pending", COMPACT),
            result("t2", "pending", COMPACT)
        )
    );
    // t2 exists: t0 and t1 both have no predecessor and go before it, in order.
    let out = placed_together(&existing(&["t2"]), &[("t1", p), ("t0", p)], SPACED);
    assert_eq!(
        out,
        format!(
            "{THREE_CALLS}\n@You:\n{}\n{}\n**Tool Result:** `t2`\n```\nok\n```\n\nThanks.\n",
            result("t0", "pending", SPACED),
            result("t1", "pending", SPACED)
        )
    );
    // t0 exists: t1 and t2 share the predecessor and follow it, in order.
    let out = placed_together(
        &existing(&["t0"]),
        &[("t2", p), ("t1", p), ("t0", p)],
        COMPACT,
    );
    assert_eq!(
        out,
        format!(
            "{THREE_CALLS}\n@You:\n**Tool Result:** `t0`\n```\nok\n```\n\n{}\n{}\nThanks.\n",
            result("t1", "pending", COMPACT),
            result("t2", "pending", COMPACT)
        )
    );
}

#[test]
fn a_batch_spans_several_assistant_messages() {
    let p = ToolStatus::Pending;
    let text = format!(
        "{TWO_CALLS}\n@You:\n**Tool Result:** `t0`\n```\nok\n```\n\n\
         @Assistant:\n**Tool Use:** `bash` (`u0`)\n```json\n{{}}\n```\n\
         **Tool Use:** `bash` (`u1`)\n```json\n{{}}\n```\n\n\
         @Assistant:\n**Tool Use:** `bash` (`v0`)\n```json\n{{}}\n```\n"
    );
    let out = placed_together(
        &text,
        &[
            ("v0", p),
            ("u1", p),
            ("t1", p),
            ("u0", ToolStatus::Approved),
        ],
        COMPACT,
    );
    let doc = parse(&out);
    assert!(doc.is_clean());
    let outline: Vec<(String, Vec<String>)> = doc
        .messages
        .iter()
        .map(|m| {
            let results = m.tool_results().map(|r| r.tool_use_id.to_string());
            (m.role.to_string(), results.collect())
        })
        .collect();
    let expected = [
        ("Assistant", vec![]),
        ("You", vec!["t0", "t1"]),
        ("Assistant", vec![]),
        ("You", vec!["u0", "u1"]),
        ("Assistant", vec![]),
        ("You", vec!["v0"]),
    ];
    let expected: Vec<(String, Vec<String>)> = expected
        .iter()
        .map(|(role, ids)| {
            (
                (*role).to_owned(),
                ids.iter().map(|&i| i.to_owned()).collect(),
            )
        })
        .collect();
    assert_eq!(outline, expected);
}

#[test]
fn a_batch_skips_existing_results_and_repeated_ids() {
    let text = placed(TWO_CALLS, "t0", ToolStatus::Pending, COMPACT);
    let edits = writer::insert_placeholders(
        &parse(&text),
        &[
            ("t0", ToolStatus::Approved),
            ("t1", ToolStatus::Denied),
            ("t1", ToolStatus::Approved),
        ],
        COMPACT,
    )
    .unwrap();
    let out = apply_edits(&text, &edits).unwrap();
    assert!(out.ends_with(&format!(
        "{}\n{}",
        result("t0", "pending", COMPACT),
        result("t1", "denied", COMPACT)
    )));
    let again = writer::insert_placeholders(&parse(&out), &[("t0", ToolStatus::Pending)], COMPACT);
    assert_eq!(again.unwrap(), vec![]);
    let err = writer::insert_placeholders(
        &parse(TWO_CALLS),
        &[("t0", ToolStatus::Pending), ("zz", ToolStatus::Pending)],
        COMPACT,
    )
    .unwrap_err();
    assert!(matches!(err, AstError::UnknownToolUse { ref id } if id == "zz"));
}

/// One assistant turn: how many tool uses, and what follows it: `None` for nothing, else a
/// `@You:` message with results for some uses (in the order given), maybe a blank line after
/// the marker, maybe user text.
type Turn = (usize, Option<(Vec<usize>, bool, bool)>);

fn turn() -> impl Strategy<Value = Turn> {
    (1..4usize).prop_flat_map(|uses| {
        let results =
            prop::sample::subsequence((0..uses).collect::<Vec<_>>(), 0..=uses).prop_shuffle();
        (
            Just(uses),
            prop::option::of((results, any::<bool>(), any::<bool>())),
        )
    })
}

fn transcript(turns: &[Turn], spaced_results: bool) -> String {
    let mut text = String::new();
    for (n, (uses, follow)) in turns.iter().enumerate() {
        text.push_str("@Assistant:\nLet me look.\n");
        for u in 0..*uses {
            write!(
                text,
                "**Tool Use:** `bash` (`a{n}_{u}`)\n```json\n{{}}\n```\n"
            )
            .unwrap();
        }
        text.push('\n');
        if let Some((results, blank, user_text)) = follow {
            text.push_str("@You:\n");
            if *blank {
                text.push('\n');
            }
            for u in results {
                let gap = if spaced_results { "\n" } else { "" };
                write!(text, "**Tool Result:** `a{n}_{u}`\n{gap}```\nok\n```\n\n").unwrap();
            }
            if *user_text {
                text.push_str("Go on.\n\n");
            }
        }
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the placement cases (spec §1.17) a batch mixes, it gives what placing the
    /// placeholders one at a time in tool-use order gives, and leaves a clean document in which
    /// each tool use has a result in the message after its own.
    #[test]
    fn a_batch_equals_placing_one_at_a_time(
        turns in prop::collection::vec(turn(), 1..4),
        spaced_results in any::<bool>(),
        spaced in any::<bool>(),
        order in any::<prop::sample::Index>(),
        statuses in prop::collection::vec(
            prop::sample::select(vec![ToolStatus::Pending, ToolStatus::Approved, ToolStatus::Denied]),
            12,
        ),
    ) {
        let text = transcript(&turns, spaced_results);
        let mut ids: Vec<String> = Vec::new();
        for (n, (uses, follow)) in turns.iter().enumerate() {
            for u in 0..*uses {
                if !follow.as_ref().is_some_and(|(results, ..)| results.contains(&u)) {
                    ids.push(format!("a{n}_{u}"));
                }
            }
        }
        if !ids.is_empty() {
            let len = ids.len();
            ids.rotate_left(order.index(len));
        }
        let batch: Vec<(&str, ToolStatus)> =
            ids.iter().zip(&statuses).map(|(id, s)| (id.as_str(), *s)).collect();
        let opts = WriterOptions { compact_headers: !spaced };
        let out = placed_together(&text, &batch, opts);
        let doc = parse(&out);
        prop_assert!(doc.is_clean());
        for (n, message) in doc.messages.iter().enumerate().filter(|(_, m)| m.tool_uses().next().is_some()) {
            let next = &doc.messages[n + 1];
            let answered: Vec<String> = next.tool_results().map(|r| r.tool_use_id.to_string()).collect();
            for u in message.tool_uses() {
                prop_assert!(answered.contains(&u.id.to_string()), "{} in {:?}", u.id, answered);
            }
        }
    }
}
