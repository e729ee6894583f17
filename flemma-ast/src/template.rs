//! Template segments: `{{ expression }}` and `{% code %}` inside text.

use crate::ast::{Segment, Template, Text, TextSpan};

/// Splits `text` into text, expression and code segments with positions.
///
/// `base_line` is the line of the text's first byte, which sits in column 1. A text without any
/// template yields a single [`Text`] segment (empty text included).
pub(crate) fn parse_segments(text: &str, base_line: u32) -> Vec<Segment> {
    let bytes = text.as_bytes();
    let mut segments = Vec::new();
    let mut cursor = Cursor::new(base_line);
    let mut text_start = 0;
    let mut search = 0;
    while let Some(found) = memchr::memchr(b'{', &bytes[search..]) {
        let open = search + found;
        let mode = match bytes.get(open + 1) {
            Some(b'{') => Mode::Expression,
            Some(b'%') => Mode::Code,
            _ => {
                search = open + 1;
                continue;
            }
        };
        let mut body_start = open + 2;
        let trim_before = bytes.get(body_start) == Some(&b'-');
        if trim_before {
            body_start += 1;
        }
        let Some(close) = find_closer(bytes, body_start, mode) else {
            // Unterminated: everything from here on is text.
            break;
        };
        let mut body_end = close;
        let trim_after = body_end > body_start && bytes[body_end - 1] == b'-';
        if trim_after {
            body_end -= 1;
        }
        if open > text_start {
            let span = cursor.span(text, text_start, open);
            segments.push(Segment::Text(Text {
                value: text[text_start..open].to_owned(),
                span: Some(span),
            }));
        }
        let end = close + 2;
        let template = Template {
            code: text[body_start..body_end].to_owned(),
            trim_before,
            trim_after,
            span: cursor.span(text, open, end),
        };
        segments.push(match mode {
            Mode::Expression => Segment::Expression(template),
            Mode::Code => Segment::Code(template),
        });
        text_start = end;
        search = end;
    }
    if text_start < text.len() || segments.is_empty() {
        let span = cursor.span(text, text_start, text.len());
        segments.push(Segment::Text(Text {
            value: text[text_start..].to_owned(),
            span: Some(span),
        }));
    }
    segments
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Expression,
    Code,
}

