//! The document parser: frontmatter, message segmentation and per-role content (spec §1).

use std::cell::{Cell, OnceCell};

use crate::ast::{
    Aborted, Diagnostic, DiagnosticKind, Document, FenceLayout, Frontmatter, JobResult, JobStatus,
    LineSpan, Malformed, Message, Role, Segment, Severity, Signature, Text, TextSpan, Thinking,
    ToolResult, ToolStatus, ToolUse,
};
use crate::error::AstError;
use crate::line::{self, FenceOpen, ResultHeader, ResultKind, ThinkingTag};
use crate::messages as msg;
use crate::modeline::{self, Key, Modeline, Value};
use crate::source::{Source, trim_cr};
use crate::template::parse_segments;
use flemma_ids::{JobId, ToolName, ToolUseId};

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
}

/// One line: content byte range (terminator excluded) and where the next line starts.
#[derive(Debug, Clone, Copy)]
struct LineAt {
    start: usize,
    end: usize,
    next: usize,
}

/// Walks the lines of a text from a byte offset, like [`Source`] splits them.
#[derive(Debug, Clone)]
pub(crate) struct LineIter<'a> {
    text: &'a str,
    pos: usize,
    /// 0-based number of the next line.
    number: usize,
}

impl<'a> LineIter<'a> {
    /// Lines from byte `pos`, which starts line index `number`.
    pub(crate) fn new(text: &'a str, pos: usize, number: usize) -> Self {
        Self { text, pos, number }
    }

    fn peek(&self) -> Option<LineAt> {
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

    fn advance(&mut self, at: LineAt) {
        self.pos = at.next;
        self.number += 1;
    }

    fn str(&self, at: LineAt) -> &'a str {
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
    let mut fence: Option<usize> = None;
    while let Some(at) = lines.peek() {
        let text = lines.str(at);
        match text.as_bytes().first() {
            Some(b'`') => match fence {
                Some(ticks) => {
                    if line::closes_fence(text, ticks) {
                        fence = None;
                    }
                }
                None => {
                    fence = line::fence_open(text)
                        .filter(FenceOpen::opens_message_fence)
                        .map(|f| f.ticks);
                }
            },
            Some(b'@') if fence.is_none() => {
                if let Some(role) = line::role_marker(text) {
                    return Some((role, at));
                }
            }
            _ => {}
        }
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
    let body = Body {
        src,
        first: marker + 1,
        end: content_end,
        closers: OnceCell::new(),
        no_thinking_close_from: Cell::new(usize::MAX),
    };
    let segments = if body.first == body.end {
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
            Role::You => parse_you(&body, &mut out.diagnostics),
            _ => parse_segments(
                &src.join_cow(body.first, body.end - 1),
                src.number(body.first),
            ),
        }
    };
    out.messages.push(Message {
        role,
        segments,
        span,
    });
}

/// The content lines `first..end` (0-based) of one message.
#[derive(Debug)]
struct Body<'s, 'a> {
    src: &'s Source<'a>,
    first: usize,
    end: usize,
    /// Built on the first unclosed fence: see [`Body::closer_table`].
    closers: OnceCell<Vec<usize>>,
    /// No `</thinking>` line at or after this line.
    no_thinking_close_from: Cell<usize>,
}

impl Body<'_, '_> {
    /// The first non-blank line at or after `from`.
    fn next_non_blank(&self, from: usize) -> Option<usize> {
        (from..self.end).find(|&i| !line::is_blank(self.src.line(i)))
    }

