//! Incremental parsing equals a full parse, whatever the chunking of the appended text.

use flemma_ast::{IncrementalParser, Reparse, parse};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

/// Feeds `text` to a parser in chunks ending at `cuts` and checks every step against `parse`.
fn check_chunked(text: &str, cuts: &[usize]) {
    let mut ends: Vec<usize> = cuts
        .iter()
        .map(|c| c % (text.len() + 1))
        .filter(|&c| text.is_char_boundary(c))
        .collect();
    ends.push(text.len());
    ends.sort_unstable();
    let mut parser = IncrementalParser::new("");
    for end in ends {
        let prefix = &text[..end];
        parser.update(prefix);
        assert_eq!(
            parser.document(),
            &parse(prefix),
            "after {end} bytes of {text:?}"
        );
    }
}

fn transcript_line() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
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
        "**Job Result:** `j`",
        "<thinking>",
        "</thinking>",
        "<!-- flemma:aborted: x -->",
        "text {{ a }}",
        "  ",
        "\r",
    ])
    .prop_map(str::to_owned)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

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
    let mut parser = IncrementalParser::new(&text);
    text.push_str("\n@You:\nAnd 3 * 7?\n\n@Assistant:\n");
    assert_eq!(parser.update(&text), Reparse::Incremental);
    for chunk in [
        "Let me ",
        "check.\n\n**Tool Use:** `calculator` (`t9`)\n",
        "\n```json\n{\"e\":1}\n```\n",
    ] {
        text.push_str(chunk);
        assert_eq!(parser.update(&text), Reparse::Incremental);
        assert_eq!(parser.document(), &parse(&text));
    }
    assert_eq!(
        parser
            .document()
            .messages
            .last()
            .unwrap()
            .tool_uses()
            .count(),
        1
    );
}

#[test]
fn edits_before_the_last_message_fall_back_to_a_full_parse() {
    let text = "@You:\nhello\n\n@Assistant:\nhi\n";
    let mut parser = IncrementalParser::new(text);
    let edited = "@You:\nHELLO\n\n@Assistant:\nhi\n";
    assert_eq!(parser.update(edited), Reparse::Full);
    assert_eq!(parser.document(), &parse(edited));
    assert_eq!(parser.update("@You:\n"), Reparse::Full, "shrinking text");
    assert_eq!(parser.document(), &parse("@You:\n"));
}

#[test]
fn an_unclosed_frontmatter_opener_disables_resuming() {
    let mut text = String::from("```lua\nx = 1\n@You:\nhi\n");
    let mut parser = IncrementalParser::new(&text);
    text.push_str("```\n@You:\nbye\n");
    assert_eq!(parser.update(&text), Reparse::Full);
    assert!(parser.document().frontmatter.is_some());
    assert_eq!(parser.document(), &parse(&text));
}
