//! Incremental parsing: a document kept equal to a full parse of a changing text.

mod units;

use std::sync::OnceLock;

use crate::ast::Document;
use crate::edit::{self, TextEdit};
use crate::error::AstError;
use crate::parser::{LineIter, Output, parse_body_until, parse_frontmatter};
use crate::query::ToolIndex;
use crate::results::Unit;
use units::shift_message;

/// Keeps a text and its parsed document current while the text changes.
///
/// The parser owns a copy of the text. A change re-parses from the last message that starts
/// before the first changed line, and stops at the first message after the change that starts
/// where a message of the previous parse started (same bytes from there to the end): those
/// messages are reused with their lines shifted. Inside a `@You:` message (where results are
/// written) it goes further: a change there re-parses from the text run or result block before
/// it to the first one after it that is unchanged, so writing one result into a message of
/// 10,000 costs that result. So the cost of a change is the size of what it touches, not of the
/// transcript or of the message, and the document always equals [`parse`](crate::parse) of
/// [`text`](Self::text): nothing is assumed unchanged that is not byte for byte the same.
///
/// [`tool_index`](Self::tool_index) finds tool uses and results by id without a scan.
///
/// - [`apply_edits`](Self::apply_edits) takes the [`TextEdit`]s the [`writer`](crate::writer)
///   produces (or any others), applies them to the text as [`apply_edits`](crate::apply_edits)
///   does and re-parses what they touch.
/// - [`append`](Self::append) adds text at the end (a streamed response).
/// - [`update`](Self::update) takes the whole new text when the change is not known: it compares
///   it with the previous text to find the changed bytes (a memory-speed scan of both texts,
///   about a millisecond per 10 MB), then re-parses as above.
///
/// ```
/// use flemma_ast::{IncrementalParser, Reparse, ToolStatus, parse, writer};
///
/// let mut parser = IncrementalParser::new("@You:\nList the files.\n");
/// assert_eq!(parser.append("\n@Assistant:\nHere they are"), Reparse::Incremental);
/// parser.append(": a.rs, b.rs.\n");
/// assert_eq!(parser.document(), &parse(parser.text()));
///
/// parser.append("**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n");
/// let opts = writer::WriterOptions::default();
/// let placed = writer::insert_placeholders(parser.document(), &[("t1", ToolStatus::Approved)], opts)?;
/// parser.apply_edits(&placed)?;
/// let status = writer::set_status(parser.document(), "t1", Some(ToolStatus::Rejected))?;
/// parser.apply_edits(&[status])?;
/// assert_eq!(parser.document(), &parse(parser.text()));
/// assert!(parser.text().contains("`t1` (rejected)"));
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
#[derive(Debug, Clone)]
pub struct IncrementalParser {
    text: String,
    doc: Document,
    /// Byte offset of each message's marker line, one per message of `doc`.
    markers: Vec<usize>,
    /// The units of each message of `doc` (empty but for `@You:` messages).
    units: Vec<Vec<Unit>>,
    /// The tool index of `doc`, built when first asked for after a change.
    index: OnceLock<ToolIndex>,
    /// Bytes the last change parsed.
    reparsed: usize,
}

/// How much of the text a change made the [`IncrementalParser`] parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reparse {
    /// Only the messages around the change were parsed (none when nothing changed).
    Incremental,
    /// The whole text was parsed: the change reached the frontmatter or the lines before the
    /// first message, or every message after it changed.
    Full,
}

impl IncrementalParser {
    /// Parses `text` in full.
    pub fn new(text: impl Into<String>) -> Self {
        let mut parser = Self {
            text: String::new(),
            doc: crate::parser::parse(""),
            markers: Vec::new(),
            units: Vec::new(),
            index: OnceLock::new(),
            reparsed: 0,
        };
        parser.reset(text);
        parser
    }

    /// The current document: always equal to [`parse`](crate::parse) of [`text`](Self::text).
    pub fn document(&self) -> &Document {
        &self.doc
    }

