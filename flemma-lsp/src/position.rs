//! Positions as the Language Server Protocol counts them: lines broken at `\n`, `\r\n` and a
//! lone `\r`, characters in UTF-16 code units; and the byte offsets the parser works in.

use lsp_types::Position;

/// Where the lines of a text start, kept up to date through splices, in blocks of about
/// 64 lines: each block keeps the byte where its first line starts and how many lines
/// start in it, and a line inside a block is found by scanning the block's bytes (a few
/// kilobytes). So the index of a 10 MB transcript holds a few thousand blocks, not a quarter
/// of a million offsets, and an edit rebuilds the blocks it touches.
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
    /// The blocks, in order; `blocks[0].start == 0`.
    blocks: Vec<Block>,
    /// How many lines start after a lone `\r` (lines the parser, which breaks at `\n` only,
    /// does not count).
    lone_cr: usize,
}

/// About how many lines a block holds (from half to one and a half times this; a handful in
/// the unit tests, so that their texts span many blocks).
#[cfg(not(test))]
const BLOCK: usize = 64;
#[cfg(test)]
const BLOCK: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    /// The byte where its first line starts.
    start: usize,
    /// The number of its first line (0-based).
    first: usize,
    /// How many lines start in it, its first included.
    lines: usize,
    /// How many of those start after a lone `\r`.
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

/// Calls `found` with each line start in `from..=to` (`from >= 1`), in order; stops when it
/// returns `false`.
fn line_starts(bytes: &[u8], from: usize, to: usize, mut found: impl FnMut(usize) -> bool) {
    let mut p = from;
    while p <= to {
        let Some(i) = memchr::memchr2(b'\n', b'\r', &bytes[p - 1..to]) else {
            return;
        };
        p += i;
        if starts_line(bytes, p) && !found(p) {
            return;
        }
        p += 1;
    }
}

/// Splits the line starts `starts` (the first being a block's start) into blocks of about
/// `BLOCK` lines, numbered from `first`.
fn blocks_of(bytes: &[u8], starts: &[usize], first: usize, out: &mut Vec<Block>) {
    let count = starts.len().div_ceil(BLOCK).max(1);
    let mut taken = 0;
    for k in 0..count {
        let end = (starts.len() * (k + 1)).div_ceil(count);
        let lines = &starts[taken..end];
        if lines.is_empty() {
            continue;
        }
        out.push(Block {
            start: lines[0],
            first: first + taken,
            lines: lines.len(),
            lone_cr: lines
                .iter()
                .filter(|&&p| p > 0 && bytes[p - 1] == b'\r')
                .count(),
        });
        taken = end;
    }
}