/// Finds the offset of the closing `}}` / `%}`, skipping Lua strings, long brackets and
/// comments; in expression mode only a `}}` at brace depth 0 closes.
fn find_closer(bytes: &[u8], mut i: usize, mode: Mode) -> Option<usize> {
    let mut depth = 0usize;
    while i < bytes.len() {
        match bytes[i] {
            q @ (b'"' | b'\'') => i = skip_string(bytes, i + 1, q)?,
            b'[' => match long_bracket_level(bytes, i) {
                Some(level) => i = skip_long_bracket(bytes, i + level + 2, level)?,
                None => i += 1,
            },
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                let after = i + 2;
                i = match long_bracket_level(bytes, after) {
                    Some(level) => skip_long_bracket(bytes, after + level + 2, level)?,
                    None => {
                        memchr::memchr(b'\n', &bytes[after..]).map_or(bytes.len(), |n| after + n)
                    }
                };
            }
            b'{' if mode == Mode::Expression => {
                depth += 1;
                i += 1;
            }
            b'}' if mode == Mode::Expression => {
                if depth == 0 && bytes.get(i + 1) == Some(&b'}') {
                    return Some(i);
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'%' if mode == Mode::Code && bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Skips a quoted string whose body starts at `i`; returns the offset after the closing quote.
fn skip_string(bytes: &[u8], mut i: usize, quote: u8) -> Option<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// `[[` or `[==[` at `i` → the number of `=`.
fn long_bracket_level(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i) != Some(&b'[') {
        return None;
    }
    let level = bytes[i + 1..].iter().take_while(|&&b| b == b'=').count();
    (bytes.get(i + 1 + level) == Some(&b'[')).then_some(level)
}

/// Skips to after `]=*]` with `level` equals signs.
fn skip_long_bracket(bytes: &[u8], mut i: usize, level: usize) -> Option<usize> {
    while let Some(found) = memchr::memchr(b']', &bytes[i..]) {
        let at = i + found;
        let equals = bytes[at + 1..].iter().take_while(|&&b| b == b'=').count();
        if equals == level && bytes.get(at + 1 + level) == Some(&b']') {
            return Some(at + level + 2);
        }
        i = at + 1;
    }
    None
}

/// Tracks the line and column of a moving byte offset.
#[derive(Debug)]
struct Cursor {
    offset: usize,
    line: u32,
    col: u32,
}

impl Cursor {
    fn new(line: u32) -> Self {
        Self {
            offset: 0,
            line,
            col: 1,
        }
    }

    /// Moves to `offset` (never backwards) and returns its (line, col).
    fn advance(&mut self, text: &str, offset: usize) -> (u32, u32) {
        let passed = &text.as_bytes()[self.offset..offset];
        match memchr::memrchr(b'\n', passed) {
            Some(last) => {
                self.line += memchr::memchr_iter(b'\n', passed).count() as u32;
                self.col = (passed.len() - last) as u32;
            }
            None => self.col += passed.len() as u32,
        }
        self.offset = offset;
        (self.line, self.col)
    }

    /// The span of `text[start..end]`; `start` must not be before the cursor.
    fn span(&mut self, text: &str, start: usize, end: usize) -> TextSpan {
        let (start_line, start_col) = self.advance(text, start);
        if end == start {
            return TextSpan {
                start_line,
                start_col,
                end_line: start_line,
                end_col: start_col - 1,
            };
        }
        let (end_line, end_col) = self.advance(text, end - 1);
        TextSpan {
            start_line,
            start_col,
            end_line,
            end_col,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<String> {
        parse_segments(text, 1)
            .into_iter()
            .map(|s| match s {
                Segment::Text(t) => format!("T({})", t.value),
                Segment::Expression(t) => {
                    format!("E({}|{}|{})", t.code, t.trim_before, t.trim_after)
                }
                Segment::Code(t) => format!("C({}|{}|{})", t.code, t.trim_before, t.trim_after),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn splits_expressions_and_code() {
        assert_eq!(
            kinds("a {{ x }} b {%- if y -%} c"),
            [
                "T(a )",
                "E( x |false|false)",
                "T( b )",
                "C( if y |true|true)",
                "T( c)"
            ]
        );
        assert_eq!(kinds(""), ["T()"]);
        assert_eq!(
            kinds("{{a}}{{b}}"),
            ["E(a|false|false)", "E(b|false|false)"]
        );
    }

    #[test]
    fn closer_skips_strings_braces_and_comments() {
        assert_eq!(kinds("{{ {a=1} }}"), ["E( {a=1} |false|false)"]);
        assert_eq!(kinds(r#"{{ "}}" }}"#), [r#"E( "}}" |false|false)"#]);
        assert_eq!(kinds(r"{{ 'a\'}}' }}"), [r"E( 'a\'}}' |false|false)"]);
        assert_eq!(
            kinds("{{ [==[ }} ]==] }}"),
            ["E( [==[ }} ]==] |false|false)"]
        );
        assert_eq!(kinds("{{ x -- }}\n}}"), ["E( x -- }}\n|false|false)"]);
        assert_eq!(
            kinds("{{ x --[[ }} ]] }}"),
            ["E( x --[[ }} ]] |false|false)"]
        );
        assert_eq!(kinds("{% a = '%}' %}"), ["C( a = '%}' |false|false)"]);
    }

    #[test]
    fn unterminated_opener_is_text() {
        assert_eq!(kinds("a {{ b"), ["T(a {{ b)"]);
        assert_eq!(kinds("{{ a }} {% b"), ["E( a |false|false)", "T( {% b)"]);
        assert_eq!(kinds("{ {x} {"), ["T({ {x} {)"]);
    }

    #[test]
    fn positions_count_lines_and_byte_columns() {
        let segs = parse_segments("ab\ncd {{ x\n }} é\n", 5);
        let spans: Vec<TextSpan> = segs
            .iter()
            .map(|s| match s {
                Segment::Text(t) => t.span.unwrap(),
                Segment::Expression(t) => t.span,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(
            spans,
            [
                TextSpan {
                    start_line: 5,
                    start_col: 1,
                    end_line: 6,
                    end_col: 3
                },
                TextSpan {
                    start_line: 6,
                    start_col: 4,
                    end_line: 7,
                    end_col: 3
                },
                TextSpan {
                    start_line: 7,
                    start_col: 4,
                    end_line: 7,
                    end_col: 7
                },
            ]
        );
    }
}
