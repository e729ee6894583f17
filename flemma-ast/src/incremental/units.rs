//! Re-parsing inside one `@You:` message: from the text run or result block before a change to
//! the first one after it that is unchanged, so that writing one result into a message of
//! 10,000 costs that result, not the message.

use crate::ast::{Document, Message, Role, Segment};
use crate::content::Body;
use crate::line;
use crate::parser::LineIter;
use crate::results::{Unit, UnitTrack, parse_you};
use crate::source::Source;

/// What the incremental parser holds: the changed text, and the document, message markers and
/// units of the previous text.
pub(super) struct State<'p> {
    pub(super) text: &'p str,
    pub(super) doc: &'p mut Document,
    pub(super) markers: &'p mut [usize],
    pub(super) units: &'p mut [Vec<Unit>],
}

/// Re-parses a change (the text before byte `first` as before, the text from `new_end` on the
/// previous text from `old_end` on) inside the `@You:` message holding the line before it,
/// when the change stays inside that message and leaves its end where it was. Returns the
/// number of bytes parsed, or `None`, having changed nothing, when it does not apply; the caller
/// then re-parses whole messages.
///
/// The parse resumes at the last [`Unit`] that starts before the changed line (a unit only
/// depends on the lines from its start to the end of its message), with the message-level
/// fence state recorded for it, and stops at the first unit boundary after the change where an
/// old unit started with the same fence state: from there on the bytes, the fence state and so
/// the message's end are as before, hence so are the units.
pub(super) fn reparse_in_message(
    state: State<'_>,
    first: usize,
    old_end: usize,
    new_end: usize,
) -> Option<usize> {
    let change = Change {
        old_end,
        new_end,
        old_len: state.text.len() - new_end + old_end,
    };
    let (i, c) = resume_point(&state, first, &change)?;
    let scan = scan(&state, i, c, &change)?;
    let old_units = &state.units[i];
    let resume = old_units[c];
    let marker = state.markers[i];
    let marker_line = state.doc.messages[i].span.start_line;
    let src = Source::from_parts(state.text, scan.base, scan.table);
    let end = if scan.same_from.is_some() {
        src.len()
    } else {
        let mut end = src.len();
        while end > 0 && src.line(end - 1).is_empty() {
            end -= 1;
        }
        end
    };
    if end == 0 {
        // The content may end before the resume point: not this function's case.
        return None;
    }
    let body = Body::new(&src, 0, end);
    let mut diagnostics = Vec::new();
    let floor = c.checked_sub(1).map_or(0, |b| old_units[b].reach);
    let mut track = UnitTrack::new(
        (marker, marker_line),
        (resume.segment, resume.diagnostic),
        0,
        0,
        (resume.fence, floor),
    );
    let message_end = scan.same_from.is_none();
    let segments = parse_you(&body, &mut diagnostics, Some(&mut track), message_end);
    if let Some((_, stop_line)) = scan.same_from {
        // What was parsed must end at that unit as the whole message would: no block read to
        // the end of the lines parsed (it would read on in the message), and no text run
        // running into a unit that is a text run too (they would be one).
        let header_follows = stop_line.starts_with('*') && line::result_header(stop_line).is_some();
        if body.reached_end() || (track.ended_in_run && !header_follows) {
            return None;
        }
    }
    let parsed = Parsed {
        message: i,
        unit: c,
        same_from: scan.same_from.map(|(u, _)| u),
        new_line: scan.stop_line,
        segments,
        diagnostics,
        units: track.units,
    };
    splice(state, parsed, &change);
    Some(scan.stop - (marker + resume.offset))
}

/// The extent of a change: the text from `new_end` on is the previous text from `old_end` on,
/// which was `old_len` bytes long.
struct Change {
    old_end: usize,
    new_end: usize,
    old_len: usize,
}

impl Change {
    /// The offset in the previous text of `at`, a byte at or after the change.
    fn old(&self, at: usize) -> Option<usize> {
        (at >= self.new_end).then(|| at - self.new_end + self.old_end)
    }
}