impl LineIndex {
    /// The lines of `text`.
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        line_starts(bytes, 1, bytes.len(), |p| {
            starts.push(p);
            true
        });
        let mut blocks = Vec::with_capacity(starts.len() / BLOCK + 1);
        blocks_of(bytes, &starts, 0, &mut blocks);
        let lone_cr = blocks.iter().map(|b| b.lone_cr).sum();
        Self { blocks, lone_cr }
    }

    /// The number of lines (a text ending in a terminator has an empty last line).
    pub fn line_count(&self) -> usize {
        self.blocks.last().map_or(1, |b| b.first + b.lines)
    }

    /// Whether some line ends in a lone `\r`: then the protocol's lines and the parser's
    /// differ.
    pub fn has_lone_cr(&self) -> bool {
        self.lone_cr > 0
    }

    /// The block holding line `line`.
    fn block_of_line(&self, line: usize) -> Option<&Block> {
        let i = self
            .blocks
            .partition_point(|b| b.first <= line)
            .checked_sub(1)?;
        let block = &self.blocks[i];
        (line < block.first + block.lines).then_some(block)
    }

    /// The byte offset where line `line` (0-based) starts.
    pub fn line_start(&self, text: &str, line: usize) -> Option<usize> {
        let block = self.block_of_line(line)?;
        let mut left = line - block.first;
        if left == 0 {
            return Some(block.start);
        }
        let bytes = text.as_bytes();
        let mut at = None;
        line_starts(bytes, block.start + 1, bytes.len(), |p| {
            left -= 1;
            if left == 0 {
                at = Some(p);
            }
            left > 0
        });
        at
    }

    /// The bytes of line `line` without its terminator.
    fn line_bounds(&self, text: &str, line: usize) -> Option<(usize, usize)> {
        let start = self.line_start(text, line)?;
        let bytes = text.as_bytes();
        let end = memchr::memchr2(b'\n', b'\r', &bytes[start..]).map_or(bytes.len(), |i| start + i);
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
        let i = self
            .blocks
            .partition_point(|b| b.start <= offset)
            .saturating_sub(1);
        let block = self.blocks[i];
        let (mut line, mut start) = (block.first, block.start);
        line_starts(text.as_bytes(), block.start + 1, offset, |p| {
            line += 1;
            start = p;
            true
        });
        let character: usize = text[start..offset].chars().map(char::len_utf16).sum();
        Position::new(line as u32, character as u32)
    }

    /// The end of line `line` (before its terminator), as a position.
    pub fn line_end(&self, text: &str, line: usize) -> Option<Position> {
        let (start, end) = self.line_bounds(text, line)?;
        let character: usize = text[start..end].chars().map(char::len_utf16).sum();
        Some(Position::new(line as u32, character as u32))
    }

    /// Keeps the index right after the bytes `start..old_end` were replaced by `inserted`
    /// bytes, `new` being the text after the splice. A line start depends on the two bytes
    /// around it, so the blocks from the one before the splice to the one after it are built
    /// again from `new`; the later ones are shifted.
    pub(crate) fn splice(&mut self, new: &[u8], start: usize, old_end: usize, inserted: usize) {
        let new_end = start + inserted;
        // The block holding the byte before the splice (a line start at `start` depends on
        // it), and the first block starting after the splice.
        let i = self
            .blocks
            .partition_point(|b| b.start < start)
            .saturating_sub(1);
        let j = self.blocks.partition_point(|b| b.start <= old_end);
        let from = self.blocks[i].start;
        let first = self.blocks[i].first;
        let region_end = self
            .blocks
            .get(j)
            .map_or(new.len(), |b| b.start - old_end + new_end - 1);
        let removed: usize = self.blocks[i..j].iter().map(|b| b.lone_cr).sum();
        let mut starts = vec![from];
        line_starts(new, from + 1, region_end.min(new.len()), |p| {
            starts.push(p);
            true
        });
        let mut rebuilt = Vec::with_capacity(starts.len() / BLOCK + 1);
        blocks_of(new, &starts, first, &mut rebuilt);
        let added: usize = rebuilt.iter().map(|b| b.lone_cr).sum();
        let next_first = first + starts.len();
        let tail: Vec<Block> = self.blocks[j..]
            .iter()
            .scan(next_first, |line, b| {
                let moved = Block {
                    // Blocks after the splice start after `old_end`.
                    start: b.start - old_end + new_end,
                    first: *line,
                    ..*b
                };
                *line += b.lines;
                Some(moved)
            })
            .collect();
        self.blocks.truncate(i);
        self.blocks.extend(rebuilt);
        self.blocks.extend(tail);
        self.lone_cr = self.lone_cr - removed + added;
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
            text in prop::collection::vec(prop::sample::select(PIECES), 0..60),
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
                text.replace_range(start..end, &with);
                index.splice(text.as_bytes(), start, end, with.len());
                let fresh = LineIndex::new(&text);
                // The blocks may be cut elsewhere; the lines are the same.
                prop_assert_eq!(index.line_count(), fresh.line_count());
                prop_assert_eq!(index.has_lone_cr(), fresh.has_lone_cr());
                for line in 0..fresh.line_count() {
                    prop_assert_eq!(index.line_start(&text, line), fresh.line_start(&text, line));
                }
                prop_assert_eq!(index.line_start(&text, fresh.line_count()), None);
                let naive: Vec<usize> = std::iter::once(0)
                    .chain((1..=text.len()).filter(|&p| super::starts_line(text.as_bytes(), p)))
                    .collect();
                prop_assert_eq!(naive.len(), fresh.line_count());
                for (line, &at) in naive.iter().enumerate() {
                    prop_assert_eq!(fresh.line_start(&text, line), Some(at));
                }
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

/// The UTF-16 length of `s`.
fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

/// Converts the parser's lines (1-based, broken at `\n` only) to the protocol's. Lookups in
/// document order (an outline, folding ranges) walk forward from the last line found.
#[derive(Debug)]
pub(crate) struct ParserLines<'a> {
    text: &'a str,
    index: &'a LineIndex,
    /// The parser's line starts, when they differ from the protocol's (lone `\r`).
    own: Option<Vec<usize>>,
    /// The last line (0-based) whose start was found, and that start.
    cursor: std::cell::Cell<(usize, usize)>,
}

/// How many lines a lookup walks forward from the cursor before it asks the index instead.
const WALK: usize = 256;

impl<'a> ParserLines<'a> {
    pub(crate) fn new(text: &'a str, index: &'a LineIndex) -> Self {
        let own = index.has_lone_cr().then(|| {
            std::iter::once(0)
                .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
                .collect()
        });
        Self {
            text,
            index,
            own,
            cursor: std::cell::Cell::new((0, 0)),
        }
    }

    /// The byte offset where the parser's line `line` (1-based) starts (the text's end past
    /// the last line).
    pub(crate) fn start(&self, line: u32) -> usize {
        let i = (line.max(1) - 1) as usize;
        let len = self.text.len();
        if let Some(own) = &self.own {
            return own.get(i).copied().unwrap_or(len);
        }
        // Without a lone `\r`, the parser's lines are the protocol's and start after `\n`.
        let (at_line, at) = self.cursor.get();
        let found = if at_line <= i && i - at_line <= WALK {
            let bytes = self.text.as_bytes();
            let mut at = at;
            for _ in at_line..i {
                match memchr::memchr(b'\n', &bytes[at..]) {
                    Some(k) => at += k + 1,
                    None => return len,
                }
            }
            Some(at)
        } else {
            self.index.line_start(self.text, i)
        };
        match found {
            Some(at) => {
                self.cursor.set((i, at));
                at
            }
            None => len,
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
        let start = self.start(line);
        let bytes = self.text.as_bytes();
        let mut end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |k| start + k);
        if end > start && bytes[end - 1] == b'\r' {
            end -= 1;
        }
        match &self.own {
            None => Position::new(line.max(1) - 1, utf16_len(&self.text[start..end]) as u32),
            Some(_) => self.index.position(self.text, end),
        }
    }
}