    /// Where each tool use and its results stand in the [`document`](Self::document), by id:
    /// built by one scan the first time it is asked for after a change, then kept until the
    /// next change.
    ///
    /// ```
    /// use flemma_ast::IncrementalParser;
    ///
    /// let parser = IncrementalParser::new(
    ///     "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\n\
    ///      @You:\n**Tool Result:** `t1`\n```\nok\n```\n",
    /// );
    /// let doc = parser.document();
    /// let result = parser.tool_index().last_tool_result(doc, "t1").unwrap();
    /// assert_eq!((result.node.content.as_str(), result.message_index), ("ok", 1));
    /// ```
    pub fn tool_index(&self) -> &ToolIndex {
        self.index.get_or_init(|| ToolIndex::new(&self.doc))
    }

    /// How many bytes of the text the last change parsed again (the whole text after
    /// [`new`](Self::new) and [`reset`](Self::reset)): what a change cost, for hosts and tests
    /// that watch it.
    ///
    /// ```
    /// use flemma_ast::IncrementalParser;
    ///
    /// let mut parser = IncrementalParser::new("@You:\nOne.\n\n@Assistant:\nTwo.\n");
    /// assert_eq!(parser.reparsed_bytes(), parser.text().len());
    /// parser.append("Three.\n");
    /// assert_eq!(parser.reparsed_bytes(), "@Assistant:\nTwo.\nThree.\n".len());
    /// ```
    pub fn reparsed_bytes(&self) -> usize {
        self.reparsed
    }

    /// The current text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Takes the document out.
    pub fn into_document(self) -> Document {
        self.doc
    }

    /// Replaces the text and parses it in full.
    pub fn reset(&mut self, text: impl Into<String>) {
        self.text = text.into();
        self.doc = Document {
            frontmatter: None,
            preamble: None,
            messages: Vec::new(),
            diagnostics: Vec::new(),
            line_count: 0,
        };
        self.markers.clear();
        self.units.clear();
        self.reparse(0, 0, self.text.len());
    }

    /// Appends `more` to the text and re-parses from the last message.
    pub fn append(&mut self, more: &str) -> Reparse {
        if more.is_empty() {
            return Reparse::Incremental;
        }
        let end = self.text.len();
        self.text.push_str(more);
        self.reparse(end, end, self.text.len())
    }

    /// Applies `edits` (all expressed against the current text, as for
    /// [`apply_edits`](crate::apply_edits)) and re-parses the messages they touch.
    ///
    /// # Errors
    ///
    /// [`AstError::EditOutOfRange`] and [`AstError::OverlappingEdits`], as
    /// [`apply_edits`](crate::apply_edits) reports them; the text and document are then left
    /// unchanged.
    pub fn apply_edits(&mut self, edits: &[TextEdit]) -> Result<Reparse, AstError> {
        let anchor = |line: u32| {
            let i = self
                .doc
                .messages
                .partition_point(|m| m.span.start_line <= line);
            match i.checked_sub(1) {
                Some(i) => {
                    let start = self.doc.messages[i].span.start_line;
                    let units = &self.units[i];
                    match units
                        .partition_point(|u| start + u.line <= line)
                        .checked_sub(1)
                    {
                        Some(u) => (self.markers[i] + units[u].offset, start + units[u].line),
                        None => (self.markers[i], start),
                    }
                }
                None => (0, 1),
            }
        };
        let plan = edit::plan(&self.text, edits, anchor)?;
        let (Some(first), Some(last)) = (plan.splices.first(), plan.splices.last()) else {
            return Ok(Reparse::Incremental);
        };
        let (first, last_end) = (first.start, last.end);
        let old_len = self.text.len();
        let (added, removed) = plan
            .splices
            .iter()
            .fold((0, 0), |(a, r), s| (a + s.text.len(), r + s.end - s.start));
        plan.apply_in_place(&mut self.text);
        let new_len = self.text.len();
        Ok(if plan.virtual_eol.is_some() && last_end > old_len {
            // The last line (and maybe the terminator before it) changed.
            self.reparse(first.min(old_len).min(new_len), old_len, new_len)
        } else {
            self.reparse(first, last_end, last_end + added - removed)
        })
    }

