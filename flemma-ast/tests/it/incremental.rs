//! Incremental parsing equals a full parse: for appended text in any chunking, for line edits
//! anywhere (`apply_edits`) and for any change of the text (`update`), same-length ones included.

use std::fmt::Write as _;

use flemma_ast::writer::{self, WriterOptions};
use flemma_ast::{IncrementalParser, Reparse, TextEdit, ToolStatus, apply_edits, parse};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

/// Feeds `text` to a parser in chunks ending at `cuts`, through `update` and through `append`,
/// and checks every step against `parse`.
fn check_chunked(text: &str, cuts: &[usize]) {
    let mut ends: Vec<usize> = cuts
        .iter()
        .map(|c| c % (text.len() + 1))
        .filter(|&c| text.is_char_boundary(c))
        .collect();
    ends.push(text.len());
    ends.sort_unstable();
    let mut updated = IncrementalParser::new("");
    let mut appended = IncrementalParser::new("");
    let mut previous = 0;
    for end in ends {
        let prefix = &text[..end];
        updated.update(prefix);
        appended.append(&text[previous..end]);
        previous = end;
        let full = parse(prefix);
        assert_eq!(
            updated.document(),
            &full,
            "update to {end} bytes of {text:?}"
        );
        assert_eq!(
            appended.document(),
            &full,
            "append to {end} bytes of {text:?}"
        );
        assert_eq!(appended.text(), prefix);
    }
}

const LINES: &[&str] = &[
    "@You:",
    "@Assistant:",
    "@System:",
    "```lua",
    "```",
    "````",
    "```json",
    "{\"a\":1}",
    "",
    "**Tool Use:** `bash` (`t1`)",
    "**Tool Result:** `t1` (pending)",
    "**Tool Result:** `t1` (approved)",
    "**Tool Result:** `t1` (rejected)",
    "**Job Result:** `j`",
    "**Compaction:** (messages=2)",
    "<thinking>",
    "</thinking>",
    "<!-- flemma:aborted: x -->",
    "text {{ a }}",
    "  ",
    "\r",
];

fn transcript_line() -> impl Strategy<Value = String> {
    prop::sample::select(LINES).prop_map(str::to_owned)
}

fn transcript() -> impl Strategy<Value = String> {
    (prop::collection::vec(transcript_line(), 0..30), any::<u8>()).prop_map(|(lines, ending)| {
        let eol = if ending % 4 == 0 { "\r\n" } else { "\n" };
        let mut text = lines.join(eol);
        if ending % 3 != 0 && !text.is_empty() {
            text.push_str(eol);
        }
        text
    })
}

/// Edits as `(start, replaced line count, new lines)`, mapped onto a text's lines when used.
fn raw_edits() -> impl Strategy<Value = Vec<(usize, u32, Vec<String>)>> {
    prop::collection::vec(
        (
            any::<usize>(),
            0..4u32,
            prop::collection::vec(transcript_line(), 0..4),
        ),
        1..4,
    )
}

fn line_count(text: &str) -> u32 {
    parse(text).line_count
}

/// Non-overlapping edits for a text of `lines` lines.
fn edits_for(lines: u32, raw: &[(usize, u32, Vec<String>)]) -> Vec<TextEdit> {
    let mut edits: Vec<TextEdit> = Vec::new();
    let mut sorted: Vec<(u32, u32, Vec<String>)> = raw
        .iter()
        .map(|(at, len, new)| {
            let start = (at % (lines as usize + 1)) as u32 + 1;
            (start, (start + len).min(lines + 1), new.clone())
        })
        .collect();
    sorted.sort_by_key(|e| (e.0, e.1));
    for (start, end, new) in sorted {
        if edits.last().is_none_or(|e| start >= e.end) {
            edits.push(TextEdit {
                start,
                end,
                lines: new,
            });
        }
    }
    edits
}

/// A change of the text at a char boundary: `(position, removed chars, inserted text)`.
fn raw_changes() -> impl Strategy<Value = Vec<(usize, usize, String)>> {
    let inserted = prop_oneof![
        transcript_line().prop_map(|l| format!("{l}\n")),
        "(?s).{0,6}",
        "[@`*\n]{0,4}",
    ];
    prop::collection::vec((any::<usize>(), 0..12usize, inserted), 1..5)
}