    /// Reads the fenced block that must start at the first non-blank line after `header`.
    fn read_block(&self, header: usize) -> BlockRead {
        let Some(open_line) = self.next_non_blank(header + 1) else {
            return BlockRead::Missing { resume: self.end };
        };
        let Some(open) = line::fence_open(self.src.line(open_line)) else {
            return BlockRead::Missing { resume: open_line };
        };
        if self
            .closers
            .get()
            .is_some_and(|t| t[open_line + 1 - self.first] < open.ticks)
        {
            return BlockRead::Unclosed;
        }
        let Some(close) =
            (open_line + 1..self.end).find(|&i| line::closes_fence(self.src.line(i), open.ticks))
        else {
            // Remember which closers the rest of the message has, so that later unclosed
            // openers are detected without scanning again (no quadratic blow-up).
            self.closers.get_or_init(|| self.closer_table());
            return BlockRead::Unclosed;
        };
        BlockRead::Block(Block {
            content: self.src.join(open_line + 1, close - 1),
            layout: FenceLayout {
                language: (!open.language.is_empty()).then(|| open.language.to_owned()),
                info: open.info().map(str::to_owned),
                glued: open.glued().map(str::to_owned),
                blank_after_header: open_line > header + 1,
                ticks: open.ticks,
                closing_ticks: line::leading_ticks(self.src.line(close)),
            },
            close,
        })
    }

    /// For each line from `first` on: the most backticks of any fence closer at or after it.
    fn closer_table(&self) -> Vec<usize> {
        let mut table = vec![0; self.end - self.first + 1];
        for i in (self.first..self.end).rev() {
            let text = self.src.line(i);
            let ticks = line::leading_ticks(text);
            let closer = if ticks > 0 && line::closes_fence(text, ticks) {
                ticks
            } else {
                0
            };
            table[i - self.first] = closer.max(table[i + 1 - self.first]);
        }
        table
    }

    /// The first `</thinking>` line after `open`, remembering when there is none.
    fn thinking_close(&self, open: usize) -> Option<usize> {
        if open + 1 >= self.no_thinking_close_from.get() {
            return None;
        }
        let close = (open + 1..self.end)
            .find(|&j| line::thinking_tag(self.src.line(j)) == Some(ThinkingTag::Close));
        if close.is_none() {
            self.no_thinking_close_from.set(open + 1);
        }
        close
    }

    fn malformed(&self, first: usize, last: usize) -> Segment {
        Segment::Malformed(Malformed {
            text: self.src.join(first, last),
            span: self.src.span(first, last),
        })
    }
}

#[derive(Debug)]
enum BlockRead {
    Block(Block),
    /// No fence: parsing resumes at `resume`.
    Missing {
        resume: usize,
    },
    /// A fence that never closes: the rest of the message is skipped.
    Unclosed,
}

#[derive(Debug)]
struct Block {
    content: String,
    layout: FenceLayout,
    close: usize,
}

fn warning(kind: DiagnosticKind, message: impl Into<String>, line: u32) -> Diagnostic {
    Diagnostic {
        kind,
        severity: Severity::Warning,
        message: message.into(),
        line,
    }
}

/// Accumulates consecutive plain lines.
#[derive(Debug, Default)]
struct TextRun {
    start: Option<usize>,
}

impl TextRun {
    fn push(&mut self, i: usize) {
        self.start.get_or_insert(i);
    }