    /// Replaces the bytes `range` of the text with `with`, byte for byte (an editor's change:
    /// nothing else of the text changes, line endings included), and re-parses what it
    /// touches.
    ///
    /// ```
    /// use flemma_ast::{IncrementalParser, parse};
    ///
    /// let mut parser = IncrementalParser::new("@You:\r\nHi.\r\n\r\n@Assistant:\r\nHello.\r\n");
    /// let at = parser.text().find("Hi").unwrap();
    /// parser.replace_range(at..at + 2, "Hey there")?;
    /// assert_eq!(parser.text(), "@You:\r\nHey there.\r\n\r\n@Assistant:\r\nHello.\r\n");
    /// assert_eq!(parser.document(), &parse(parser.text()));
    /// assert!(parser.replace_range(0..1000, "").is_err());
    /// # Ok::<(), flemma_ast::AstError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`AstError::RangeOutOfText`] when `range` is not inside the text or does not start and
    /// end on character boundaries; the text is then left unchanged.
    pub fn replace_range(
        &mut self,
        range: std::ops::Range<usize>,
        with: &str,
    ) -> Result<Reparse, AstError> {
        let std::ops::Range { start, end } = range;
        if start > end
            || end > self.text.len()
            || !self.text.is_char_boundary(start)
            || !self.text.is_char_boundary(end)
        {
            return Err(AstError::RangeOutOfText {
                start,
                end,
                len: self.text.len(),
            });
        }
        if start == end && with.is_empty() {
            return Ok(Reparse::Incremental);
        }
        self.text.replace_range(start..end, with);
        Ok(self.reparse(start, end, start + with.len()))
    }

    /// Brings the document up to date with `text`, whatever changed.
    ///
    /// The texts are compared to find the changed bytes; then only the messages around them are
    /// parsed again. When the change is known, [`append`](Self::append) and
    /// [`apply_edits`](Self::apply_edits) skip the comparison.
    pub fn update(&mut self, text: &str) -> Reparse {
        let old = self.text.as_bytes();
        let new = text.as_bytes();
        let mut prefix = common_prefix(old, new);
        if prefix == old.len() && prefix == new.len() {
            return Reparse::Incremental;
        }
        let mut suffix = common_suffix(old, new, old.len().min(new.len()) - prefix);
        // The same bytes lie before `prefix` (and after the suffix) in both texts, so a char
        // boundary in one is a char boundary in the other.
        while !self.text.is_char_boundary(prefix) {
            prefix -= 1;
        }
        while !self.text.is_char_boundary(old.len() - suffix) {
            suffix -= 1;
        }
        let old_end = old.len() - suffix;
        let new_end = new.len() - suffix;
        self.text
            .replace_range(prefix..old_end, &text[prefix..new_end]);
        self.reparse(prefix, old_end, new_end)
    }

    /// Re-parses after a change: the text before byte `first` is as before, and the text from
    /// `new_end` on is the previous text from `old_end` on. `self.doc` and `self.markers` still
    /// describe the previous text.
    fn reparse(&mut self, first: usize, old_end: usize, new_end: usize) -> Reparse {
        self.index = OnceLock::new();
        let text = self.text.as_str();
        // Lines before the changed one are intact; the message holding the line just before
        // it may grow or shrink, so parsing resumes at that message.
        let line_start = memchr::memrchr(b'\n', &text.as_bytes()[..first]).map_or(0, |i| i + 1);
        let before = self.markers.partition_point(|&m| m < line_start);
        // Without a frontmatter, an opener on line 1 could be closed by any changed line.
        let open_frontmatter = self.doc.frontmatter.is_none() && text.starts_with("```");
        if !open_frontmatter {
            let state = units::State {
                text,
                doc: &mut self.doc,
                markers: &mut self.markers,
                units: &mut self.units,
            };
            if let Some(parsed) = units::reparse_in_message(state, first, old_end, new_end) {
                self.reparsed = parsed;
                return Reparse::Incremental;
            }
        }
        let resume = before.checked_sub(1).filter(|_| !open_frontmatter);
        let mut lines = match resume {
            Some(i) => LineIter::new(
                text,
                self.markers[i],
                self.doc.messages[i].span.start_line as usize - 1,
            ),
            None => LineIter::new(text, 0, 0),
        };
        let frontmatter = match resume {
            Some(_) => None,
            None => Some(parse_frontmatter(text, &mut lines)),
        };
        let old_markers = &self.markers;
        let mut out = Output {
            track_units: true,
            ..Output::default()
        };
        let preamble = parse_body_until(text, lines, &mut out, |offset| {
            offset >= new_end
                && old_markers
                    .binary_search(&(offset - new_end + old_end))
                    .is_ok()
        });

        let parse_start = resume.map_or(0, |i| self.markers[i]);
        self.reparsed = out.stopped.map_or(text.len(), |(offset, _)| offset) - parse_start;
        let (stopped, line_count) = (out.stopped, out.line_count);
        let line_shift = self.splice(out, resume, old_end, new_end);
        if let Some(frontmatter) = frontmatter {
            self.doc.frontmatter = frontmatter;
            self.doc.preamble = preamble;
        }
        self.doc.line_count = match stopped {
            Some(_) => self.doc.line_count.wrapping_add_signed(line_shift),
            None => line_count,
        };
        if resume.is_none() && stopped.is_none() {
            Reparse::Full
        } else {
            Reparse::Incremental
        }
    }

