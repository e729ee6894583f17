//! The content of a `@You:` message: text, tool results, job results and compaction blocks, and
//! the units the incremental parser resumes at.

use crate::ast::{
    Compaction, Diagnostic, DiagnosticKind, JobResult, JobStatus, Segment, ToolResult, ToolStatus,
};
use crate::content::{BlockRead, Body, TextRun};
use crate::line::{self, ResultHeader, ResultKind};
use crate::messages as msg;
use crate::modeline::{self, Key, Modeline, Value};
use crate::template::parse_segments;
use flemma_ids::{JobId, ToolUseId};

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
        if text.as_bytes().first() == Some(&b'*')
            && let Some(header) = line::compaction_header(text)
        {
            flush(&mut run, i, &mut segments);
            if let Some(track) = track.as_deref_mut() {
                track.mark(body, i, segments.len(), diagnostics.len());
            }
            i = compaction(body, i, header.modeline, &mut segments, diagnostics);
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

/// Splits a result header's modeline into a status and the remaining meta.
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
    let block = match body.read_block_or_malformed(
        header_line,
        DiagnosticKind::ToolResult,
        msg::TOOL_RESULT_NO_FENCE,
        msg::TOOL_RESULT_UNCLOSED,
        segments,
        diagnostics,
    ) {
        Ok(block) => block,
        Err(resume) => return resume,
    };
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

fn compaction(
    body: &Body<'_, '_>,
    header_line: usize,
    modeline: Option<&str>,
    segments: &mut Vec<Segment>,
    diagnostics: &mut Vec<Diagnostic>,
) -> usize {
    let block = match body.read_block_or_malformed(
        header_line,
        DiagnosticKind::Compaction,
        msg::COMPACTION_NO_FENCE,
        msg::COMPACTION_UNCLOSED,
        segments,
        diagnostics,
    ) {
        Ok(block) => block,
        Err(resume) => return resume,
    };
    segments.push(Segment::Compaction(Box::new(Compaction {
        meta: modeline.map(modeline::parse).unwrap_or_default(),
        content: block.content,
        layout: block.layout,
        span: body.src.span(header_line, block.close),
    })));
    block.close + 1
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
