//! The document parser: frontmatter, message segmentation and per-role content (spec §1).

use crate::ast::{
    Aborted, Diagnostic, DiagnosticKind, Document, FenceLayout, Frontmatter, JobResult, JobStatus,
    LineSpan, Malformed, Message, Role, Segment, Severity, Signature, Text, TextSpan, Thinking,
    ToolResult, ToolStatus, ToolUse,
};
use crate::error::AstError;
use crate::ids::{JobId, ToolName, ToolUseId};
use crate::line::{self, FenceOpen, ResultHeader, ResultKind, ThinkingTag};
use crate::messages as msg;
use crate::modeline::{self, Key, Modeline, Value};
use crate::source::Source;
use crate::template::parse_segments;

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
    let src = Source::new(text);
    let mut body_start = 0;
    let frontmatter = parse_frontmatter(&src).inspect(|fm| body_start = fm.span.end_line as usize);
    let mut out = Output::default();
    let preamble = parse_body(&src, body_start, &mut out);
    Document {
        frontmatter,
        preamble,
        messages: out.messages,
        diagnostics: out.diagnostics,
        line_count: src.len() as u32,
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
}

fn parse_frontmatter(src: &Source<'_>) -> Option<Frontmatter> {
    if src.len() == 0 {
        return None;
    }
    let language = line::frontmatter_open(src.line(0))?;
    let close = (1..src.len()).find(|&i| line::is_frontmatter_close(src.line(i)))?;
    Some(Frontmatter {
        language: language.to_owned(),
        code: src.join(1, close - 1),
        span: src.span(0, close),
    })
}

/// Parses lines `first..` as messages into `out`; returns the preamble before the first marker.
pub(crate) fn parse_body(src: &Source<'_>, first: usize, out: &mut Output) -> Option<String> {
    let Some(first_marker) = (first..src.len()).find(|&i| line::role_marker(src.line(i)).is_some())
    else {
        return preamble(src, first, src.len());
    };
    let preamble = preamble(src, first, first_marker);
    let mut start = first_marker;
    while start < src.len() {
        let role = line::role_marker(src.line(start)).unwrap_or_default();
        let end = message_end(src, start + 1);
        parse_message(src, Role::from_marker(role), start, end, out);
        start = end;
    }
    preamble
}

fn preamble(src: &Source<'_>, first: usize, end: usize) -> Option<String> {
    let last = (first..end).rev().find(|&i| !src.line(i).is_empty())?;
    Some(src.join(first, last))
}

/// The index of the next role marker outside a fence, or the line count.
fn message_end(src: &Source<'_>, from: usize) -> usize {
    let mut fence: Option<usize> = None;
    for i in from..src.len() {
        let text = src.line(i);
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
            Some(b'@') if fence.is_none() && line::role_marker(text).is_some() => return i,
            _ => {}
        }
    }
    src.len()
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
        let Some(close) =
            (open_line + 1..self.end).find(|&i| line::closes_fence(self.src.line(i), open.ticks))
        else {
            return BlockRead::Unclosed;
        };
        BlockRead::Block(Block {
            open: open_line,
            content: self.src.join(open_line + 1, close - 1),
            layout: FenceLayout {
                language: (!open.language.is_empty()).then(|| open.language.to_owned()),
                info: open.info().map(str::to_owned),
                blank_after_header: open_line > header + 1,
            },
            close,
        })
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
    open: usize,
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
            segments.push(Segment::Thinking(Thinking {
                content: String::new(),
                signature: Some(signature(sig)),
                redacted: false,
                span: body.src.span(i, i),
            }));
            Some(i + 1)
        }
        ThinkingTag::Open {
            redacted,
            signature: sig,
        } => {
            let Some(close) = (i + 1..body.end)
                .find(|&j| line::thinking_tag(body.src.line(j)) == Some(ThinkingTag::Close))
            else {
                diagnostics.push(warning(
                    DiagnosticKind::Thinking,
                    msg::UNCLOSED_THINKING,
                    body.src.number(i),
                ));
                return None;
            };
            flush(segments);
            segments.push(Segment::Thinking(Thinking {
                content: body.src.join(i + 1, close - 1),
                signature: sig.map(signature),
                redacted,
                span: body.src.span(i, close),
            }));
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
            match decode_input(block.layout.language.as_deref(), &block.content) {
                Ok(input) => segments.push(Segment::ToolUse(ToolUse {
                    id: ToolUseId::from_grammar(id),
                    name: ToolName::from_grammar(name),
                    input,
                    raw_input: block.content,
                    layout: block.layout,
                    span: body.src.span(header, block.close),
                })),
                Err(detail) => {
                    diagnostics.push(warning(
                        kind,
                        format!("{}{detail}", msg::TOOL_USE_PARSE_PREFIX),
                        body.src.number(header),
                    ));
                    segments.push(body.malformed(header, block.close));
                }
            }
            block.close + 1
        }
    }
}

/// Decodes a tool-use fence body (the language defaults to `json`).
fn decode_input(language: Option<&str>, content: &str) -> Result<serde_json::Value, String> {
    let language = language.unwrap_or("json");
    if language != "json" {
        return Err(format!("{}{language}", msg::NO_PARSER_PREFIX));
    }
    match serde_json::from_str::<serde_json::Value>(content) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!(
            "{}{}",
            msg::INPUT_NOT_OBJECT_PREFIX,
            json_type(&other)
        )),
        Err(err) => Err(err.to_string()),
    }
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
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
            let (status, meta) = status_and_meta(header.modeline);
            let is_final = status.is_none_or(|s| !s.is_lifecycle());
            let content_line = body.src.number(block.open + 1);
            let inner = if is_final {
                parse_segments(&block.content, content_line)
            } else {
                Vec::new()
            };
            if is_final
                && block.layout.language.as_deref() == Some("json")
                && !block.content.trim().is_empty()
                && let Err(err) = serde_json::from_str::<serde::de::IgnoredAny>(&block.content)
            {
                diagnostics.push(warning(
                    kind,
                    format!("{}{err}", msg::TOOL_RESULT_JSON_PREFIX),
                    body.src.number(header_line),
                ));
            }
            segments.push(Segment::ToolResult(ToolResult {
                tool_use_id: ToolUseId::from_grammar(header.id),
                status,
                meta,
                content: block.content,
                segments: inner,
                layout: block.layout,
                span: body.src.span(header_line, block.close),
            }));
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
    let job_id = JobId::from_grammar(header.id);
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
    segments.push(Segment::JobResult(JobResult {
        job_id,
        status,
        meta,
        content,
        layout,
        span: body.src.span(header_line, end),
    }));
    next
}
