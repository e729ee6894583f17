//! Positions and fence layouts, shared by every node of the AST.

use serde::Serialize;

/// A line range, 1-based and inclusive on both ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct LineSpan {
    /// First line.
    pub start_line: u32,
    /// Last line.
    pub end_line: u32,
}

impl LineSpan {
    /// A span covering `start_line..=end_line`.
    pub fn new(start_line: u32, end_line: u32) -> Self {
        Self {
            start_line,
            end_line,
        }
    }

    /// Whether `line` lies inside the span.
    pub fn contains_line(&self, line: u32) -> bool {
        (self.start_line..=self.end_line).contains(&line)
    }
}

/// A span inside text: 1-based lines and 1-based inclusive byte columns.
///
/// An empty segment has `end_col == start_col - 1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TextSpan {
    /// First line.
    pub start_line: u32,
    /// Byte column of the first byte on `start_line`.
    pub start_col: u32,
    /// Last line.
    pub end_line: u32,
    /// Byte column of the last byte on `end_line`.
    pub end_col: u32,
}

impl TextSpan {
    /// The covered lines.
    pub fn lines(&self) -> LineSpan {
        LineSpan::new(self.start_line, self.end_line)
    }

    /// Whether (`line`, `col`) lies inside the span.
    pub fn contains(&self, line: u32, col: u32) -> bool {
        (self.start_line, self.start_col) <= (line, col)
            && (line, col) <= (self.end_line, self.end_col)
    }
}

/// How a fenced block was written, kept so printing reproduces it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FenceLayout {
    /// The language word after the opening backticks (`json`), if any.
    pub language: Option<String>,
    /// Whatever follows the language word after whitespace, if anything.
    pub info: Option<String>,
    /// Text glued to the language word without whitespace (the `**x**` of ```` ```json**x** ````),
    /// kept verbatim so that printing does not change what the line means. When set, `info`
    /// is `None`.
    pub glued: Option<String>,
    /// Whether a blank line separates the header from the fence.
    pub blank_after_header: bool,
    /// Backticks of the fence as written; `0` lets the printer size it to the content.
    ///
    /// Kept because a fence's length can matter to the lines around it: a block fenced with
    /// one backtick inside a message-level ```` ``` ```` region does not close that region,
    /// where a three-backtick fence would.
    pub ticks: usize,
    /// Backticks of the closing fence as written; it may be longer than the opener's.
    /// Ignored when [`ticks`](Self::ticks) is `0` or this is shorter than it.
    pub closing_ticks: usize,
}