    /// Puts the messages, markers, units and diagnostics `out` parsed (from message `resume`
    /// on, else from the start) in place of the old ones up to the old message the parse
    /// stopped at, and shifts the lines and offsets of the messages after it; returns the line
    /// shift.
    fn splice(
        &mut self,
        out: Output,
        resume: Option<usize>,
        old_end: usize,
        new_end: usize,
    ) -> i32 {
        let keep = resume.unwrap_or(0);
        let kept_diagnostics = match resume {
            Some(i) => {
                let start = self.doc.messages[i].span.start_line;
                self.doc.diagnostics.partition_point(|d| d.line < start)
            }
            None => 0,
        };
        let (reused, reused_diagnostics, line_shift) = match out.stopped {
            Some((offset, line)) => {
                let old = offset - new_end + old_end;
                let j = self.markers.partition_point(|&m| m < old);
                let old_line = self.doc.messages[j].span.start_line;
                let shift = (i64::from(line as u32 + 1) - i64::from(old_line)) as i32;
                let d = self.doc.diagnostics.partition_point(|d| d.line < old_line);
                (j, d, shift)
            }
            None => (self.markers.len(), self.doc.diagnostics.len(), 0),
        };
        let parsed = out.messages.len();
        self.doc.messages.splice(keep..reused, out.messages);
        self.markers.splice(keep..reused, out.markers);
        self.units.splice(keep..reused, out.units);
        let parsed_diagnostics = out.diagnostics.len();
        self.doc
            .diagnostics
            .splice(kept_diagnostics..reused_diagnostics, out.diagnostics);
        if line_shift != 0 {
            for message in &mut self.doc.messages[keep + parsed..] {
                shift_message(message, line_shift);
            }
            for d in &mut self.doc.diagnostics[kept_diagnostics + parsed_diagnostics..] {
                d.line = d.line.wrapping_add_signed(line_shift);
            }
        }
        for marker in &mut self.markers[keep + parsed..] {
            *marker = *marker + new_end - old_end;
        }
        line_shift
    }
}

/// Length of the common prefix, compared a block at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let len = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= len && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    i + a[i..len]
        .iter()
        .zip(&b[i..len])
        .position(|(x, y)| x != y)
        .unwrap_or(len - i)
}

/// Length of the common suffix, at most `max`.
fn common_suffix(a: &[u8], b: &[u8], max: usize) -> usize {
    const BLOCK: usize = 4096;
    let (a, b) = (&a[a.len() - max..], &b[b.len() - max..]);
    let mut n = 0;
    while n + BLOCK <= max && a[max - n - BLOCK..max - n] == b[max - n - BLOCK..max - n] {
        n += BLOCK;
    }
    n + a[..max - n]
        .iter()
        .rev()
        .zip(b[..max - n].iter().rev())
        .position(|(x, y)| x != y)
        .unwrap_or(max - n)
}

#[cfg(test)]
mod tests;