/// The `@You:` message holding the line before the change and the unit to resume at: the
/// first that looked at the changed line or later (those before it are as they were).
fn resume_point(state: &State<'_>, first: usize, change: &Change) -> Option<(usize, usize)> {
    let text = state.text;
    let line_start = memchr::memrchr(b'\n', &text.as_bytes()[..first]).map_or(0, |i| i + 1);
    let i = state
        .markers
        .partition_point(|&m| m < line_start)
        .checked_sub(1)?;
    if state.doc.messages[i].role != Role::You {
        return None;
    }
    let marker = state.markers[i];
    let next = state.markers.get(i + 1).copied().unwrap_or(change.old_len);
    if change.old_end > next {
        return None;
    }
    let units = &state.units[i];
    let last_before = match units.partition_point(|u| marker + u.offset < line_start) {
        // The change starts on the first line after the marker: the first unit's.
        0 if line_start > marker && !units.is_empty() => 0,
        n => n.checked_sub(1)?,
    };
    let from = marker + units[last_before].offset;
    let newlines = memchr::memchr_iter(b'\n', &text.as_bytes()[from..line_start]).count();
    let changed_line = units[last_before].line + u32::try_from(newlines).ok()?;
    let c = units
        .partition_point(|u| u.reach < changed_line)
        .min(last_before);
    Some((i, c))
}

/// The lines from a resume point on, up to where the message is as before.
struct Scan<'t> {
    /// 0-based line of the first.
    base: usize,
    table: Vec<(usize, usize)>,
    /// The old unit from which the message is as before, and its first line; `None` when the
    /// scan reached the message's end (which is where it was).
    same_from: Option<(usize, &'t str)>,
    /// Byte offset and 0-based line where the scan stopped.
    stop: usize,
    stop_line: usize,
}

/// Collects the lines from unit `c` of message `i` to the first old unit that starts where it
/// started with the same fence open, or to the message's end, which must be where it was.
fn scan<'t>(state: &State<'t>, i: usize, c: usize, change: &Change) -> Option<Scan<'t>> {
    let marker = state.markers[i];
    let units = &state.units[i];
    let resume = units[c];
    let base = (state.doc.messages[i].span.start_line + resume.line) as usize - 1;
    let mut lines = LineIter::new(state.text, marker + resume.offset, base);
    let mut fence = resume.fence;
    let mut table = Vec::new();
    let mut same_from = None;
    let mut at_marker = false;
    while let Some(at) = lines.peek() {
        if let Some(old) = change.old(at.start)
            && let Ok(u) = units.binary_search_by_key(&old, |u| marker + u.offset)
            && units[u].fence == fence
        {
            same_from = Some((u, lines.str(at)));
            break;
        }
        let (after, is_marker) = line::message_fence(fence, lines.str(at));
        if is_marker {
            // The message must end where it did: at the next message's marker.
            if change.old(at.start).is_none()
                || change.old(at.start) != state.markers.get(i + 1).copied()
            {
                return None;
            }
            at_marker = true;
            break;
        }
        fence = after;
        table.push((at.start, at.end));
        lines.advance(at);
    }
    if same_from.is_none() && !at_marker && i + 1 != state.markers.len() {
        return None;
    }
    Some(Scan {
        base,
        table,
        same_from,
        stop: lines.pos(),
        stop_line: lines.number,
    })
}

/// What a partial parse of message `message` from unit `unit` produced.
struct Parsed {
    message: usize,
    unit: usize,
    /// The old unit it stopped at (`None`: it reached the message's end).
    same_from: Option<usize>,
    /// The 0-based line where it stopped.
    new_line: usize,
    segments: Vec<Segment>,
    diagnostics: Vec<crate::ast::Diagnostic>,
    units: Vec<Unit>,
}

