//! Line edits ([`TextEdit`]) and how they apply to a text, as byte splices.
//!
//! [`apply_edits`] and [`IncrementalParser::apply_edits`](crate::IncrementalParser::apply_edits)
//! share [`plan`], so a host that applies edits to its own text and a parser that applies them to
//! its copy end up with the same bytes.

use std::borrow::Cow;

use crate::error::AstError;

/// Replaces lines `start..end` (1-based, `end` exclusive) with `lines`.
///
/// `start == end` inserts before line `start`; `start == line_count + 1` appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    /// First line replaced (1-based).
    pub start: u32,
    /// Line after the last one replaced (1-based, exclusive).
    pub end: u32,
    /// The new lines, without terminators.
    pub lines: Vec<String>,
}

impl TextEdit {
    /// Inserts `lines` before line `at`.
    pub fn insert(at: u32, lines: Vec<String>) -> Self {
        Self {
            start: at,
            end: at,
            lines,
        }
    }

    /// Replaces lines `start..=end_inclusive`.
    pub fn replace(start: u32, end_inclusive: u32, lines: Vec<String>) -> Self {
        Self {
            start,
            end: end_inclusive + 1,
            lines,
        }
    }
}

/// Applies non-overlapping edits, all expressed against the original text.
///
/// Lines the edits do not touch keep their bytes, terminators included. Written lines end with
/// the text's own line ending (CRLF when its first line ends in CRLF). The text keeps a final
/// newline when it had one (or was empty), and gets none when it had none. Several insertions
/// before the same line land in the order given.
///
/// # Errors
///
/// [`AstError::EditOutOfRange`] when an edit names lines the text does not have, and
/// [`AstError::OverlappingEdits`] when two edits replace the same line.
///
/// ```
/// use flemma_ast::{TextEdit, apply_edits};
/// let text = apply_edits("a\nb\n", &[TextEdit::insert(2, vec!["x".into()])])?;
/// assert_eq!(text, "a\nx\nb\n");
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
pub fn apply_edits(text: &str, edits: &[TextEdit]) -> Result<String, AstError> {
    let plan = plan(text, edits, |_| (0, 1))?;
    let source: Cow<'_, str> = match plan.virtual_eol {
        Some(eol) => Cow::Owned(format!("{text}{eol}")),
        None => Cow::Borrowed(text),
    };
    let mut out = String::with_capacity(source.len() + plan.added());
    let mut next = 0;
    for splice in &plan.splices {
        out.push_str(&source[next..splice.start]);
        out.push_str(&splice.text);
        next = splice.end;
    }
    out.push_str(&source[next..]);
    plan.finish(&mut out);
    Ok(out)
}

/// [`apply_edits`] on a text the caller owns: the bytes after the last edit are moved, not
/// copied into a new text, so an edit near the end of a large transcript costs little more
/// than finding its line.
///
/// # Errors
///
/// As [`apply_edits`]; the text is unchanged then.
///
/// ```
/// use flemma_ast::{TextEdit, apply_edits_in_place};
/// let mut text = String::from("a\nb\n");
/// apply_edits_in_place(&mut text, &[TextEdit::insert(3, vec!["c".into()])])?;
/// assert_eq!(text, "a\nb\nc\n");
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
pub fn apply_edits_in_place(text: &mut String, edits: &[TextEdit]) -> Result<(), AstError> {
    let plan = plan(text, edits, |_| (0, 1))?;
    plan.apply_in_place(text);
    Ok(())
}

/// Where every 1024th line of a text starts, so that line edits near the end of a large text
/// (a new result in a 10 MB transcript) find their line without scanning from the beginning.
///
/// Kept beside the text it indexes; [`LineIndex::apply_edits`] edits both.
///
/// ```
/// use flemma_ast::{LineIndex, TextEdit};
///
/// let mut text: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
/// let mut index = LineIndex::new(&text);
/// index.apply_edits(&mut text, &[TextEdit::replace(4999, 4999, vec!["changed".into()])])?;
/// assert!(text.ends_with("line 4998\nchanged\nline 5000\n"));
/// assert_eq!(index, LineIndex::new(&text));
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LineIndex {
    /// `starts[k]` is the byte offset of line `k * stride + 1`.
    starts: Vec<usize>,
    stride: u32,
}

impl LineIndex {
    /// Indexes `text` (one scan).
    pub fn new(text: &str) -> Self {
        Self::with_stride(text, 1024)
    }

