//! The document parser: frontmatter, message segmentation and per-role content.

use crate::ast::{Diagnostic, Document, Frontmatter, LineSpan, Message, Role, Segment, Text};
use crate::content::{Body, parse_assistant};
use crate::error::AstError;
use crate::line;
use crate::results::{Unit, UnitTrack, parse_you};
use crate::source::{Source, trim_cr};
use crate::template::parse_segments;

pub use crate::input::MAX_INPUT_DEPTH;

/// Parses a transcript.
///
/// Never fails and never panics: malformed constructs become [`Diagnostic`]s and
/// [`Segment::Malformed`] segments, and the rest of the document still parses. CRLF line
/// endings read like LF.
///
/// ```
/// let doc = flemma_ast::parse("@You:\nHello {{ name }}!\n");
/// assert_eq!(doc.messages.len(), 1);
/// assert_eq!(doc.messages[0].segments.len(), 3);
/// assert!(doc.is_clean());
/// ```
pub fn parse(text: &str) -> Document {
    let mut lines = LineIter::new(text, 0, 0);
    let frontmatter = parse_frontmatter(text, &mut lines);
    let mut out = Output::default();
    let preamble = parse_body(text, lines, &mut out);
    Document {
        frontmatter,
        preamble,
        messages: out.messages,
        diagnostics: out.diagnostics,
        line_count: out.line_count,
    }
}

/// Parses a transcript given as bytes.
///
/// # Errors
///
/// [`AstError::InvalidUtf8`] with the byte offset of the first invalid byte.
pub fn parse_bytes(bytes: &[u8]) -> Result<Document, AstError> {
    let text = std::str::from_utf8(bytes).map_err(|source| AstError::InvalidUtf8 {
        offset: source.valid_up_to(),
        source,
    })?;
    Ok(parse(text))
}

/// Messages and diagnostics collected while parsing a body.
#[derive(Debug, Default)]
pub(crate) struct Output {
    pub(crate) messages: Vec<Message>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Lines in the whole text (up to the stop, when parsing stopped).
    pub(crate) line_count: u32,
    /// Byte offset of each parsed message's marker line.
    pub(crate) markers: Vec<usize>,
    /// Where parsing stopped before a message: its marker's byte offset and 0-based line.
    pub(crate) stopped: Option<(usize, usize)>,
    /// Record the [`Unit`]s of each message in [`units`](Self::units) (the incremental parser).
    pub(crate) track_units: bool,
    /// With `track_units`: the units of each parsed message (none for roles other than `@You:`).
    pub(crate) units: Vec<Vec<Unit>>,
}

/// One line: content byte range (terminator excluded) and where the next line starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineAt {
    pub(crate) start: usize,
    pub(crate) end: usize,
    next: usize,
}

/// Walks the lines of a text from a byte offset, like [`Source`] splits them.
#[derive(Debug, Clone)]
pub(crate) struct LineIter<'a> {
    text: &'a str,
    pos: usize,
    /// 0-based number of the next line.
    pub(crate) number: usize,
}

impl<'a> LineIter<'a> {
    /// Lines from byte `pos`, which starts line index `number`.
    pub(crate) fn new(text: &'a str, pos: usize, number: usize) -> Self {
        Self { text, pos, number }
    }

    /// Where the next line starts.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn peek(&self) -> Option<LineAt> {
        let bytes = self.text.as_bytes();
        if self.pos >= bytes.len() {
            return None;
        }
        let (end, next) = match memchr::memchr(b'\n', &bytes[self.pos..]) {
            Some(n) => (trim_cr(bytes, self.pos, self.pos + n), self.pos + n + 1),
            None => (trim_cr(bytes, self.pos, bytes.len()), bytes.len()),
        };
        Some(LineAt {
            start: self.pos,
            end,
            next,
        })
    }

    pub(crate) fn advance(&mut self, at: LineAt) {
        self.pos = at.next;
        self.number += 1;
    }

    pub(crate) fn str(&self, at: LineAt) -> &'a str {
        &self.text[at.start..at.end]
    }
}

pub(crate) fn parse_frontmatter(text: &str, lines: &mut LineIter<'_>) -> Option<Frontmatter> {
    let first = lines.peek()?;
    let language = line::frontmatter_open(lines.str(first))?;
    let mut scan = lines.clone();
    scan.advance(first);
    let mut inner = Vec::new();
    while let Some(at) = scan.peek() {
        scan.advance(at);
        if line::is_frontmatter_close(scan.str(at)) {
            let src = Source::from_parts(text, 1, inner);
            let code = if src.len() == 0 {
                String::new()
            } else {
                src.join(0, src.len() - 1)
            };
            *lines = scan;
            return Some(Frontmatter {
                language: language.to_owned(),
                code,
                span: LineSpan::new(1, lines.number as u32),
            });
        }
        inner.push((at.start, at.end));
    }
    None
}