fn change(text: &str, (at, removed, inserted): &(usize, usize, String)) -> String {
    let boundaries: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    let i = at % boundaries.len();
    let start = boundaries[i];
    let end = boundaries[(i + removed).min(boundaries.len() - 1)];
    format!("{}{inserted}{}", &text[..start], &text[end..])
}

/// Replaces the bytes at `at` with as many other bytes: a same-length change.
fn overwrite(text: &str, (at, _, inserted): &(usize, usize, String)) -> String {
    let bytes: Vec<u8> = inserted.bytes().filter(u8::is_ascii).collect();
    if text.is_empty() || bytes.is_empty() {
        return text.to_owned();
    }
    let mut out = text.as_bytes().to_vec();
    let start = at % out.len();
    for (slot, b) in out[start..].iter_mut().zip(bytes) {
        *slot = b;
    }
    // Overwriting part of a multi-byte char leaves invalid UTF-8: such cases are skipped.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn incremental_parse_equals_full_parse(
        lines in prop::collection::vec(transcript_line(), 0..30),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        check_chunked(&lines.join("\n"), &cuts);
    }

    #[test]
    fn incremental_parse_equals_full_parse_on_any_text(
        text in "(?s).{0,200}",
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        check_chunked(&text, &cuts);
    }

    /// Rounds of line edits anywhere (insertions, deletions, replacements, same-length
    /// replacements) on one parser: its text is what `apply_edits` makes of the text, and its
    /// document is the full parse of it.
    #[test]
    fn edits_anywhere_equal_a_full_parse(
        text in transcript(),
        rounds in prop::collection::vec(raw_edits(), 1..5),
    ) {
        let mut parser = IncrementalParser::new(text.as_str());
        let mut expected = text;
        for raw in rounds {
            let edits = edits_for(line_count(&expected), &raw);
            expected = apply_edits(&expected, &edits).unwrap();
            parser.apply_edits(&edits).unwrap();
            prop_assert_eq!(parser.text(), expected.as_str());
            prop_assert_eq!(parser.document(), &parse(&expected), "after {:?}", edits);
        }
    }

    /// Rounds of changes at any char boundary (insert, delete, replace) and same-length
    /// overwrites, given to `update` as whole texts.
    #[test]
    fn any_change_through_update_equals_a_full_parse(
        text in transcript(),
        rounds in prop::collection::vec(raw_changes(), 1..5),
    ) {
        let mut parser = IncrementalParser::new(text.as_str());
        let mut current = text;
        for changes in rounds {
            for c in &changes {
                current = if c.1 % 3 == 0 { overwrite(&current, c) } else { change(&current, c) };
            }
            parser.update(&current);
            prop_assert_eq!(parser.text(), current.as_str());
            prop_assert_eq!(parser.document(), &parse(&current));
        }
    }
}

#[test]
fn peer_transcripts_streamed_byte_by_byte() {
    for name in [
        "conversation_parallel_tools.chat",
        "conversation_truncated_background_jobs.chat",
    ] {
        let text = crate::common::peer(name);
        let cuts: Vec<usize> = (0..=text.len()).collect();
        check_chunked(&text, &cuts);
    }
}

#[test]
fn appending_a_response_reparses_only_the_tail() {
    let mut text = crate::common::peer("conversation_with_tools.chat");
    let mut parser = IncrementalParser::new(text.as_str());
    for chunk in [
        "\n@You:\nAnd 3 * 7?\n\n@Assistant:\n",
        "Let me ",
        "check.\n\n**Tool Use:** `calculator` (`t9`)\n",
        "\n```json\n{\"e\":1}\n```\n",
    ] {
        text.push_str(chunk);
        assert_eq!(parser.append(chunk), Reparse::Incremental);
        assert_eq!(parser.document(), &parse(&text));
    }
    let last = parser.document().messages.last().unwrap();
    assert_eq!(last.tool_uses().count(), 1);
}

const THREE_TURNS: &str = "\
@Assistant:
**Tool Use:** `bash` (`t1`)
```json
{}
```

@You:
**Tool Result:** `t1` (approved)
```
```

@Assistant:
Done.

@You:
Thanks.
";