    /// An index of every `stride`-th line (tests use small strides).
    pub(crate) fn with_stride(text: &str, stride: u32) -> Self {
        let mut index = Self {
            starts: vec![0],
            stride: stride.max(1),
        };
        index.extend(text);
        index
    }

    /// Adds the line starts after the last one known.
    fn extend(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut at = self.starts.last().copied().unwrap_or(0);
        loop {
            if at >= bytes.len() {
                return;
            }
            let mut found = 0;
            let mut next = at;
            for newline in memchr::memchr_iter(b'\n', &bytes[at..]) {
                found += 1;
                if found == self.stride {
                    next = at + newline + 1;
                    break;
                }
            }
            if found < self.stride || next >= bytes.len() {
                return;
            }
            self.starts.push(next);
            at = next;
        }
    }

    /// A known line start at or before `line`: `(byte offset, line)`.
    fn anchor(&self, line: u32) -> (usize, u32) {
        let k = ((line.max(1) - 1) / self.stride) as usize;
        let k = k.min(self.starts.len().saturating_sub(1));
        match self.starts.get(k) {
            Some(&offset) => (offset, k as u32 * self.stride + 1),
            None => (0, 1),
        }
    }

    /// [`apply_edits_in_place`], finding lines through the index, which it then updates.
    ///
    /// # Errors
    ///
    /// As [`apply_edits`]; text and index are unchanged then.
    pub fn apply_edits(&mut self, text: &mut String, edits: &[TextEdit]) -> Result<(), AstError> {
        let plan = plan(text, edits, |line| self.anchor(line))?;
        let Some(first) = plan.splices.first().map(|s| s.start) else {
            return Ok(());
        };
        plan.apply_in_place(text);
        // Starts at or before the first changed byte are still right; the rest are found again.
        let keep = self
            .starts
            .partition_point(|&start| start <= first && start < text.len())
            .max(1);
        self.starts.truncate(keep);
        self.extend(text);
        Ok(())
    }
}

/// Replace bytes `start..end` of the text with `text`.
#[derive(Debug)]
pub(crate) struct Splice {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) text: String,
}

/// Edits turned into byte splices of one text.
#[derive(Debug)]
pub(crate) struct Plan {
    /// Sorted, non-overlapping, none empty. Offsets are into the text with `virtual_eol`
    /// appended.
    pub(crate) splices: Vec<Splice>,
    /// When the text has no final newline: the terminator appended while splicing, so every
    /// line has one, and removed again by [`Plan::finish`].
    pub(crate) virtual_eol: Option<&'static str>,
}

impl Plan {
    /// Bytes added by the splices (0 when they shrink the text).
    fn added(&self) -> usize {
        self.splices
            .iter()
            .map(|s| s.text.len().saturating_sub(s.end - s.start))
            .sum()
    }

    /// Applies the splices to `text` in place.
    pub(crate) fn apply_in_place(&self, text: &mut String) {
        if let Some(eol) = self.virtual_eol {
            text.push_str(eol);
        }
        // Splicing in place moves the bytes after each splice that changes the length; past
        // one text's worth of moves (many splices: a batch of results), one copy is cheaper.
        let moved: usize = self
            .splices
            .iter()
            .filter(|s| s.text.len() != s.end - s.start)
            .map(|s| text.len() - s.end)
            .sum();
        if moved > text.len() {
            let mut out = String::with_capacity(text.len() + self.added());
            let mut next = 0;
            for splice in &self.splices {
                out.push_str(&text[next..splice.start]);
                out.push_str(&splice.text);
                next = splice.end;
            }
            out.push_str(&text[next..]);
            *text = out;
        } else {
            for splice in self.splices.iter().rev() {
                text.replace_range(splice.start..splice.end, &splice.text);
            }
        }
        self.finish(text);
    }

    /// Removes the final terminator again when the original text had none.
    fn finish(&self, text: &mut String) {
        let Some(eol) = self.virtual_eol else {
            return;
        };
        if text.ends_with(eol) {
            text.truncate(text.len() - eol.len());
        } else if text.ends_with('\n') {
            text.pop();
        }
    }
}