/// Parses the lines from `lines` on as messages into `out`; returns the preamble before the
/// first marker.
pub(crate) fn parse_body(text: &str, lines: LineIter<'_>, out: &mut Output) -> Option<String> {
    parse_body_until(text, lines, out, |_| false)
}

/// [`parse_body`], stopping before the first message whose marker's byte offset satisfies
/// `stop` (recorded in [`Output::stopped`]).
pub(crate) fn parse_body_until(
    text: &str,
    mut lines: LineIter<'_>,
    out: &mut Output,
    mut stop: impl FnMut(usize) -> bool,
) -> Option<String> {
    let mut buf: Vec<(usize, usize)> = Vec::new();
    let preamble_base = lines.number;
    // Lines before the first marker.
    let mut marker = None;
    while let Some(at) = lines.peek() {
        if let Some(role) = line::role_marker(lines.str(at)) {
            marker = Some((role, at));
            break;
        }
        buf.push((at.start, at.end));
        lines.advance(at);
    }
    let preamble = preamble(text, preamble_base, &mut buf);
    while let Some((role, at)) = marker {
        let base = lines.number;
        if stop(at.start) {
            out.stopped = Some((at.start, base));
            break;
        }
        out.markers.push(at.start);
        buf.clear();
        buf.push((at.start, at.end));
        lines.advance(at);
        marker = collect_message(&mut lines, &mut buf);
        let src = Source::from_parts(text, base, std::mem::take(&mut buf));
        parse_message(&src, Role::from_marker(role), 0, src.len(), out);
        buf = src.into_lines();
    }
    out.line_count = lines.number as u32;
    preamble
}

/// Collects the lines of a message into `buf` up to the next role marker outside a fence,
/// which it returns (not consumed).
fn collect_message<'a>(
    lines: &mut LineIter<'a>,
    buf: &mut Vec<(usize, usize)>,
) -> Option<(&'a str, LineAt)> {
    let mut fence = 0;
    while let Some(at) = lines.peek() {
        let text = lines.str(at);
        let (after, marker) = line::message_fence(fence, text);
        if marker {
            return line::role_marker(text).map(|role| (role, at));
        }
        fence = after;
        buf.push((at.start, at.end));
        lines.advance(at);
    }
    None
}

fn preamble(text: &str, base: usize, buf: &mut Vec<(usize, usize)>) -> Option<String> {
    while buf.last().is_some_and(|&(s, e)| s == e) {
        buf.pop();
    }
    if buf.is_empty() {
        return None;
    }
    let src = Source::from_parts(text, base, std::mem::take(buf));
    let preamble = src.join(0, src.len() - 1);
    *buf = src.into_lines();
    Some(preamble)
}

/// Parses the message whose marker is on line `marker` and which ends before line `end`.
fn parse_message(src: &Source<'_>, role: Role, marker: usize, end: usize, out: &mut Output) {
    let span = LineSpan::new(src.number(marker), src.number(end - 1));
    let mut content_end = end;
    while content_end > marker + 1 && src.line(content_end - 1).is_empty() {
        content_end -= 1;
    }
    let body = Body::new(src, marker + 1, content_end);
    let mut units = Vec::new();
    let segments = if body.is_empty() {
        match role {
            Role::You | Role::Assistant => vec![Segment::Text(Text {
                value: String::new(),
                span: None,
            })],
            _ => Vec::new(),
        }
    } else {
        match role {
            Role::Assistant => parse_assistant(&body, &mut out.diagnostics),
            Role::You if out.track_units => {
                let marker_at = (src.start(marker), src.number(marker));
                let start = out.diagnostics.len();
                let mut track = UnitTrack::new(marker_at, (0, 0), start, marker + 1, (0, 0));
                let segments = parse_you(&body, &mut out.diagnostics, Some(&mut track), true);
                units = track.units;
                segments
            }
            Role::You => parse_you(&body, &mut out.diagnostics, None, true),
            _ => parse_segments(
                &src.join_cow(marker + 1, content_end - 1),
                src.number(marker + 1),
            ),
        }
    };
    if out.track_units {
        out.units.push(units);
    }
    out.messages.push(Message {
        role,
        segments,
        span,
    });
}
