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
    let State {
        text,
        doc,
        markers,
        units,
    } = state;
    let old_len = text.len() - new_end + old_end;
    let line_start = memchr::memrchr(b'\n', &text.as_bytes()[..first]).map_or(0, |i| i + 1);
    let i = markers
        .partition_point(|&m| m < line_start)
        .checked_sub(1)?;
    if doc.messages[i].role != Role::You {
        return None;
    }
    let marker = markers[i];
    let old_units = &units[i];
    // The last unit that starts before the changed line, then the first unit that looked at
    // that line or later (the units before it are as they were).
    let last_before = match old_units.partition_point(|u| marker + u.offset < line_start) {
        // The change starts on the first line after the marker: the first unit's.
        0 if line_start > marker && !old_units.is_empty() => 0,
        n => n.checked_sub(1)?,
    };
    let from = marker + old_units[last_before].offset;
    let changed_line = old_units[last_before].line
        + memchr::memchr_iter(b'\n', &text.as_bytes()[from..line_start]).count() as u32;
    let c = old_units
        .partition_point(|u| u.reach < changed_line)
        .min(last_before);
    if old_end > markers.get(i + 1).copied().unwrap_or(old_len) {
        return None;
    }
    let resume = old_units[c];
    let marker_line = doc.messages[i].span.start_line;
    let base = (marker_line + resume.line) as usize - 1;

    // The lines from the resume point to the first old unit that starts where it started, with
    // the same fence open (or to the message's end).
    let mut lines = LineIter::new(text, marker + resume.offset, base);
    let mut fence = resume.fence;
    let mut table = Vec::new();
    let mut same_from = None;
    let mut next_marker = false;
    while let Some(at) = lines.peek() {
        if at.start >= new_end
            && let Ok(u) = old_units
                .binary_search_by_key(&(at.start - new_end + old_end), |u| marker + u.offset)
            && old_units[u].fence == fence
        {
            same_from = Some((u, lines.str(at)));
            break;
        }
        let (after, is_marker) = line::message_fence(fence, lines.str(at));
        if is_marker {
            // The message must end where it did: at the next message's marker.
            let old = (at.start >= new_end).then(|| at.start - new_end + old_end);
            if old.is_none() || old != markers.get(i + 1).copied() {
                return None;
            }
            next_marker = true;
            break;
        }
        fence = after;
        table.push((at.start, at.end));
        lines.advance(at);
    }
    if same_from.is_none() && !next_marker && i + 1 != markers.len() {
        return None;
    }

    let src = Source::from_parts(text, base, table);
    let end = match same_from {
        Some(_) => src.len(),
        None => {
            let mut end = src.len();
            while end > 0 && src.line(end - 1).is_empty() {
                end -= 1;
            }
            end
        }
    };
    if end == 0 {
        // The content may end before the resume point: not this function's case.
        return None;
    }
    let body = Body::new(&src, 0, end);
    let mut diagnostics = Vec::new();
    let mut track = UnitTrack::new(
        (marker, marker_line),
        (resume.segment, resume.diagnostic),
        0,
        0,
        (
            resume.fence,
            c.checked_sub(1).map_or(0, |b| old_units[b].reach),
        ),
    );
    let segments = parse_you(
        &body,
        &mut diagnostics,
        Some(&mut track),
        same_from.is_none(),
    );
    if let Some((_, stop_line)) = same_from {
        // What was parsed must end at that unit as the whole message would: no block read to
        // the end of the lines parsed (it would read on in the message), and no text run
        // running into a unit that is a text run too (they would be one).
        let header_follows = stop_line.starts_with('*') && line::result_header(stop_line).is_some();
        if body.reached_end() || (track.ended_in_run && !header_follows) {
            return None;
        }
    }

    // Where the old parse reached the same point, in lines, and what follows it.
    let message = &doc.messages[i];
    let (old_line, seg_end, diag_end, unit_end) = match same_from {
        Some((u, _)) => {
            let unit = old_units[u];
            (
                (marker_line + unit.line) as usize - 1,
                unit.segment as usize,
                unit.diagnostic as usize,
                u,
            )
        }
        None => {
            let first_diag = doc
                .diagnostics
                .partition_point(|d| d.line < message.span.start_line);
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
    };
    let shift = (lines.number as i64 - old_line as i64) as i32;
    let first_diag = doc
        .diagnostics
        .partition_point(|d| d.line < message.span.start_line);

    let seg_start = resume.segment as usize;
    let parsed_segments = segments.len();
    let message = &mut doc.messages[i];
    message.segments.splice(seg_start..seg_end, segments);
    message.span.end_line = message.span.end_line.wrapping_add_signed(shift);
    let parsed_diagnostics = diagnostics.len();
    let diag_start = first_diag + resume.diagnostic as usize;
    doc.diagnostics
        .splice(diag_start..first_diag + diag_end, diagnostics);
    let parsed_units = track.units.len();
    units[i].splice(c..unit_end, track.units);
    let segment_delta = (seg_start + parsed_segments) as i64 - seg_end as i64;
    let diagnostic_delta =
        (resume.diagnostic as usize + parsed_diagnostics) as i64 - diag_end as i64;
    for unit in &mut units[i][c + parsed_units..] {
        unit.offset = unit.offset + new_end - old_end;
        unit.line = unit.line.wrapping_add_signed(shift);
        if unit.reach != u32::MAX {
            unit.reach = unit.reach.wrapping_add_signed(shift);
        }
        unit.segment = (i64::from(unit.segment) + segment_delta) as u32;
        unit.diagnostic = (i64::from(unit.diagnostic) + diagnostic_delta) as u32;
    }
    for marker in &mut markers[i + 1..] {
        *marker = *marker + new_end - old_end;
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
    Some(lines.pos() - (marker + resume.offset))
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
        Segment::Aborted(t) => &mut t.span,
        Segment::Malformed(t) => &mut t.span,
    };
    line(&mut span.start_line);
    line(&mut span.end_line);
}
