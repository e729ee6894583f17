//! Names and ids on the wire.

use std::borrow::Cow;

/// A tool-call id as Anthropic and OpenAI Responses accept it: every character outside
/// `[A-Za-z0-9_-]` becomes `_`, the result is cut to 64 characters, then trailing `_` are
/// stripped. (Chat Completions sends ids verbatim.)
///
/// ```
/// assert_eq!(
///     flemma_providers::normalize_tool_id("urn:flemma:tool:calculator:678a1b2c0001"),
///     "urn_flemma_tool_calculator_678a1b2c0001"
/// );
/// ```
pub fn normalize_tool_id(id: &str) -> Cow<'_, str> {
    // A request checks every id it sends: one table look-up per byte.
    const VALID: [bool; 256] = {
        let mut table = [false; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
            b += 1;
        }
        table
    };
    if id.len() <= 64 && id.bytes().all(|b| VALID[usize::from(b)]) && !id.ends_with('_') {
        return Cow::Borrowed(id);
    }
    let mut out: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    while out.ends_with('_') {
        out.pop();
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_ids::{decode_tool_name, encode_tool_name};

    #[test]
    fn the_table_keeps_exactly_ascii_alphanumerics_underscores_and_dashes() {
        for c in (0..=0x7f_u8).map(char::from).chain(['\u{e9}', '\u{1F600}']) {
            let id = format!("a{c}b");
            let kept = c.is_ascii_alphanumeric() || c == '_' || c == '-';
            let expected = if kept { id.clone() } else { "a_b".to_owned() };
            assert_eq!(normalize_tool_id(&id), expected, "{c:?}");
        }
    }

    #[test]
    fn ids_and_names() {
        assert_eq!(
            normalize_tool_id("toolu_01A09q90qw90lq917835lgs0"),
            "toolu_01A09q90qw90lq917835lgs0"
        );
        assert_eq!(normalize_tool_id("call:1::"), "call_1");
        assert_eq!(normalize_tool_id(&"x".repeat(70)), "x".repeat(64));
        assert_eq!(
            normalize_tool_id(&format!("{}:::y", "a".repeat(62))),
            "a".repeat(62)
        );
        assert_eq!(normalize_tool_id("é"), "");
        assert_eq!(
            encode_tool_name("slack:channels_list"),
            "slack__channels_list"
        );
        assert_eq!(decode_tool_name(&encode_tool_name("a.b.c")), "a.b.c");
    }
}
