//! The content of one message: text runs, thinking blocks, tool uses and results (spec §1.5-§1.10).

use std::cell::{Cell, OnceCell};

use crate::ast::{
    Aborted, Diagnostic, DiagnosticKind, FenceLayout, JobResult, JobStatus, Malformed, Segment,
    Severity, Signature, Text, TextSpan, Thinking, ToolResult, ToolStatus, ToolUse,
};
use crate::input::check_input;
use crate::line::{self, ResultHeader, ResultKind, ThinkingTag};
use crate::messages as msg;
use crate::modeline::{self, Key, Modeline, Value};
use crate::source::Source;
use crate::template::parse_segments;
use flemma_ids::{JobId, ToolName, ToolUseId};

/// The content lines `first..end` (0-based) of one message.
#[derive(Debug)]
pub(crate) struct Body<'s, 'a> {
    src: &'s Source<'a>,
    first: usize,
    end: usize,
    /// Built on the first unclosed fence: see [`Body::closer_table`].
    closers: OnceCell<Vec<usize>>,
    /// No `</thinking>` line at or after this line.
    no_thinking_close_from: Cell<usize>,
    /// A block was read to `end` without finding its fence or its closer: what it became
    /// depends on where the message ends.
    reached_end: Cell<bool>,
    /// The last line a block read looked at (`end` when it read to the end).
    examined: Cell<usize>,
}

impl<'s, 'a> Body<'s, 'a> {
    /// The lines `first..end` of `src`.
    pub(crate) fn new(src: &'s Source<'a>, first: usize, end: usize) -> Self {
        Self {
            src,
            first,
            end,
            closers: OnceCell::new(),
            no_thinking_close_from: Cell::new(usize::MAX),
            reached_end: Cell::new(false),
            examined: Cell::new(0),
        }
    }

    /// Whether the body has no lines.
    pub(crate) fn is_empty(&self) -> bool {
        self.first == self.end
    }

    /// Whether a block was read up to the end of the body (see [`Body::reached_end`]).
    pub(crate) fn reached_end(&self) -> bool {
        self.reached_end.get()
    }

    /// The first non-blank line at or after `from`.
    fn next_non_blank(&self, from: usize) -> Option<usize> {
        (from..self.end).find(|&i| !line::is_blank(self.src.line(i)))
    }

    /// Reads the fenced block that must start at the first non-blank line after `header`.
    fn read_block(&self, header: usize) -> BlockRead {
        let read = self.read_block_to_end(header);
        let last_read = match &read {
            BlockRead::Block(block) => block.close,
            BlockRead::Missing { resume } => *resume,
            BlockRead::Unclosed => self.end,
        };
        if last_read >= self.end {
            self.reached_end.set(true);
        }
        self.examined.set(self.examined.get().max(last_read));
        read
    }

    fn read_block_to_end(&self, header: usize) -> BlockRead {
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

pub(crate) fn parse_assistant(
    body: &Body<'_, '_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Segment> {
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

/// Where the content parse of a `@You:` message starts afresh: the first line of a text run or
/// of a result block. The incremental parser resumes there instead of at the message's marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    /// Byte offset of its first line, counted from the message's marker.
    pub(crate) offset: usize,
    /// Its first line, counted from the marker's line.
    pub(crate) line: u32,
    /// Index of its first segment in the message.
    pub(crate) segment: u32,
    /// Number of the message's diagnostics before it.
    pub(crate) diagnostic: u32,
    /// Backticks of the message-level fence open before its first line, as the message
    /// segmenter tracks it ([`line::message_fence`]); 0 when none is open.
    pub(crate) fence: u32,
    /// The last line (counted from the marker's) that this unit's parse, or an earlier unit's,
    /// looked at: a change after it leaves this unit and those before it as they are.
    /// `u32::MAX` when it depends on where the message ends.
    pub(crate) reach: u32,
}

/// Records the [`Unit`]s of a `@You:` message while [`parse_you`] parses it.
#[derive(Debug)]
pub(crate) struct UnitTrack {
    pub(crate) units: Vec<Unit>,
    /// Byte offset and 1-based line of the message's marker.
    marker: (usize, u32),
    /// Added to the segment and diagnostic counts (the units before a partial parse's first).
    base: (u32, u32),
    /// Length of the diagnostics list when the parse began.
    diagnostics_start: usize,
    /// Next line the fence state has not seen, and the state before it.
    cursor: usize,
    fence: u32,
    /// The reach of the units before the first one recorded.
    reach: u32,
    /// The body ended inside a text run.
    pub(crate) ended_in_run: bool,
}

impl UnitTrack {
    /// A track for a parse whose first line is `first` of `src`, with `fence` open before it.
    pub(crate) fn new(
        marker: (usize, u32),
        base: (u32, u32),
        diagnostics_start: usize,
        first: usize,
        (fence, reach): (u32, u32),
    ) -> Self {
        Self {
            units: Vec::new(),
            marker,
            base,
            diagnostics_start,
            cursor: first,
            fence,
            reach,
            ended_in_run: false,
        }
    }

    /// A unit starts at line `i`; the one before it looked at lines up to `examined` and `i`.
    fn mark(&mut self, body: &Body<'_, '_>, i: usize, segments: usize, diagnostics: usize) {
        let src = body.src;
        for j in self.cursor..i {
            self.fence = line::message_fence(self.fence, src.line(j)).0;
        }
        self.cursor = i;
        let line = src.number(i) - self.marker.1;
        self.close_last(body, i, false);
        self.units.push(Unit {
            offset: src.start(i) - self.marker.0,
            line,
            segment: segments as u32 + self.base.0,
            diagnostic: (diagnostics - self.diagnostics_start) as u32 + self.base.1,
            fence: self.fence,
            reach: line,
        });
    }

    /// Sets the reach of the last unit, which ended before line `next`. A block read to the end
    /// of the body, and at the end of the message (`message_end`) a text run, depend on where
    /// the message ends.
    fn close_last(&mut self, body: &Body<'_, '_>, next: usize, message_end: bool) {
        let Some(last) = self.units.last_mut() else {
            return;
        };
        let examined = body.examined.get();
        let reach = if examined >= body.end || (message_end && self.ended_in_run) {
            u32::MAX
        } else {
            body.src.number(examined.max(next)) - self.marker.1
        };
        self.reach = self.reach.max(reach).max(last.reach);
        last.reach = self.reach;
    }
}

/// Parses the content of a `@You:` message (text and result blocks), recording its [`Unit`]s
/// in `track` when given. `message_end`: the body ends where the message's content ends (not a
/// partial parse stopped before a unit).
pub(crate) fn parse_you(
    body: &Body<'_, '_>,
    diagnostics: &mut Vec<Diagnostic>,
    mut track: Option<&mut UnitTrack>,
    message_end: bool,
) -> Vec<Segment> {
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
            if let Some(track) = track.as_deref_mut() {
                track.mark(body, i, segments.len(), diagnostics.len());
            }
            i = match header.kind {
                ResultKind::Job => job_result(body, i, header, &mut segments),
                ResultKind::Tool => tool_result(body, i, header, &mut segments, diagnostics),
            };
            continue;
        }
        if run.start.is_none()
            && let Some(track) = track.as_deref_mut()
        {
            track.mark(body, i, segments.len(), diagnostics.len());
        }
        run.push(i);
        i += 1;
    }
    if let Some(track) = track {
        track.ended_in_run = run.start.is_some();
        track.close_last(body, body.end, message_end);
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