/// The case the fingerprint heuristic missed: a same-length change in an earlier message.
#[test]
fn a_same_length_status_change_in_an_earlier_message_is_seen() {
    let rejected = THREE_TURNS.replace("(approved)", "(rejected)");
    assert_eq!(rejected.len(), THREE_TURNS.len());
    let mut parser = IncrementalParser::new(THREE_TURNS);
    assert_eq!(parser.update(&rejected), Reparse::Incremental);
    assert_eq!(parser.document(), &parse(&rejected));
    let result = parser.document().messages[1].tool_results().next().unwrap();
    assert_eq!(result.status, Some(ToolStatus::Rejected));

    let mut parser = IncrementalParser::new(THREE_TURNS);
    let doc = parser.document().clone();
    let edit = writer::set_status(&doc, "t1", Some(ToolStatus::Rejected)).unwrap();
    assert_eq!(parser.apply_edits(&[edit]).unwrap(), Reparse::Incremental);
    assert_eq!(parser.text(), rejected);
    assert_eq!(parser.document(), &parse(&rejected));
}

#[test]
fn a_changed_job_id_is_seen() {
    let text = THREE_TURNS.replace("(approved)", "(job=job_aaaa)");
    let changed = text.replace("job_aaaa", "job_aaab");
    let mut parser = IncrementalParser::new(text);
    parser.update(&changed);
    let result = parser.document().messages[1].tool_results().next().unwrap();
    assert_eq!(result.job_id(), Some("job_aaab"));
    assert_eq!(parser.document(), &parse(&changed));
}

#[test]
fn edits_that_move_lines_shift_the_messages_after_them() {
    let mut parser = IncrementalParser::new(THREE_TURNS);
    let placed = writer::rewrite_fence_body(
        parser.document(),
        "t1",
        "one\ntwo\nthree",
        WriterOptions::default(),
    )
    .unwrap();
    assert_eq!(parser.apply_edits(&[placed]).unwrap(), Reparse::Incremental);
    assert_eq!(parser.document(), &parse(parser.text()));
    assert_eq!(parser.document().messages[3].span.start_line, 18);
    // Deleting a marker merges two messages; inserting one splits a message.
    parser
        .apply_edits(&[TextEdit::replace(15, 15, vec![])])
        .unwrap();
    assert_eq!(parser.document(), &parse(parser.text()));
    assert_eq!(parser.document().messages.len(), 3);
    parser
        .apply_edits(&[TextEdit::insert(2, vec!["@You:".into()])])
        .unwrap();
    assert_eq!(parser.document(), &parse(parser.text()));
    assert_eq!(parser.document().messages.len(), 4);
}

#[test]
fn the_frontmatter_and_the_preamble_make_a_full_parse() {
    let text = "```lua\nx = 1\n```\nnotes\n@You:\nhi\n";
    let mut parser = IncrementalParser::new(text);
    let edited = text.replace("x = 1", "x = 2");
    assert_eq!(
        parser.update(&edited),
        Reparse::Incremental,
        "messages reused"
    );
    assert_eq!(parser.document(), &parse(&edited));
    assert_eq!(
        parser.update("```lua\nx = 1\n```\nnote\n@You:\nbye\n"),
        Reparse::Full
    );
    assert_eq!(parser.update("@You:\n"), Reparse::Full);
    assert_eq!(parser.document(), &parse("@You:\n"));
    assert!(parser.apply_edits(&[TextEdit::insert(9, vec![])]).is_err());
    assert_eq!(parser.text(), "@You:\n", "a failed edit changes nothing");
}

#[test]
fn an_unclosed_frontmatter_opener_is_reparsed_from_the_start() {
    let mut text = String::from("```lua\nx = 1\n@You:\nhi\n");
    let mut parser = IncrementalParser::new(text.as_str());
    text.push_str("```\n@You:\nbye\n");
    assert_eq!(parser.update(&text), Reparse::Full);
    assert!(parser.document().frontmatter.is_some());
    assert_eq!(parser.document(), &parse(&text));
}

/// Lines a result block's content (or the text between blocks) may hold: fences of every
/// length, markers, headers, templates, blank and whitespace lines.
const CONTENT: &[&str] = &[
    "ok",
    "",
    "  ",
    "```",
    "````",
    "```json",
    "`",
    "@You:",
    "@Assistant:",
    "**Tool Result:** `t0`",
    "**Job Result:** `job_a`",
    "**Compaction:**",
    "text {{ a }}",
    "{% if x %}",
];

