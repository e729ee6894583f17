//! The content of one message: the body's block reader, and an `@Assistant:` message's text,
//! thinking blocks, abort markers and tool uses.

use std::cell::{Cell, OnceCell};

use crate::ast::{
    Aborted, Diagnostic, DiagnosticKind, FenceLayout, Malformed, Segment, Signature, Text,
    TextSpan, Thinking, ToolUse,
};
use crate::input::check_input;
use crate::line::{self, ThinkingTag};
use crate::messages as msg;
use crate::source::Source;
use flemma_ids::{Severity, ToolName, ToolUseId};

/// The content lines `first..end` (0-based) of one message.
#[derive(Debug)]
pub(crate) struct Body<'s, 'a> {
    pub(crate) src: &'s Source<'a>,
    pub(crate) first: usize,
    pub(crate) end: usize,
    /// Built on the first unclosed fence: see [`Body::closer_table`].
    closers: OnceCell<Vec<usize>>,
    /// No `</thinking>` line at or after this line.
    no_thinking_close_from: Cell<usize>,
    /// A block was read to `end` without finding its fence or its closer: what it became
    /// depends on where the message ends.
    reached_end: Cell<bool>,
    /// The last line a block read looked at (`end` when it read to the end).
    pub(crate) examined: Cell<usize>,
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
    pub(crate) fn read_block(&self, header: usize) -> BlockRead {
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

    /// Reads the fenced block of the header on line `header` ([`Body::read_block`]). Without
    /// one, the header and the lines read are kept as [`Segment::Malformed`] with the warning
    /// `no_fence` (no fence follows the header) or `unclosed` (the fence never closes), and
    /// the line to continue at is the error.
    pub(crate) fn read_block_or_malformed(
        &self,
        header: usize,
        kind: DiagnosticKind,
        no_fence: &str,
        unclosed: &str,
        segments: &mut Vec<Segment>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Result<Block, usize> {
        match self.read_block(header) {
            BlockRead::Block(block) => Ok(block),
            BlockRead::Missing { resume } => {
                diagnostics.push(warning(kind, no_fence, self.src.number(header)));
                segments.push(self.malformed(header, resume - 1));
                Err(resume)
            }
            BlockRead::Unclosed => {
                diagnostics.push(warning(kind, unclosed, self.src.number(header)));
                segments.push(self.malformed(header, self.end - 1));
                Err(self.end)
            }
        }
    }

    pub(crate) fn malformed(&self, first: usize, last: usize) -> Segment {
        Segment::Malformed(Malformed {
            text: self.src.join(first, last),
            span: self.src.span(first, last),
        })
    }
}

#[derive(Debug)]
pub(crate) enum BlockRead {
    Block(Block),
    /// No fence: parsing resumes at `resume`.
    Missing {
        resume: usize,
    },
    /// A fence that never closes: the rest of the message is skipped.
    Unclosed,
}

#[derive(Debug)]
pub(crate) struct Block {
    pub(crate) content: String,
    pub(crate) layout: FenceLayout,
    pub(crate) close: usize,
}

pub(crate) fn warning(kind: DiagnosticKind, message: impl Into<String>, line: u32) -> Diagnostic {
    Diagnostic {
        kind,
        severity: Severity::Warning,
        message: message.into(),
        line,
    }
}

/// Accumulates consecutive plain lines.
#[derive(Debug, Default)]
pub(crate) struct TextRun {
    pub(crate) start: Option<usize>,
}

impl TextRun {
    pub(crate) fn push(&mut self, i: usize) {
        self.start.get_or_insert(i);
    }

    /// Takes the run ending before line `end`, as `(first, last)`.
    pub(crate) fn take(&mut self, end: usize) -> Option<(usize, usize)> {
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
    let block = match body.read_block_or_malformed(
        header,
        kind,
        msg::TOOL_USE_NO_FENCE,
        msg::TOOL_USE_UNCLOSED,
        segments,
        diagnostics,
    ) {
        Ok(block) => block,
        Err(resume) => return resume,
    };
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