    /// Takes the run ending before line `end`, as `(first, last)`.
    fn take(&mut self, end: usize) -> Option<(usize, usize)> {
        self.start.take().map(|start| (start, end - 1))
    }
}

fn parse_assistant(body: &Body<'_, '_>, diagnostics: &mut Vec<Diagnostic>) -> Vec<Segment> {
    let src = body.src;
    let mut segments = Vec::new();
    let mut run = TextRun::default();
    let flush = |run: &mut TextRun, i: usize, segments: &mut Vec<Segment>| {
        if let Some((first, last)) = run.take(i) {
            segments.push(Segment::Text(Text {
                value: src.join(first, last),
                span: Some(TextSpan {
                    start_line: src.number(first),
                    start_col: 1,
                    end_line: src.number(last),
                    end_col: src.line(last).len() as u32,
                }),
            }));
        }
    };
    let mut i = body.first;
    while i < body.end {
        let text = src.line(i);
        match text.as_bytes().first() {
            Some(b'<') => {
                if let Some(tag) = line::thinking_tag(text) {
                    if let Some(next) = thinking(body, i, tag, &mut segments, diagnostics, |s| {
                        flush(&mut run, i, s);
                    }) {
                        i = next;
                        continue;
                    }
                } else if let Some(message) = line::abort_marker(text) {
                    flush(&mut run, i, &mut segments);
                    segments.push(Segment::Aborted(Aborted {
                        message: message.to_owned(),
                        span: body.src.span(i, i),
                    }));
                    i += 1;
                    continue;
                }
            }
            Some(b'*') => {
                if let Some((name, id)) = line::tool_use_header(text) {
                    flush(&mut run, i, &mut segments);
                    i = tool_use(body, i, name, id, &mut segments, diagnostics);
                    continue;
                }
            }
            _ => {}
        }
        run.push(i);
        i += 1;
    }
    flush(&mut run, body.end, &mut segments);
    segments
}

/// Handles a thinking tag on line `i`; returns the line to continue at, or `None` when the line
/// is plain text (a close tag without an open one, or an open tag that never closes).
fn thinking(
    body: &Body<'_, '_>,
    i: usize,
    tag: ThinkingTag<'_>,
    segments: &mut Vec<Segment>,
    diagnostics: &mut Vec<Diagnostic>,
    flush: impl FnOnce(&mut Vec<Segment>),
) -> Option<usize> {
    let signature = |(provider, value): (&str, &str)| Signature {
        provider: provider.to_owned(),
        value: value.to_owned(),
    };
    match tag {
        ThinkingTag::Close => None,
        ThinkingTag::SelfClosing { signature: sig } => {
            flush(segments);
            segments.push(Segment::Thinking(Box::new(Thinking {
                content: String::new(),
                signature: Some(signature(sig)),
                redacted: false,
                self_closing: true,
                span: body.src.span(i, i),
            })));
            Some(i + 1)
        }
        ThinkingTag::Open {
            redacted,
            signature: sig,
        } => {
            let Some(close) = body.thinking_close(i) else {
                diagnostics.push(warning(
                    DiagnosticKind::Thinking,
                    msg::UNCLOSED_THINKING,
                    body.src.number(i),
                ));
                return None;
            };
            flush(segments);
            segments.push(Segment::Thinking(Box::new(Thinking {
                content: body.src.join(i + 1, close - 1),
                signature: sig.map(signature),
                redacted,
                self_closing: false,
                span: body.src.span(i, close),
            })));
            Some(close + 1)
        }
    }
}

/// Reads the tool use whose header is on line `header`; returns the line to continue at.
fn tool_use(
    body: &Body<'_, '_>,
    header: usize,
    name: &str,
    id: &str,
    segments: &mut Vec<Segment>,
    diagnostics: &mut Vec<Diagnostic>,
) -> usize {
    let kind = DiagnosticKind::ToolUse;
    match body.read_block(header) {
        BlockRead::Missing { resume } => {
            diagnostics.push(warning(
                kind,
                msg::TOOL_USE_NO_FENCE,
                body.src.number(header),
            ));
            segments.push(body.malformed(header, resume - 1));
            resume
        }
        BlockRead::Unclosed => {
            diagnostics.push(warning(
                kind,
                msg::TOOL_USE_UNCLOSED,
                body.src.number(header),
            ));
            segments.push(body.malformed(header, body.end - 1));
            body.end
        }
        BlockRead::Block(block) => {
            let checked = ToolName::read(name)
                .and_then(|name| Ok((ToolUseId::from_header(id)?, name)))
                .map_err(|err| format!("{}{err}", msg::TOOL_USE_HEADER_PREFIX))
                .and_then(|ids| {
                    check_input(block.layout.language.as_deref(), &block.content)
                        .map(|()| ids)
                        .map_err(|detail| format!("{}{detail}", msg::TOOL_USE_PARSE_PREFIX))
                });
            match checked {
                Ok((id, name)) => segments.push(Segment::ToolUse(Box::new(ToolUse::from_checked(
                    id,
                    name,
                    block.content,
                    block.layout,
                    body.src.span(header, block.close),
                )))),
                Err(message) => {
                    diagnostics.push(warning(kind, message, body.src.number(header)));
                    segments.push(body.malformed(header, block.close));
                }
            }
            block.close + 1
        }
    }
}

/// Checks that a tool-use fence body decodes to a JSON object (the language defaults to
/// `json`), without building the value.
///
/// The check runs `serde_json`'s own decoder over the text ([`Checked`] accepts what
/// `serde_json::Value` accepts, storing nothing), so whatever passes here decodes later in
/// [`ToolUse::input`](crate::ToolUse::input): numbers out of range, lone surrogates and inputs
/// nested deeper than [`MAX_INPUT_DEPTH`] are refused here, with a diagnostic, instead of being
/// read later as an empty input.
fn check_input(language: Option<&str>, content: &str) -> Result<(), String> {
    let language = language.unwrap_or("json");
    if language != "json" {
        return Err(format!("{}{language}", msg::NO_PARSER_PREFIX));
    }
    let mut de = serde_json::Deserializer::from_str(content);
    // `Checked` bounds the depth itself (iteratively cheap: one counter per level), with a
    // message that says why; serde_json's own limit would stop at the same depth.
    de.disable_recursion_limit();
    let kind = serde::de::DeserializeSeed::deserialize(Checked { depth: 1 }, &mut de)
        .and_then(|kind| de.end().map(|()| kind))
        .map_err(|err| err.to_string())?;
    match kind {
        JsonKind::Object => Ok(()),
        other => Err(format!("{}{}", msg::INPUT_NOT_OBJECT_PREFIX, other.name())),
    }
}

/// The deepest nesting of arrays and objects a tool input may have, the input object itself
/// counting as 1: `serde_json`'s recursion limit, which [`ToolUse::input`](crate::ToolUse::input)
/// and the providers' stream decoders apply. A deeper input is a diagnostic, never a
/// truncated or empty input.
pub const MAX_INPUT_DEPTH: usize = 127;

/// The JSON type of a checked value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonKind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl JsonKind {
    fn name(self) -> &'static str {
        match self {
            JsonKind::Null => "null",
            JsonKind::Bool => "a boolean",
            JsonKind::Number => "a number",
            JsonKind::String => "a string",
            JsonKind::Array => "an array",
            JsonKind::Object => "an object",
        }
    }
}