/// A results message: `@Assistant:` with `uses` tool uses, then `@You:` with a block per use in
/// one of several shapes (pending, approved, final, error, with a blank line, a longer fence,
/// no fence at all), content drawn from [`CONTENT`], and text between some blocks; sometimes a
/// message after it.
fn results_transcript() -> impl Strategy<Value = String> {
    let block = (
        0..7u8,
        prop::collection::vec(prop::sample::select(CONTENT), 0..3),
        prop::option::of(prop::sample::select(CONTENT)),
    );
    (prop::collection::vec(block, 1..12), 0..3u8, any::<bool>()).prop_map(
        |(blocks, after, crlf)| {
            let mut lines: Vec<String> = vec!["@Assistant:".into()];
            for i in 0..blocks.len() {
                lines.push(format!("**Tool Use:** `noop` (`t{i}`)"));
                lines.extend(["```json".into(), "{}".into(), "```".into(), String::new()]);
            }
            lines.push("@You:".into());
            for (i, (shape, content, between)) in blocks.iter().enumerate() {
                let header = match shape {
                    0 => format!("**Tool Result:** `t{i}` (pending)"),
                    1 => format!("**Tool Result:** `t{i}` (approved)"),
                    2 | 5 | 6 => format!("**Tool Result:** `t{i}`"),
                    3 => format!("**Tool Result:** `t{i}` (error)"),
                    _ => format!("**Tool Result:** `t{i}` (job=job_{i})"),
                };
                lines.push(header);
                if *shape == 4 {
                    lines.push(String::new());
                }
                let fence = if *shape == 5 { "````" } else { "```" };
                if *shape != 6 {
                    lines.push(fence.into());
                    lines.extend(content.iter().map(|l| (*l).to_owned()));
                    lines.push(fence.into());
                }
                lines.push(String::new());
                if let Some(text) = between {
                    lines.push((*text).to_owned());
                    lines.push(String::new());
                }
            }
            match after {
                0 => {}
                1 => lines.extend(["@Assistant:".into(), "Done.".into()]),
                _ => lines.extend(["@You:".into(), "Thanks.".into(), String::new()]),
            }
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut text = lines.join(eol);
            text.push_str(eol);
            text
        },
    )
}

/// An edit of a results transcript: a writer edit on one block (a final result, a status, a
/// new body) or lines from [`CONTENT`] replacing some lines anywhere.
fn results_edit() -> impl Strategy<Value = (u8, usize, u32, Vec<String>)> {
    (
        0..5u8,
        any::<usize>(),
        0..4u32,
        prop::collection::vec(prop::sample::select(CONTENT).prop_map(str::to_owned), 0..4),
    )
}

