//! Output truncation: keep the head or the tail of a text within a line and a byte
//! budget, cut long lines, and write the full text elsewhere when something was cut.
//!
//! Lines are split on `\n`; a trailing newline yields an empty last line, which counts. Cuts
//! fall on line boundaries except in two documented cases (a tail whose last line alone is too
//! long, and [`truncate_line`]), and those land on UTF-8 character boundaries.

use std::path::{Path, PathBuf};

use flemma_store::format_size;

/// The line budget of a truncated output.
pub const MAX_LINES: usize = 2000;
/// The byte budget of a truncated output: 50 KB.
pub const MAX_BYTES: usize = 51_200;
/// The per-line cap [`truncate_line`] applies by default (bytes).
pub const MAX_LINE_CHARS: usize = 500;

const LINE_SUFFIX: &str = "... [truncated]";

/// The budgets of one truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// At most this many lines.
    pub max_lines: usize,
    /// At most this many bytes (newlines between kept lines counted).
    pub max_bytes: usize,
}

impl Default for Limits {
    /// [`MAX_LINES`] and [`MAX_BYTES`].
    fn default() -> Self {
        Self {
            max_lines: MAX_LINES,
            max_bytes: MAX_BYTES,
        }
    }
}

/// Which budget stopped a truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncatedBy {
    /// The line budget.
    Lines,
    /// The byte budget.
    Bytes,
}

/// What [`truncate_head`] and [`truncate_tail`] kept, with the counts their notices need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation<'a> {
    /// The kept text (borrowed from the input).
    pub content: &'a str,
    /// Which budget cut the text; `None` when nothing was cut.
    pub truncated_by: Option<TruncatedBy>,
    /// Lines in the input.
    pub total_lines: usize,
    /// Bytes in the input.
    pub total_bytes: usize,
    /// Lines kept (a partial last line counts as one).
    pub output_lines: usize,
    /// Bytes kept.
    pub output_bytes: usize,
    /// A tail truncation kept only the end of the input's last line.
    pub last_line_partial: bool,
    /// A head truncation kept nothing because the first line alone is over the byte budget.
    pub first_line_exceeds_limit: bool,
}

impl Truncation<'_> {
    /// Whether anything was cut.
    pub fn truncated(&self) -> bool {
        self.truncated_by.is_some()
    }
}

/// Which end of a text to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Keep the beginning (file reads, listings).
    Head,
    /// Keep the end (command output).
    Tail,
}

/// Line count of a text: one more than its newlines.
fn line_count(content: &str) -> usize {
    memchr::memchr_iter(b'\n', content.as_bytes()).count() + 1
}

fn untouched(content: &str, total_lines: usize) -> Truncation<'_> {
    Truncation {
        content,
        truncated_by: None,
        total_lines,
        total_bytes: content.len(),
        output_lines: total_lines,
        output_bytes: content.len(),
        last_line_partial: false,
        first_line_exceeds_limit: false,
    }
}

/// Keeps whole lines from the top within both budgets.
///
/// ```
/// use flemma_core::truncate::{Limits, TruncatedBy, truncate_head};
///
/// let limits = Limits { max_lines: 2, max_bytes: 100 };
/// let cut = truncate_head("a\nb\nc\n", limits);
/// assert_eq!(cut.content, "a\nb");
/// assert_eq!((cut.truncated_by, cut.total_lines, cut.output_lines), (Some(TruncatedBy::Lines), 4, 2));
/// ```
pub fn truncate_head(content: &str, limits: Limits) -> Truncation<'_> {
    let total_lines = line_count(content);
    if total_lines <= limits.max_lines && content.len() <= limits.max_bytes {
        return untouched(content, total_lines);
    }
    let first_len = content.find('\n').unwrap_or(content.len());
    if first_len > limits.max_bytes {
        return Truncation {
            content: "",
            truncated_by: Some(TruncatedBy::Bytes),
            total_lines,
            total_bytes: content.len(),
            output_lines: 0,
            output_bytes: 0,
            last_line_partial: false,
            first_line_exceeds_limit: true,
        };
    }
    // `end` is the byte length of the kept prefix; lines are taken while both budgets hold.
    let mut end = 0;
    let mut kept = 0;
    let mut by = TruncatedBy::Lines;
    for line in content.split('\n') {
        if kept == limits.max_lines {
            by = TruncatedBy::Lines;
            break;
        }
        let next = if kept == 0 {
            line.len()
        } else {
            end + 1 + line.len()
        };
        if next > limits.max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        end = next;
        kept += 1;
    }
    Truncation {
        content: &content[..end],
        truncated_by: Some(by),
        total_lines,
        total_bytes: content.len(),
        output_lines: kept,
        output_bytes: end,
        last_line_partial: false,
        first_line_exceeds_limit: false,
    }
}

