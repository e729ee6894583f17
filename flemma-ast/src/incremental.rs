//! Incremental parsing while a response streams in (spec §1.15).

use crate::ast::Document;
use crate::parser::{LineIter, Output, parse_body, parse_frontmatter};

/// How many bytes before the resume point are compared to detect a changed prefix.
const FINGERPRINT_LEN: usize = 256;

/// Keeps a parsed document current while text is appended to it.
///
/// Every message but the last is frozen; on [`update`](Self::update) only the last message and
/// what was appended after it are parsed again, so a streamed turn costs the size of the
/// response, not of the transcript. The result is always equal to [`parse`](crate::parse) of
/// the same text as long as the text only grew at its end since the previous call. When the
/// text shrank, or the bytes just before the last message changed, a full parse runs instead;
/// changes deep inside the frozen part are not detected, so after an arbitrary edit call
/// [`reset`](Self::reset).
///
/// ```
/// use flemma_ast::{IncrementalParser, Reparse, parse};
///
/// let mut text = String::from("@You:\nList the files.\n");
/// let mut parser = IncrementalParser::new(&text);
/// text.push_str("\n@Assistant:\nHere they are");
/// assert_eq!(parser.update(&text), Reparse::Incremental);
/// text.push_str(": a.rs, b.rs.\n");
/// parser.update(&text);
/// assert_eq!(parser.document(), &parse(&text));
/// ```
#[derive(Debug, Clone)]
pub struct IncrementalParser {
    doc: Document,
    /// Length of the text last parsed.
    len: usize,
    /// Where the last message starts, when a resume is possible.
    resume: Option<Resume>,
}

#[derive(Debug, Clone)]
struct Resume {
    /// Byte offset of the last message's marker line.
    offset: usize,
    /// Lines before that marker.
    line: usize,
    /// Messages and diagnostics before the last message.
    messages: usize,
    diagnostics: usize,
    /// The bytes just before `offset`, and the marker line with its terminator.
    fingerprint: Vec<u8>,
}

/// What [`IncrementalParser::update`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reparse {
    /// Only the last message and the appended text were parsed.
    Incremental,
    /// The whole text was parsed.
    Full,
}

impl IncrementalParser {
    /// Parses `text` in full.
    pub fn new(text: &str) -> Self {
        let mut parser = Self {
            doc: crate::parse(""),
            len: 0,
            resume: None,
        };
        parser.reset(text);
        parser
    }

    /// The current document.
    pub fn document(&self) -> &Document {
        &self.doc
    }

    /// Takes the document out.
    pub fn into_document(self) -> Document {
        self.doc
    }

    /// Parses `text` in full, forgetting the previous text.
    pub fn reset(&mut self, text: &str) {
        let mut lines = LineIter::new(text, 0, 0);
        let frontmatter = parse_frontmatter(text, &mut lines);
        // Without a frontmatter, an opener on line 1 could still be closed by appended text.
        let open_frontmatter = frontmatter.is_none() && text.starts_with("```");
        let mut out = Output::default();
        let preamble = parse_body(text, lines, &mut out);
        let marker = out.last_marker_offset;
        self.doc = Document {
            frontmatter,
            preamble,
            messages: out.messages,
            diagnostics: out.diagnostics,
            line_count: out.line_count,
        };
        self.len = text.len();
        self.resume = if open_frontmatter {
            None
        } else {
            marker.and_then(|offset| resume_point(&self.doc, text, offset))
        };
    }

    /// Brings the document up to date with `text`, which should be the previous text with more
    /// appended.
    pub fn update(&mut self, text: &str) -> Reparse {
        let Some(resume) = self.resume.take().filter(|r| r.still_valid(text, self.len)) else {
            self.reset(text);
            return Reparse::Full;
        };
        self.doc.messages.truncate(resume.messages);
        self.doc.diagnostics.truncate(resume.diagnostics);
        let mut out = Output::default();
        parse_body(
            text,
            LineIter::new(text, resume.offset, resume.line),
            &mut out,
        );
        self.doc.messages.append(&mut out.messages);
        self.doc.diagnostics.append(&mut out.diagnostics);
        self.doc.line_count = out.line_count;
        self.len = text.len();
        self.resume = out
            .last_marker_offset
            .and_then(|offset| resume_point(&self.doc, text, offset));
        Reparse::Incremental
    }
}

/// The resume point at the last message of `doc`, whose marker line starts at byte `offset`.
fn resume_point(doc: &Document, text: &str, offset: usize) -> Option<Resume> {
    let last = doc.messages.last()?;
    // The marker line must be complete: its terminator is part of the fingerprint.
    let newline = offset + memchr::memchr(b'\n', &text.as_bytes()[offset..])?;
    let start = offset.saturating_sub(FINGERPRINT_LEN);
    let diagnostics = doc
        .diagnostics
        .iter()
        .take_while(|d| d.line < last.span.start_line)
        .count();
    Some(Resume {
        offset,
        line: last.span.start_line as usize - 1,
        messages: doc.messages.len() - 1,
        diagnostics,
        fingerprint: text.as_bytes()[start..=newline].to_vec(),
    })
}

impl Resume {
    fn still_valid(&self, text: &str, previous_len: usize) -> bool {
        let start = self.offset.saturating_sub(FINGERPRINT_LEN);
        text.len() >= previous_len
            && text.as_bytes().get(start..start + self.fingerprint.len())
                == Some(&self.fingerprint[..])
            && text.is_char_boundary(self.offset)
    }
}