fn results_edits_for(
    doc: &flemma_ast::Document,
    raw: &[(u8, usize, u32, Vec<String>)],
) -> Vec<TextEdit> {
    let opts = WriterOptions::default();
    let ids: Vec<String> = flemma_ast::build_tool_sibling_table(doc)
        .into_iter()
        .filter(|(_, pair)| pair.tool_result.is_some())
        .map(|(id, _)| id.to_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut edits = Vec::new();
    let mut lines_edits = Vec::new();
    for (kind, at, len, new) in raw {
        let id = (!ids.is_empty()).then(|| ids[at % ids.len()].as_str());
        let edit = match (kind, id) {
            (0, Some(id)) => {
                writer::write_result(doc, id, &writer::ResultBody::Success(new.join("\n")), opts)
                    .ok()
            }
            (1, Some(id)) => writer::set_status(doc, id, Some(ToolStatus::Rejected)).ok(),
            (2, Some(id)) => writer::rewrite_fence_body(doc, id, &new.join("\n"), opts).ok(),
            _ => {
                lines_edits.push((*at, *len, new.clone()));
                None
            }
        };
        edits.extend(edit);
    }
    // Keep the edits apart: writer edits first, then line edits that overlap none of them.
    edits.sort_by_key(|e| (e.start, e.end));
    let mut kept: Vec<TextEdit> = Vec::new();
    for e in edits {
        if kept
            .last()
            .is_none_or(|k| e.start >= k.end.max(k.start + 1))
        {
            kept.push(e);
        }
    }
    for e in edits_for(doc.line_count, &lines_edits) {
        let free = kept
            .iter()
            .all(|k| e.end.max(e.start + 1) <= k.start || e.start >= k.end.max(k.start + 1));
        if free {
            kept.push(e);
        }
    }
    kept
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Rounds of edits inside and around a message of results (the writer's, and any lines
    /// anywhere), applied through the incremental parser, which re-parses only the blocks
    /// they touch: its document is the full parse of its text, and its tool index finds what a
    /// scan finds.
    #[test]
    fn edits_of_a_results_message_equal_a_full_parse(
        text in results_transcript(),
        rounds in prop::collection::vec(prop::collection::vec(results_edit(), 1..4), 1..6),
    ) {
        let mut parser = IncrementalParser::new(text.as_str());
        let mut expected = text;
        for raw in rounds {
            let edits = results_edits_for(parser.document(), &raw);
            let before = expected.clone();
            expected = apply_edits(&expected, &edits).unwrap();
            parser.apply_edits(&edits).unwrap();
            prop_assert_eq!(parser.text(), expected.as_str());
            let full = parse(&expected);
            if parser.document() != &full {
                let got = parser.document();
                let at = (0..got.messages.len().max(full.messages.len()))
                    .find(|&i| got.messages.get(i) != full.messages.get(i));
                let show = |d: &flemma_ast::Document| at.map(|i| format!("{:#?}", d.messages.get(i)));
                prop_assert!(
                    false,
                    "after {:?} on\n{:?}\nmessage {:?}: got {}\nexpected {}\ndiagnostics {:?} vs {:?}",
                    edits,
                    before,
                    at,
                    show(got).unwrap_or_default(),
                    show(&full).unwrap_or_default(),
                    got.diagnostics,
                    full.diagnostics
                );
            }
            let index = parser.tool_index();
            for (id, pair) in flemma_ast::build_tool_sibling_table(&full) {
                let last = index.last_tool_result(&full, id).map(|r| r.node);
                prop_assert_eq!(last, pair.tool_result);
                let first = index.tool_result(&full, id).map(|r| r.node);
                prop_assert_eq!(first, flemma_ast::find_tool_result_by_id(&full, id).map(|r| r.node));
                let tool_use = index.tool_use(&full, id).map(|r| r.node);
                prop_assert_eq!(tool_use, pair.tool_use);
                // The writer finds through the index what it finds by a scan.
                let opts = WriterOptions::default();
                let body = writer::ResultBody::Success("x".into());
                prop_assert_eq!(
                    writer::write_result_in(&full, index, id, &body, opts).ok(),
                    writer::write_result(&full, id, &body, opts).ok()
                );
                prop_assert_eq!(
                    writer::set_status_in(&full, index, id, Some(ToolStatus::Pending)).ok(),
                    writer::set_status(&full, id, Some(ToolStatus::Pending)).ok()
                );
                prop_assert_eq!(
                    writer::set_modeline_in(&full, index, id, "job=job_x").ok(),
                    writer::set_modeline(&full, id, "job=job_x").ok()
                );
                let uses: Vec<_> = full
                    .messages
                    .iter()
                    .flat_map(flemma_ast::Message::tool_uses)
                    .filter(|u| u.id == id)
                    .collect();
                let only = index.only_tool_use(&full, id).map(|found| found.map(|r| r.node));
                let expected_only = match uses.as_slice() {
                    [] => Some(None),
                    [one] => Some(Some(*one)),
                    _ => None,
                };
                prop_assert_eq!(only, expected_only);
            }
        }
    }
}

/// Writing each result of a message of many results re-parses that result, not the message:
/// the cost of a write does not grow with the number of results.
#[test]
fn writing_results_one_by_one_reparses_only_their_blocks() {
    let calls = 400;
    let mut text = String::from("@Assistant:\n");
    for i in 0..calls {
        let _ = write!(
            text,
            "**Tool Use:** `noop` (`t{i}`)\n```json\n{{}}\n```\n\n"
        );
    }
    text.push_str("@You:\n");
    for i in 0..calls {
        let _ = write!(text, "**Tool Result:** `t{i}` (approved)\n```\n```\n\n");
    }
    let mut parser = IncrementalParser::new(text.as_str());
    let opts = WriterOptions::default();
    for i in (0..calls).rev().step_by(7).chain((0..calls).step_by(5)) {
        let id = format!("t{i}");
        let body = writer::ResultBody::Success(format!("ok {i}"));
        let edit =
            writer::write_result_in(parser.document(), parser.tool_index(), &id, &body, opts)
                .unwrap();
        assert_eq!(parser.apply_edits(&[edit]).unwrap(), Reparse::Incremental);
        // The block and the one after it (where the parse finds the old text again).
        assert!(
            parser.reparsed_bytes() < 200,
            "writing {id} re-parsed {} bytes",
            parser.reparsed_bytes()
        );
    }
    assert_eq!(parser.document(), &parse(parser.text()));
}