/// Puts what was parsed in place of what it replaces and moves what follows.
fn splice(state: State<'_>, parsed: Parsed, change: &Change) {
    let State {
        doc,
        markers,
        units,
        ..
    } = state;
    let Parsed {
        message: i,
        unit: c,
        same_from,
        new_line,
        segments,
        diagnostics,
        units: new_units,
    } = parsed;
    let old_units = &units[i];
    let resume = old_units[c];
    let message = &doc.messages[i];
    let first_diag = doc
        .diagnostics
        .partition_point(|d| d.line < message.span.start_line);
    let (old_line, seg_end, diag_end, unit_end) =
        old_reach(doc, old_units, i, same_from, first_diag);
    let shift = line_delta(new_line, old_line);
    let seg_start = resume.segment as usize;
    let (parsed_segments, parsed_diagnostics, parsed_units) =
        (segments.len(), diagnostics.len(), new_units.len());
    let message = &mut doc.messages[i];
    message.segments.splice(seg_start..seg_end, segments);
    message.span.end_line = message.span.end_line.wrapping_add_signed(shift);
    let diag_start = first_diag + resume.diagnostic as usize;
    doc.diagnostics
        .splice(diag_start..first_diag + diag_end, diagnostics);
    units[i].splice(c..unit_end, new_units);
    // Counts after the stop move from the old ends to the new ones.
    let (old_seg, new_seg) = (seg_end as u32, (seg_start + parsed_segments) as u32);
    let (old_diag, new_diag) = (
        diag_end as u32,
        resume.diagnostic + parsed_diagnostics as u32,
    );
    for unit in &mut units[i][c + parsed_units..] {
        unit.offset = unit.offset + change.new_end - change.old_end;
        unit.line = unit.line.wrapping_add_signed(shift);
        if unit.reach != u32::MAX {
            unit.reach = unit.reach.wrapping_add_signed(shift);
        }
        unit.segment = unit.segment - old_seg + new_seg;
        unit.diagnostic = unit.diagnostic - old_diag + new_diag;
    }
    for marker in &mut markers[i + 1..] {
        *marker = *marker + change.new_end - change.old_end;
    }
    if shift != 0 {
        let message = &mut doc.messages[i];
        for segment in &mut message.segments[seg_start + parsed_segments..] {
            shift_segment(segment, shift);
        }
        for message in &mut doc.messages[i + 1..] {
            shift_message(message, shift);
        }
        for d in &mut doc.diagnostics[diag_start + parsed_diagnostics..] {
            d.line = d.line.wrapping_add_signed(shift);
        }
        doc.line_count = doc.line_count.wrapping_add_signed(shift);
    }
}

/// Where the old parse of message `i` reached the point the new one stopped at (unit
/// `same_from`, else the message's end): its 0-based line, and the message's segment,
/// diagnostic (counted from `first_diag`) and unit there.
fn old_reach(
    doc: &Document,
    old_units: &[Unit],
    i: usize,
    same_from: Option<usize>,
    first_diag: usize,
) -> (usize, usize, usize, usize) {
    let message = &doc.messages[i];
    if let Some(u) = same_from {
        let unit = old_units[u];
        (
            (message.span.start_line + unit.line) as usize - 1,
            unit.segment as usize,
            unit.diagnostic as usize,
            u,
        )
    } else {
        let end_diag = doc
            .diagnostics
            .partition_point(|d| d.line <= message.span.end_line);
        let old_line = match doc.messages.get(i + 1) {
            Some(next) => next.span.start_line as usize - 1,
            None => doc.line_count as usize,
        };
        (
            old_line,
            message.segments.len(),
            end_diag - first_diag,
            old_units.len(),
        )
    }
}

/// `new - old` for line numbers (which fit in `i32`: lines are counted in `u32`).
fn line_delta(new: usize, old: usize) -> i32 {
    if new >= old {
        i32::try_from(new - old).unwrap_or(i32::MAX)
    } else {
        i32::try_from(old - new).map_or(i32::MIN, |d| -d)
    }
}

/// Moves every position in `message` by `by` lines.
pub(super) fn shift_message(message: &mut Message, by: i32) {
    message.span.start_line = message.span.start_line.wrapping_add_signed(by);
    message.span.end_line = message.span.end_line.wrapping_add_signed(by);
    for segment in &mut message.segments {
        shift_segment(segment, by);
    }
}

/// Moves every position in `segment` by `by` lines.
fn shift_segment(segment: &mut Segment, by: i32) {
    let line = |l: &mut u32| *l = l.wrapping_add_signed(by);
    let span = match segment {
        Segment::Text(t) => match &mut t.span {
            Some(s) => {
                line(&mut s.start_line);
                line(&mut s.end_line);
                return;
            }
            None => return,
        },
        Segment::Expression(t) | Segment::Code(t) => {
            line(&mut t.span.start_line);
            line(&mut t.span.end_line);
            return;
        }
        Segment::Thinking(t) => &mut t.span,
        Segment::ToolUse(t) => &mut t.span,
        Segment::ToolResult(t) => &mut t.span,
        Segment::JobResult(t) => &mut t.span,
        Segment::Compaction(t) => &mut t.span,
        Segment::Aborted(t) => &mut t.span,
        Segment::Malformed(t) => &mut t.span,
    };
    line(&mut span.start_line);
    line(&mut span.end_line);
}