/// Validates one JSON value at nesting `depth` the way `serde_json::Value` decodes it, keeping
/// only its type.
#[derive(Debug, Clone, Copy)]
struct Checked {
    depth: usize,
}

impl Checked {
    /// The seed for a value inside this container.
    fn inner(self) -> Self {
        Self {
            depth: self.depth + 1,
        }
    }

    /// Refuses a container deeper than [`MAX_INPUT_DEPTH`] before anything inside it is read,
    /// so the decoder's recursion stays bounded however deep the text nests.
    fn enter<E: serde::de::Error>(self) -> Result<(), E> {
        if self.depth > MAX_INPUT_DEPTH {
            return Err(E::custom(format_args!(
                "the input nests deeper than {MAX_INPUT_DEPTH} levels (the most a tool input may)"
            )));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Checked {
    type Value = JsonKind;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<JsonKind, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Checked {
    type Value = JsonKind;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<JsonKind, E> {
        Ok(JsonKind::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<JsonKind, E> {
        Ok(JsonKind::Bool)
    }

    fn visit_i64<E>(self, _: i64) -> Result<JsonKind, E> {
        Ok(JsonKind::Number)
    }

    fn visit_u64<E>(self, _: u64) -> Result<JsonKind, E> {
        Ok(JsonKind::Number)
    }

    fn visit_f64<E>(self, _: f64) -> Result<JsonKind, E> {
        Ok(JsonKind::Number)
    }

    fn visit_borrowed_str<E>(self, _: &'de str) -> Result<JsonKind, E> {
        Ok(JsonKind::String)
    }

    fn visit_str<E>(self, _: &str) -> Result<JsonKind, E> {
        Ok(JsonKind::String)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<JsonKind, A::Error> {
        self.enter()?;
        while seq.next_element_seed(self.inner())?.is_some() {}
        Ok(JsonKind::Array)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<JsonKind, A::Error> {
        self.enter()?;
        // A key is a string: it cannot nest, and it is checked as `Value` would check it.
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self.inner())?;
        }
        Ok(JsonKind::Object)
    }
}

fn parse_you(body: &Body<'_, '_>, diagnostics: &mut Vec<Diagnostic>) -> Vec<Segment> {
    let src = body.src;
    let mut segments = Vec::new();
    let mut run = TextRun::default();
    let flush = |run: &mut TextRun, i: usize, segments: &mut Vec<Segment>| {
        if let Some((first, last)) = run.take(i) {
            segments.extend(parse_segments(
                &src.join_cow(first, last),
                src.number(first),
            ));
        }
    };
    let mut i = body.first;
    while i < body.end {
        let text = src.line(i);
        if text.as_bytes().first() == Some(&b'*')
            && let Some(header) = line::result_header(text)
        {
            flush(&mut run, i, &mut segments);
            i = match header.kind {
                ResultKind::Job => job_result(body, i, header, &mut segments),
                ResultKind::Tool => tool_result(body, i, header, &mut segments, diagnostics),
            };
            continue;
        }
        run.push(i);
        i += 1;
    }
    flush(&mut run, body.end, &mut segments);
    segments
}

/// Splits a result header's modeline into a status and the remaining meta (spec §1.7).
fn status_and_meta(modeline: Option<&str>) -> (Option<ToolStatus>, Modeline) {
    let Some(text) = modeline else {
        return (None, Modeline::new());
    };
    let mut meta = modeline::parse(text);
    let status_key = Key::Named("status".to_owned());
    let keyed = meta
        .named("status")
        .and_then(Value::as_str)
        .and_then(ToolStatus::from_word);
    let status = if keyed.is_some() {
        meta.remove(&status_key);
        keyed
    } else {
        let found = meta
            .positionals()
            .enumerate()
            .find_map(|(i, v)| v.as_str().and_then(ToolStatus::from_word).map(|s| (i, s)));
        found.map(|(i, status)| {
            meta.remove(&Key::Positional(i as u32 + 1));
            status
        })
    };
    meta.renumber_positionals();
    (status, meta)
}

fn tool_result(
    body: &Body<'_, '_>,
    header_line: usize,
    header: ResultHeader<'_>,
    segments: &mut Vec<Segment>,
    diagnostics: &mut Vec<Diagnostic>,
) -> usize {
    let kind = DiagnosticKind::ToolResult;
    match body.read_block(header_line) {
        BlockRead::Missing { resume } => {
            diagnostics.push(warning(
                kind,
                msg::TOOL_RESULT_NO_FENCE,
                body.src.number(header_line),
            ));
            segments.push(body.malformed(header_line, resume - 1));
            resume
        }
        BlockRead::Unclosed => {
            diagnostics.push(warning(
                kind,
                msg::TOOL_RESULT_UNCLOSED,
                body.src.number(header_line),
            ));
            segments.push(body.malformed(header_line, body.end - 1));
            body.end
        }
        BlockRead::Block(block) => {
            // The fence language (`json`, `yaml`, ...) is not interpreted (spec §1.7): the
            // content is kept verbatim and never decoded, so it cannot be malformed.
            let (status, meta) = status_and_meta(header.modeline);
            segments.push(Segment::ToolResult(Box::new(ToolResult {
                // The header grammar only yields non-empty single-line ids.
                tool_use_id: ToolUseId::from_header(header.id)
                    .unwrap_or_else(|_| ToolUseId::sanitized(header.id)),
                status,
                meta,
                content: block.content,
                layout: block.layout,
                span: body.src.span(header_line, block.close),
            })));
            block.close + 1
        }
    }
}

fn job_result(
    body: &Body<'_, '_>,
    header_line: usize,
    header: ResultHeader<'_>,
    segments: &mut Vec<Segment>,
) -> usize {
    let (status, meta) = status_and_meta(header.modeline);
    let status = (status == Some(ToolStatus::Error)).then_some(JobStatus::Error);
    let job_id = JobId::from_header(header.id).unwrap_or_else(|_| JobId::sanitized(header.id));
    let (content, layout, end, next) = match body.read_block(header_line) {
        BlockRead::Block(block) => (
            block.content,
            Some(block.layout),
            block.close,
            block.close + 1,
        ),
        BlockRead::Missing { .. } | BlockRead::Unclosed => {
            (String::new(), None, header_line, header_line + 1)
        }
    };
    segments.push(Segment::JobResult(Box::new(JobResult {
        job_id,
        status,
        meta,
        content,
        layout,
        span: body.src.span(header_line, end),
    })));
    next
}