/// Keeps whole lines from the end within both budgets. When the last line alone
/// is over the byte budget, its last `max_bytes` bytes are kept, moved forward to a character
/// boundary.
///
/// ```
/// use flemma_core::truncate::{Limits, truncate_tail};
///
/// let cut = truncate_tail("one\ntwo\nthree", Limits { max_lines: 2, max_bytes: 100 });
/// assert_eq!(cut.content, "two\nthree");
/// let cut = truncate_tail("ééé", Limits { max_lines: 10, max_bytes: 3 });
/// assert_eq!((cut.content, cut.last_line_partial), ("é", true));
/// ```
pub fn truncate_tail(content: &str, limits: Limits) -> Truncation<'_> {
    let total_lines = line_count(content);
    if total_lines <= limits.max_lines && content.len() <= limits.max_bytes {
        return untouched(content, total_lines);
    }
    let last_start = content.rfind('\n').map_or(0, |i| i + 1);
    if content.len() - last_start > limits.max_bytes {
        let mut start = content.len() - limits.max_bytes;
        while !content.is_char_boundary(start) {
            start += 1;
        }
        let kept = &content[start..];
        return Truncation {
            content: kept,
            truncated_by: Some(TruncatedBy::Bytes),
            total_lines,
            total_bytes: content.len(),
            output_lines: 1,
            output_bytes: kept.len(),
            last_line_partial: true,
            first_line_exceeds_limit: false,
        };
    }
    // `start` is where the kept suffix begins.
    let mut start = content.len();
    let mut kept = 0;
    let mut by = TruncatedBy::Lines;
    for line in content.rsplit('\n') {
        if kept == limits.max_lines {
            by = TruncatedBy::Lines;
            break;
        }
        let size = if kept == 0 {
            line.len()
        } else {
            content.len() - start + 1 + line.len()
        };
        if size > limits.max_bytes {
            by = TruncatedBy::Bytes;
            break;
        }
        start = content.len() - size;
        kept += 1;
    }
    Truncation {
        content: &content[start..],
        truncated_by: Some(by),
        total_lines,
        total_bytes: content.len(),
        output_lines: kept,
        output_bytes: content.len() - start,
        last_line_partial: false,
        first_line_exceeds_limit: false,
    }
}

/// Cuts one line to `max` bytes: a prefix of `max − 15` bytes (at least one),
/// cut back to a whole character, then `... [truncated]`.
///
/// ```
/// use flemma_core::truncate::truncate_line;
/// assert_eq!(truncate_line("short", 500), "short");
/// assert_eq!(truncate_line(&"x".repeat(30), 20), "xxxxx... [truncated]");
/// ```
pub fn truncate_line(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if line.len() <= max {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut end = max.saturating_sub(LINE_SUFFIX.len()).max(1);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}{LINE_SUFFIX}", &line[..end]))
}

/// Where [`truncate_with_overflow`] writes the full text of a truncated output: the tool
/// result store, in a tool's execution context.
pub trait OverflowSink {
    /// Writes `text` and returns where it went; `None` when the write failed (the notice
    /// then names no file).
    fn write_full(&self, text: &str) -> Option<PathBuf>;
}

impl<F: Fn(&str) -> Option<PathBuf>> OverflowSink for F {
    fn write_full(&self, text: &str) -> Option<PathBuf> {
        self(text)
    }
}

/// A truncated output with its notice, and where the full text went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overflow {
    /// What the model sees: the kept text, a blank line and the notice (or the notice alone).
    pub content: String,
    /// Where the full text was written, when it was.
    pub path: Option<PathBuf>,
    /// Whether anything was cut (when not, `content` is the input and nothing was written).
    pub truncated: bool,
}

