//! The units the incremental parser keeps are those of a full parse (their reach may be
//! larger: a later start for a re-parse is never assumed).

use proptest::prelude::*;

use super::IncrementalParser;
use crate::edit::TextEdit;

const LINES: &[&str] = &[
    "@You:",
    "@Assistant:",
    "**Tool Result:** `t1`",
    "**Tool Result:** `t2` (pending)",
    "**Job Result:** `job_a`",
    "**Compaction:** (messages=1)",
    "```",
    "````",
    "```json",
    "ok",
    "",
    "  ",
    "{{ a }}",
];

fn check_units(parser: &IncrementalParser) -> Result<(), TestCaseError> {
    let fresh = IncrementalParser::new(parser.text());
    prop_assert_eq!(&parser.markers, &fresh.markers);
    prop_assert_eq!(parser.units.len(), fresh.units.len());
    for (kept, full) in parser.units.iter().zip(&fresh.units) {
        prop_assert_eq!(kept.len(), full.len());
        for (k, f) in kept.iter().zip(full) {
            let (mut k, f) = (*k, *f);
            prop_assert!(k.reach >= f.reach, "{:?} reaches less than {:?}", k, f);
            k.reach = f.reach;
            prop_assert_eq!(k, f);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn units_stay_those_of_a_full_parse(
        lines in prop::collection::vec(prop::sample::select(LINES), 0..40),
        rounds in prop::collection::vec(
            (any::<usize>(), 0..4u32, prop::collection::vec(prop::sample::select(LINES), 0..4)),
            1..8,
        ),
    ) {
        let mut text = String::from("@You:\n");
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        let mut parser = IncrementalParser::new(text);
        for (at, len, new) in rounds {
            let count = parser.document().line_count;
            let start = (at % (count as usize + 1)) as u32 + 1;
            let edit = TextEdit {
                start,
                end: (start + len).min(count + 1),
                lines: new.iter().map(|l| (*l).to_owned()).collect(),
            };
            parser.apply_edits(&[edit]).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(parser.document(), &crate::parse(parser.text()));
            check_units(&parser)?;
        }
    }
}

/// Pieces of text a byte splice may insert: parts of lines, terminators of both kinds, and
/// non-ASCII characters.
const PIECES: &[&str] = &[
    "@You:",
    "@Assistant:",
    "\n",
    "\r\n",
    "```",
    "json",
    "**Tool Result:** `t1`",
    "ok",
    " ",
    "é",
    "😀",
    "{{ a }}",
    "`",
    "\r",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn byte_splices_keep_the_document_a_full_parse(
        lines in prop::collection::vec(prop::sample::select(LINES), 0..30),
        crlf in any::<bool>(),
        rounds in prop::collection::vec(
            (any::<usize>(), 0..12usize, prop::collection::vec(prop::sample::select(PIECES), 0..4)),
            1..8,
        ),
    ) {
        let eol = if crlf { "\r\n" } else { "\n" };
        let mut text = format!("@You:{eol}");
        for line in lines {
            text.push_str(line);
            text.push_str(eol);
        }
        let mut parser = IncrementalParser::new(text.clone());
        for (at, len, pieces) in rounds {
            let mut start = at % (text.len() + 1);
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let with = pieces.concat();
            text.replace_range(start..end, &with);
            parser.replace_range(start..end, &with).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(parser.text(), text.as_str());
            prop_assert_eq!(parser.document(), &crate::parse(parser.text()));
            check_units(&parser)?;
        }
    }
}

#[test]
fn a_splice_outside_the_text_or_inside_a_character_changes_nothing() {
    let mut parser = IncrementalParser::new("@You:\né\n");
    let backwards = std::ops::Range { start: 5, end: 3 };
    for range in [0..100, 7..8, backwards] {
        let error = parser.replace_range(range.clone(), "x").unwrap_err();
        assert!(
            matches!(error, crate::AstError::RangeOutOfText { .. }),
            "{range:?}: {error}"
        );
    }
    assert_eq!(parser.text(), "@You:\né\n");
}
