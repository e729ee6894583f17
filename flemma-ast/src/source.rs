//! The source text as a table of lines.

use std::borrow::Cow;

/// The line ending a text uses: `"\r\n"` when its first line ends in CRLF, else `"\n"`.
///
/// The writer ([`apply_edits`](crate::apply_edits)) and `flemma fmt` write every line with it,
/// so a CRLF file stays CRLF.
///
/// ```
/// assert_eq!(flemma_ast::line_ending("@You:\r\nhi\r\n"), "\r\n");
/// assert_eq!(flemma_ast::line_ending("@You:\nhi\r\n"), "\n");
/// assert_eq!(flemma_ast::line_ending("\r\n"), "\r\n");
/// assert_eq!(flemma_ast::line_ending("no newline"), "\n");
/// ```
pub fn line_ending(text: &str) -> &'static str {
    if text
        .find('\n')
        .is_some_and(|i| i > 0 && text.as_bytes()[i - 1] == b'\r')
    {
        "\r\n"
    } else {
        "\n"
    }
}

/// A text split into lines on `\n`; a `\r` before a `\n` belongs to the terminator, so CRLF text
/// reads like LF text.
#[derive(Debug)]
pub(crate) struct Source<'a> {
    text: &'a str,
    /// Number of lines before this text in the whole document.
    base: usize,
    /// Byte range of each line's content, terminator excluded.
    lines: Vec<(usize, usize)>,
}

impl<'a> Source<'a> {
    /// The whole text (the parser builds sources per message with [`Source::from_parts`]).
    #[cfg(test)]
    pub(crate) fn new(text: &'a str) -> Self {
        let base = 0;
        let bytes = text.as_bytes();
        let mut lines = Vec::with_capacity(text.len() / 40 + 1);
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', bytes) {
            lines.push((start, trim_cr(bytes, start, nl)));
            start = nl + 1;
        }
        // Like an editor: a final newline ends the last line instead of starting another one.
        if start < text.len() {
            lines.push((start, trim_cr(bytes, start, text.len())));
        }
        Self { text, base, lines }
    }

    /// A source over `lines` (absolute byte ranges in `text`), the first being line index `base`.
    pub(crate) fn from_parts(text: &'a str, base: usize, lines: Vec<(usize, usize)>) -> Self {
        Self { text, base, lines }
    }

    /// Gives the line table back, for reuse.
    pub(crate) fn into_lines(self) -> Vec<(usize, usize)> {
        self.lines
    }

    /// Number of lines (a final newline ends the last line; it does not start another).
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    /// The 1-based document line number of line `i`.
    pub(crate) fn number(&self, i: usize) -> u32 {
        (self.base + i + 1) as u32
    }

    /// The document span of lines `first..=last`.
    pub(crate) fn span(&self, first: usize, last: usize) -> crate::ast::LineSpan {
        crate::ast::LineSpan::new(self.number(first), self.number(last))
    }

    /// The byte offset where line `i` starts.
    pub(crate) fn start(&self, i: usize) -> usize {
        self.lines[i].0
    }

    /// Line `i` (0-based), without its terminator.
    pub(crate) fn line(&self, i: usize) -> &'a str {
        let (start, end) = self.lines[i];
        &self.text[start..end]
    }

    /// Lines `first..=last` joined by `\n`.
    pub(crate) fn join(&self, first: usize, last: usize) -> String {
        self.join_cow(first, last).into_owned()
    }

    /// Lines `first..=last` joined by `\n`, borrowed when the text has no CR terminators there.
    pub(crate) fn join_cow(&self, first: usize, last: usize) -> Cow<'a, str> {
        if first > last {
            return Cow::Borrowed("");
        }
        let slice = &self.text[self.lines[first].0..self.lines[last].1];
        if memchr::memchr(b'\r', slice.as_bytes()).is_none() {
            Cow::Borrowed(slice)
        } else {
            let mut joined = String::with_capacity(slice.len());
            for i in first..=last {
                if i > first {
                    joined.push('\n');
                }
                joined.push_str(self.line(i));
            }
            Cow::Owned(joined)
        }
    }
}

/// The end of a line's content: carriage returns before the terminator (or the end of the
/// text) belong to the terminator, so no line ever ends in CR and CRLF reads like LF.
pub(crate) fn trim_cr(bytes: &[u8], start: usize, mut end: usize) -> usize {
    while end > start && bytes[end - 1] == b'\r' {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lf_and_crlf_alike() {
        let lf = Source::new("a\nb\n\nc");
        let crlf = Source::new("a\r\nb\r\n\r\nc");
        for src in [&lf, &crlf] {
            assert_eq!(src.len(), 4);
            assert_eq!(src.line(1), "b");
            assert_eq!(src.line(2), "");
            assert_eq!(src.join(0, 3), "a\nb\n\nc");
        }
        assert_eq!(Source::new("").len(), 0);
        assert_eq!(Source::new("\n").len(), 1);
        assert_eq!(Source::new("x\n").len(), 1);
        assert_eq!(Source::new("x\n\n").line(1), "");
        assert_eq!(Source::new("x\r").line(0), "x");
        assert_eq!(Source::new("lone\rcr\n").line(0), "lone\rcr");
        assert_eq!(Source::new("a\r\r\nb\r\r").line(0), "a");
        assert_eq!(Source::new("a\r\r\nb\r\r").line(1), "b");
    }
}
