//! Incremental parsing equals a full parse: for appended text in any chunking, for line edits
//! anywhere (`apply_edits`) and for any change of the text (`update`), same-length ones included.

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