/// Turns `edits` into byte splices of `text`.
///
/// `anchor(line)` names a known line start at or before `line` as `(byte offset, line)`, so a
/// caller that knows where messages start does not scan the text from its beginning.
pub(crate) fn plan(
    text: &str,
    edits: &[TextEdit],
    anchor: impl Fn(u32) -> (usize, u32),
) -> Result<Plan, AstError> {
    let mut sorted: Vec<&TextEdit> = edits.iter().collect();
    sorted.sort_by_key(|e| (e.start, e.end));
    let mut previous_end = 1;
    for edit in &sorted {
        if edit.start < 1 || edit.end < edit.start {
            return Err(out_of_range(text, edit));
        }
        if edit.start < previous_end {
            return Err(AstError::OverlappingEdits { line: edit.start });
        }
        previous_end = edit.end.max(previous_end);
    }
    let eol = crate::source::line_ending(text);
    let virtual_eol = (!text.is_empty() && !text.ends_with('\n')).then_some(eol);
    let mut lines = Lines {
        bytes: text.as_bytes(),
        end: text.len() + virtual_eol.map_or(0, str::len),
        at: (0, 1),
    };
    let mut splices = Vec::with_capacity(sorted.len());
    for edit in sorted {
        let located = lines
            .start_of(edit.start, &anchor)
            .zip(lines.start_of(edit.end, &anchor));
        let Some((start, end)) = located else {
            return Err(out_of_range(text, edit));
        };
        if start == end && edit.lines.is_empty() {
            continue;
        }
        let mut written = String::with_capacity(edit.lines.iter().map(|l| l.len() + 2).sum());
        for line in &edit.lines {
            written.push_str(line);
            written.push_str(eol);
        }
        splices.push(Splice {
            start,
            end,
            text: written,
        });
    }
    Ok(Plan {
        splices,
        virtual_eol,
    })
}

fn out_of_range(text: &str, edit: &TextEdit) -> AstError {
    let count = memchr::memchr_iter(b'\n', text.as_bytes()).count();
    let line_count = count + usize::from(!text.is_empty() && !text.ends_with('\n'));
    AstError::EditOutOfRange {
        start: edit.start,
        end: edit.end,
        line_count: line_count as u32,
    }
}

/// Finds line starts, moving forward from the last one found.
struct Lines<'a> {
    bytes: &'a [u8],
    /// Where the line after the last one starts (the text length, with the virtual terminator).
    end: usize,
    /// The last line start found: (byte offset, 1-based line).
    at: (usize, u32),
}

