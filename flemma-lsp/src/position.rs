//! Positions as the Language Server Protocol counts them: lines broken at `\n`, `\r\n` and a
//! lone `\r`, characters in UTF-16 code units; and the byte offsets the parser works in.

use lsp_types::Position;

/// The byte offset where each line of a text starts, kept up to date through splices.
///
/// Lines end at `\n`, `\r\n` or a lone `\r` (the protocol's rule); a position's `character`
/// counts UTF-16 code units from the line's start.
///
/// ```
/// use flemma_lsp::LineIndex;
/// use lsp_types::Position;
///
/// let text = "@You:\r\nhé 😀!\n";
/// let index = LineIndex::new(text);
/// // `!` follows `h`, `é`, a space and an emoji of two UTF-16 units.
/// let bang = text.find('!').unwrap();
/// assert_eq!(index.position(text, bang), Position::new(1, 5));
/// assert_eq!(index.offset(text, Position::new(1, 5)), Some(bang));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIndex {
    /// Start of each line; `starts[0] == 0`.
    starts: Vec<usize>,
    /// How many lines start after a lone `\r` (lines the parser, which breaks at `\n` only,
    /// does not count).
    lone_cr: usize,
}

/// Whether a line starts at byte `p` (`p > 0`) of `bytes`.
fn starts_line(bytes: &[u8], p: usize) -> bool {
    match bytes[p - 1] {
        b'\n' => true,
        b'\r' => bytes.get(p) != Some(&b'\n'),
        _ => false,
    }
}

impl LineIndex {
    /// The lines of `text`.
    pub fn new(text: &str) -> Self {
        let mut index = Self {
            starts: vec![0],
            lone_cr: 0,
        };
        index.scan(text.as_bytes(), 1, text.len());
        index
    }

    /// Pushes the line starts in `from..=to` (`from >= 1`).
    fn scan(&mut self, bytes: &[u8], from: usize, to: usize) {
        let mut p = from;
        while p <= to {
            // Jump to the next terminator byte.
            let Some(i) = memchr::memchr2(b'\n', b'\r', &bytes[p - 1..to]) else {
                break;
            };
            p += i;
            if starts_line(bytes, p) {
                self.starts.push(p);
                if bytes[p - 1] == b'\r' {
                    self.lone_cr += 1;
                }
            }
            p += 1;
        }
    }

    /// The number of lines (a text ending in a terminator has an empty last line).
    pub fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// Whether some line ends in a lone `\r`: then the protocol's lines and the parser's
    /// differ.
    pub fn has_lone_cr(&self) -> bool {
        self.lone_cr > 0
    }

    /// The byte offset where line `line` (0-based) starts.
    pub fn line_start(&self, line: usize) -> Option<usize> {
        self.starts.get(line).copied()
    }

    /// The bytes of line `line` without its terminator.
    fn line_bounds(&self, text: &str, line: usize) -> Option<(usize, usize)> {
        let start = *self.starts.get(line)?;
        let mut end = self.starts.get(line + 1).copied().unwrap_or(text.len());
        let bytes = text.as_bytes();
        if end > start && bytes[end - 1] == b'\n' {
            end -= 1;
        }
        if end > start && bytes[end - 1] == b'\r' {
            end -= 1;
        }
        Some((start, end))
    }

    /// The byte offset of `position`: `None` past the last line; a `character` past the end of
    /// its line is the line's end (the protocol's rule), and one inside a character's UTF-16
    /// pair is that character's start.
    pub fn offset(&self, text: &str, position: Position) -> Option<usize> {
        let (start, end) = self.line_bounds(text, position.line as usize)?;
        let mut units = 0u32;
        for (i, c) in text[start..end].char_indices() {
            let width = c.len_utf16() as u32;
            if units + width > position.character {
                return Some(start + i);
            }
            units += width;
        }
        Some(end)
    }

    /// The position of byte `offset` (clamped to the text; an offset inside a character is
    /// that character's start).
    pub fn position(&self, text: &str, offset: usize) -> Position {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let character: usize = text[start..offset].chars().map(char::len_utf16).sum();
        Position::new(line as u32, character as u32)
    }

    /// The end of line `line` (before its terminator), as a position.
    pub fn line_end(&self, text: &str, line: usize) -> Option<Position> {
        let (start, end) = self.line_bounds(text, line)?;
        let character: usize = text[start..end].chars().map(char::len_utf16).sum();
        Some(Position::new(line as u32, character as u32))
    }

