//! The crate's error types.

use std::str::Utf8Error;

/// What can go wrong when a caller hands `flemma-ast` something it cannot use.
///
/// Malformed transcripts are never errors: they produce [`Diagnostic`](crate::Diagnostic)s and
/// the rest of the document still parses. Errors are reserved for input that is not text at all,
/// or for edits and snapshots that do not fit the document they are applied to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AstError {
    /// The input is not valid UTF-8.
    #[error("invalid UTF-8 at byte offset {offset}")]
    InvalidUtf8 {
        /// Byte offset of the first invalid byte.
        offset: usize,
        /// The decoder's error.
        #[source]
        source: Utf8Error,
    },
    /// A [`TextEdit`](crate::TextEdit) names lines the text does not have.
    #[error("edit range {start}..{end} is outside the text's {line_count} lines")]
    EditOutOfRange {
        /// First line the edit replaces (1-based).
        start: u32,
        /// Line after the last one the edit replaces (1-based, exclusive).
        end: u32,
        /// Number of lines in the text.
        line_count: u32,
    },
    /// Two edits in one batch overlap.
    #[error("edits overlap at line {line}")]
    OverlappingEdits {
        /// The first line both edits touch.
        line: u32,
    },
    /// A writer operation names a tool use that is not in the document.
    #[error("no tool use with id `{id}` in the document")]
    UnknownToolUse {
        /// The id that was looked up.
        id: String,
    },
    /// A writer operation names a tool result that is not in the document.
    #[error("no tool result for tool use `{id}` in the document")]
    UnknownToolResult {
        /// The id that was looked up.
        id: String,
    },
    /// A writer operation names a message the document does not have.
    #[error("the document has no message {index} (counted from 0)")]
    NoSuchMessage {
        /// The index that was asked for.
        index: usize,
    },
    /// A byte range does not lie inside the text, or does not start and end on a character
    /// boundary ([`IncrementalParser::replace_range`](crate::IncrementalParser::replace_range)).
    #[error("byte range {start}..{end} does not fit the text's {len} bytes")]
    RangeOutOfText {
        /// First byte.
        start: usize,
        /// Byte after the last.
        end: usize,
        /// The text's length.
        len: usize,
    },
}