impl Lines<'_> {
    /// The byte offset where `line` starts; `line_count + 1` starts at the end.
    fn start_of(&mut self, line: u32, anchor: impl Fn(u32) -> (usize, u32)) -> Option<usize> {
        let known = anchor(line);
        if known.1 <= line && known.1 > self.at.1 {
            self.at = known;
        }
        if self.at.1 > line {
            self.at = (0, 1);
        }
        while self.at.1 < line {
            let from = self.at.0;
            if from >= self.bytes.len() {
                return None;
            }
            let next =
                memchr::memchr(b'\n', &self.bytes[from..]).map_or(self.end, |i| from + i + 1);
            self.at = (next, self.at.1 + 1);
        }
        Some(self.at.0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::source::Source;

    /// The former `apply_edits`, which rebuilt every line and joined them with the text's line
    /// ending.
    fn rejoined(text: &str, edits: &[TextEdit]) -> String {
        let src = Source::new(text);
        let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let mut sorted: Vec<&TextEdit> = edits.iter().collect();
        sorted.sort_by_key(|e| (e.start, e.end));
        let mut lines: Vec<&str> = Vec::new();
        let mut next = 1;
        for edit in sorted {
            lines.extend((next..edit.start).map(|i| src.line(i as usize - 1)));
            lines.extend(edit.lines.iter().map(String::as_str));
            next = edit.end;
        }
        lines.extend((next..=src.len() as u32).map(|i| src.line(i as usize - 1)));
        let mut out = lines.join(eol);
        if (text.is_empty() || text.ends_with('\n')) && !lines.is_empty() {
            out.push_str(eol);
        }
        out
    }

    fn in_place(text: &str, edits: &[TextEdit]) -> Result<String, AstError> {
        let plan = plan(text, edits, |_| (0, 1))?;
        let mut out = text.to_owned();
        plan.apply_in_place(&mut out);
        Ok(out)
    }

    #[test]
    fn ends_of_text() {
        let cases: &[(&str, TextEdit, &str)] = &[
            ("a", TextEdit::insert(2, vec!["b".into()]), "a\nb"),
            ("a\n", TextEdit::insert(2, vec!["b".into()]), "a\nb\n"),
            ("", TextEdit::insert(1, vec!["x".into()]), "x\n"),
            ("a\nb", TextEdit::replace(2, 2, vec![]), "a"),
            ("a\r\nb", TextEdit::replace(2, 2, vec![]), "a"),
            ("a\nb\n", TextEdit::replace(2, 2, vec![]), "a\n"),
            ("a", TextEdit::replace(1, 1, vec![]), ""),
            ("a\n", TextEdit::replace(1, 1, vec![]), ""),
            (
                "a\nb",
                TextEdit::replace(2, 2, vec!["c".into(), "d".into()]),
                "a\nc\nd",
            ),
            (
                "a\r\nb\n",
                TextEdit::insert(2, vec!["x".into()]),
                "a\r\nx\r\nb\n",
            ),
            ("a\n", TextEdit::insert(2, vec![]), "a\n"),
        ];
        for (text, edit, expected) in cases {
            let edits = std::slice::from_ref(edit);
            assert_eq!(
                apply_edits(text, edits).unwrap(),
                *expected,
                "{text:?} {edit:?}"
            );
            assert_eq!(
                in_place(text, edits).unwrap(),
                *expected,
                "{text:?} {edit:?}"
            );
        }
    }

    #[test]
    fn untouched_lines_keep_their_bytes() {
        let text = "a\r\nb\nc\r\r\n";
        let out = apply_edits(text, &[TextEdit::replace(2, 2, vec!["B".into()])]).unwrap();
        assert_eq!(out, "a\r\nB\r\nc\r\r\n");
    }

    #[test]
    fn insertions_at_one_line_keep_their_order() {
        let edits = [
            TextEdit::insert(2, vec!["x".into()]),
            TextEdit::insert(2, vec!["y".into()]),
            TextEdit::replace(2, 2, vec!["B".into()]),
        ];
        assert_eq!(apply_edits("a\nb\n", &edits).unwrap(), "a\nx\ny\nB\n");
        assert_eq!(in_place("a\nb\n", &edits).unwrap(), "a\nx\ny\nB\n");
    }

    fn edits_for(line_count: u32) -> impl Strategy<Value = Vec<TextEdit>> {
        let edit = (
            1..=line_count + 1,
            0..3u32,
            prop::collection::vec("[ab ]{0,2}", 0..3),
        )
            .prop_map(move |(start, len, lines)| TextEdit {
                start,
                end: (start + len).min(line_count + 1),
                lines,
            });
        prop::collection::vec(edit, 0..4)
    }

    /// Texts with one kind of line ending (LF or CRLF), and edits for them.
    fn text_and_edits() -> impl Strategy<Value = (String, Vec<TextEdit>)> {
        ("[ab\n]{0,12}", any::<bool>()).prop_flat_map(|(text, crlf)| {
            let text = if crlf {
                text.replace('\n', "\r\n")
            } else {
                text
            };
            let count = Source::new(&text).len() as u32;
            (Just(text), edits_for(count))
        })
    }

    proptest! {
        /// On texts with one kind of line ending, the splices give the bytes the former
        /// line-join gave, and applying them in place gives the same bytes as building a new
        /// text. (Mixed endings: `untouched_lines_keep_their_bytes`.)
        #[test]
        fn splicing_matches_rejoining((text, edits) in text_and_edits()) {
            let spliced = apply_edits(&text, &edits);
            let spliced_in_place = in_place(&text, &edits);
            prop_assert_eq!(spliced.as_ref().ok(), spliced_in_place.as_ref().ok());
            if let Ok(spliced) = spliced {
                prop_assert_eq!(spliced, rejoined(&text, &edits));
            }
        }

        /// Edits through a line index (every second line indexed) give the bytes
        /// `apply_edits` gives, and leave the index equal to a fresh one, edit after edit.
        #[test]
        fn a_line_index_finds_the_same_lines(
            (text, first) in text_and_edits(),
            more in prop::collection::vec(edits_for(4), 0..3),
        ) {
            let mut indexed = text.clone();
            let mut index = LineIndex::with_stride(&indexed, 2);
            let mut expected = text;
            for edits in std::iter::once(first).chain(more) {
                let plain = apply_edits(&expected, &edits);
                let through_index = index.apply_edits(&mut indexed, &edits);
                prop_assert_eq!(plain.is_ok(), through_index.is_ok());
                if let Ok(plain) = plain {
                    expected = plain;
                }
                prop_assert_eq!(&indexed, &expected);
                prop_assert_eq!(&index, &LineIndex::with_stride(&indexed, 2));
            }
        }
    }
}