/// Truncates `text` towards `direction`; when something was cut, writes the full text to
/// `sink` and appends the overflow notice after a blank line (the notice replaces the
/// content when the first line alone was too large).
///
/// ```
/// use std::path::PathBuf;
/// use flemma_core::truncate::{Direction, Limits, truncate_with_overflow};
///
/// let sink = |_: &str| Some(PathBuf::from("/s/tool_bash_t1.txt"));
/// let out = truncate_with_overflow("1\n2\n3\n4", Direction::Tail, Limits { max_lines: 2, max_bytes: 100 }, &sink);
/// assert_eq!(out.content, "3\n4\n\n[Showing lines 3-4 of 4. Full output: /s/tool_bash_t1.txt]");
/// ```
pub fn truncate_with_overflow(
    text: &str,
    direction: Direction,
    limits: Limits,
    sink: &dyn OverflowSink,
) -> Overflow {
    let cut = match direction {
        Direction::Head => truncate_head(text, limits),
        Direction::Tail => truncate_tail(text, limits),
    };
    let Some(by) = cut.truncated_by else {
        return Overflow {
            content: text.to_owned(),
            path: None,
            truncated: false,
        };
    };
    let path = sink.write_full(text);
    let notice = overflow_notice(&cut, by, direction, path.as_deref());
    let content = if cut.first_line_exceeds_limit {
        notice
    } else {
        format!("{}\n\n{notice}", cut.content)
    };
    Overflow {
        content,
        path,
        truncated: true,
    }
}

/// [`truncate_with_overflow`] towards the tail for an output known only by its end: a command
/// whose output was streamed to `path` (`None` when it could not be written) while only its
/// last bytes were kept in memory.
///
/// `tail` is the end of the output: either all of it, or more than `limits.max_bytes` bytes
/// of it (so the cut falls inside). `total_lines` and `total_bytes` count the whole output;
/// the notice is the one [`truncate_with_overflow`] writes for the whole text.
///
/// ```
/// use std::path::Path;
/// use flemma_core::truncate::{Limits, truncate_tail_of};
///
/// let limits = Limits { max_lines: 2, max_bytes: 4 };
/// let out = truncate_tail_of("9\n10\n11", 11, 1_000, limits, Some(Path::new("/s/out.txt")));
/// assert_eq!(out.content, "11\n\n[Showing lines 11-11 of 11 (50.0KB limit). Full output: /s/out.txt]");
/// ```
pub fn truncate_tail_of(
    tail: &str,
    total_lines: usize,
    total_bytes: usize,
    limits: Limits,
    path: Option<&Path>,
) -> Overflow {
    let mut cut = truncate_tail(tail, limits);
    if total_bytes <= tail.len() && cut.truncated_by.is_none() {
        return Overflow {
            content: tail.to_owned(),
            path: None,
            truncated: false,
        };
    }
    let by = cut.truncated_by.unwrap_or(TruncatedBy::Bytes);
    cut.total_lines = total_lines.max(cut.output_lines);
    cut.total_bytes = total_bytes.max(cut.output_bytes);
    let notice = overflow_notice(&cut, by, Direction::Tail, path);
    Overflow {
        content: format!("{}\n\n{notice}", cut.content),
        path: path.map(Path::to_owned),
        truncated: true,
    }
}

/// The overflow notice of a truncation.
fn overflow_notice(
    cut: &Truncation<'_>,
    by: TruncatedBy,
    direction: Direction,
    path: Option<&Path>,
) -> String {
    let full = path.map_or_else(String::new, |p| format!(". Full output: {}", p.display()));
    let total = cut.total_lines;
    let (start, end) = match direction {
        Direction::Tail => (total + 1 - cut.output_lines.min(total), total),
        Direction::Head => (1, cut.output_lines),
    };
    if cut.first_line_exceeds_limit {
        format!(
            "[Output too large: {} in a single line, exceeds {} limit{full}]",
            format_size(cut.total_bytes),
            format_size(MAX_BYTES)
        )
    } else if cut.last_line_partial {
        format!(
            "[Showing last {} of line {end}{full}]",
            format_size(cut.output_bytes)
        )
    } else if by == TruncatedBy::Lines {
        format!("[Showing lines {start}-{end} of {total}{full}]")
    } else {
        format!(
            "[Showing lines {start}-{end} of {total} ({} limit){full}]",
            format_size(MAX_BYTES)
        )
    }
}