    /// How many of the line starts in `start..=old_end` follow a lone `\r` of `old` (the text
    /// before a splice of `start..old_end`): what [`splice`](Self::splice) is told.
    pub(crate) fn lone_cr_in(&self, old: &[u8], start: usize, old_end: usize) -> usize {
        let first = self.starts.partition_point(|&s| s < start.max(1));
        let after = self.starts.partition_point(|&s| s <= old_end);
        self.starts[first..after]
            .iter()
            .filter(|&&p| old[p - 1] == b'\r')
            .count()
    }

    /// Keeps the index right after the bytes `start..old_end` were replaced by `inserted`
    /// bytes, `new` being the text after the splice and `removed_cr` what
    /// [`lone_cr_in`](Self::lone_cr_in) said before it. A line start depends on the two bytes
    /// around it, so only the starts in the spliced bytes are computed again; the later ones
    /// are shifted.
    pub(crate) fn splice(
        &mut self,
        new: &[u8],
        start: usize,
        old_end: usize,
        inserted: usize,
        removed_cr: usize,
    ) {
        let new_end = start + inserted;
        let first = self.starts.partition_point(|&s| s < start.max(1));
        let after = self.starts.partition_point(|&s| s <= old_end);
        let tail: Vec<usize> = self.starts[after..]
            .iter()
            .map(|&s| s - old_end + new_end)
            .collect();
        self.starts.truncate(first);
        self.lone_cr -= removed_cr;
        self.scan(new, start.max(1), new_end.min(new.len()));
        self.starts.extend(tail);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::LineIndex;

    const PIECES: &[&str] = &["a", "\n", "\r", "\r\n", "é", "😀", "@You:", ""];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn a_spliced_index_is_the_index_of_the_new_text(
            text in prop::collection::vec(prop::sample::select(PIECES), 0..20),
            rounds in prop::collection::vec(
                (any::<usize>(), 0..6usize, prop::collection::vec(prop::sample::select(PIECES), 0..4)),
                1..6,
            ),
        ) {
            let mut text = text.concat();
            let mut index = LineIndex::new(&text);
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
                let removed = index.lone_cr_in(text.as_bytes(), start, end);
                text.replace_range(start..end, &with);
                index.splice(text.as_bytes(), start, end, with.len(), removed);
                prop_assert_eq!(&index, &LineIndex::new(&text));
                // Every character boundary maps to a position and back.
                for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)) {
                    let position = index.position(&text, offset);
                    let back = index.offset(&text, position).unwrap();
                    // A boundary inside a `\r\n` maps to the end of its line.
                    if text.as_bytes().get(offset) == Some(&b'\n') && offset > 0 && text.as_bytes()[offset - 1] == b'\r' {
                        prop_assert_eq!(back, offset - 1);
                    } else {
                        prop_assert_eq!(back, offset);
                    }
                }
            }
        }
    }
}

/// Converts the parser's lines (1-based, broken at `\n` only) to the protocol's.
#[derive(Debug)]
pub(crate) struct ParserLines<'a> {
    text: &'a str,
    index: &'a LineIndex,
    /// The parser's line starts, when they differ from the protocol's (lone `\r`).
    own: Option<Vec<usize>>,
}

impl<'a> ParserLines<'a> {
    pub(crate) fn new(text: &'a str, index: &'a LineIndex) -> Self {
        let own = index.has_lone_cr().then(|| {
            std::iter::once(0)
                .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
                .collect()
        });
        Self { text, index, own }
    }

    /// The byte offset where the parser's line `line` (1-based) starts.
    pub(crate) fn start(&self, line: u32) -> usize {
        let i = (line.max(1) - 1) as usize;
        match &self.own {
            Some(own) => own.get(i).copied().unwrap_or(self.text.len()),
            None => self.index.line_start(i).unwrap_or(self.text.len()),
        }
    }

    /// The protocol's position of the start of the parser's line `line`.
    pub(crate) fn line_start(&self, line: u32) -> Position {
        match &self.own {
            None => Position::new(line.max(1) - 1, 0),
            Some(_) => self.index.position(self.text, self.start(line)),
        }
    }

    /// The protocol's position of the end of the parser's line `line` (before its `\n`).
    pub(crate) fn line_end(&self, line: u32) -> Position {
        let next = self.start(line + 1);
        let mut end = next.min(self.text.len());
        let bytes = self.text.as_bytes();
        if end > self.start(line) && bytes.get(end - 1) == Some(&b'\n') {
            end -= 1;
        }
        if end > self.start(line) && bytes.get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        self.index.position(self.text, end)
    }
}
