//! Parser, typed AST, queries and writer for Flemma `.chat` transcripts.
//!
//! A `.chat` file is a conversation in plain text: `@System:`, `@You:` and `@Assistant:`
//! messages holding text, `{{ template }}` segments, `<thinking>` blocks and the fenced
//! `**Tool Use:**` / `**Tool Result:**` / `**Job Result:**` blocks of an agent loop. Every other
//! flemma crate reads transcripts through this one.
//!
//! The crate never fails on a malformed transcript: problems become [`Diagnostic`]s, the
//! offending lines are kept as [`Segment::Malformed`], and the rest parses. Line-level
//! constructs are defined by a pest grammar (`grammar.pest`, run by [`grammar::classify`]); the
//! parser runs a hand-written scanner with the same semantics, checked against the grammar by
//! the tests, which keeps a full parse in the hundreds of MB/s.
//!
//! Start with [`parse()`]; [`print()`] writes a document back, the [`writer`] module produces the
//! [`TextEdit`]s a harness applies (placeholders, results, job results), the query functions
//! find tool uses and their results, and [`IncrementalParser`] keeps a document current while a
//! response streams in.
//!
//! ```
//! use flemma_ast::{Segment, ToolStatus};
//!
//! let text = "@Assistant:\n**Tool Use:** `bash` (`toolu_01`)\n\n```json\n{\"command\":\"ls\"}\n```\n\n\
//!             @You:\n**Tool Result:** `toolu_01` (pending)\n\n```\n```\n";
//! let doc = flemma_ast::parse(text);
//! let table = flemma_ast::build_tool_sibling_table(&doc);
//! let pair = &table["toolu_01"];
//! assert_eq!(pair.tool_use.unwrap().name.as_str(), "bash");
//! assert_eq!(pair.tool_result.unwrap().status, Some(ToolStatus::Pending));
//! assert_eq!(flemma_ast::print(&doc), text);
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod ast;
mod content;
mod edit;
mod error;
pub mod escape;
pub mod grammar;
mod incremental;
mod input;
mod line;
mod lint;
mod messages;
pub mod modeline;
mod parser;
mod print;
mod query;
mod results;
mod roles;
mod source;
mod template;
pub mod writer;

pub use ast::{
    Aborted, Compaction, Diagnostic, DiagnosticKind, Document, FenceLayout, Frontmatter, JobResult,
    JobStatus, JsonObject, LineSpan, Malformed, Message, Role, Segment, Signature, Template, Text,
    TextSpan, Thinking, ToolResult, ToolStatus, ToolUse,
};
pub use error::AstError;
pub use incremental::{IncrementalParser, Reparse};
pub use lint::{duplicate_tool_uses, lint};
pub use messages::ABORTED_BY_USER;
pub use parser::{MAX_INPUT_DEPTH, parse, parse_bytes};
pub use print::print;
pub use roles::unknown_roles;
pub use source::line_ending;

/// Splits a text into [`Text`], [`Segment::Expression`] and [`Segment::Code`] segments, with
/// positions counted from `base_line` (the line of the text's first byte, in column 1), as the
/// parser does for message text. Template engines use it for included files.
///
/// ```
/// use flemma_ast::{Segment, parse_template};
///
/// let segments = parse_template("Hi {{ name }}!", 1);
/// assert!(matches!(&segments[1], Segment::Expression(t) if t.code == " name "));
/// assert_eq!(segments.len(), 3);
/// ```
pub fn parse_template(text: &str, base_line: u32) -> Vec<Segment> {
    template::parse_segments(text, base_line)
}
pub use query::{
    SegmentRef, ToolIndex, ToolPair, ToolUseInfo, build_tool_sibling_table, build_tool_use_index,
    find_job_result, find_message_at_line, find_segment_at_position, find_tool_result_by_id,
    find_tool_sibling, find_tool_use_by_id,
};
pub use writer::{LineIndex, TextEdit, apply_edits, apply_edits_in_place};
