//! What the harness writes into a transcript, as [`TextEdit`]s.
//!
//! Every function here is pure: it reads a [`Document`] (and sometimes the text) and returns
//! edits for the host to apply to its own buffer, or text to append while a response streams.
//! [`apply_edits`] applies them to a `String` for hosts that keep the text in memory.
//!
//! ```
//! use flemma_ast::writer::{self, ResultBody, WriterOptions};
//! use flemma_ast::{ToolStatus, apply_edits, parse};
//!
//! let opts = WriterOptions::default(); // compact headers, as the newest Flemma writes them
//! let mut text = String::from("@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n");
//!
//! let placed = writer::insert_placeholder(&parse(&text), "t1", ToolStatus::Approved, opts)?;
//! text = apply_edits(&text, placed.edit.as_slice())?;
//! assert!(text.ends_with("@You:\n\n**Tool Result:** `t1` (approved)\n```\n```\n"));
//!
//! let edit = writer::write_result(&parse(&text), "t1", &ResultBody::Success("ok".into()), opts)?;
//! text = apply_edits(&text, &[edit])?;
//! assert!(text.ends_with("**Tool Result:** `t1`\n```\nok\n```\n"));
//! # Ok::<(), flemma_ast::AstError>(())
//! ```

mod block;
mod compaction;
mod jobs;
mod place;

use crate::ast::{Document, LineSpan, Segment, ToolStatus};
pub use crate::edit::{LineIndex, TextEdit, apply_edits, apply_edits_in_place};
use crate::error::AstError;
use crate::messages as msg;
use crate::query::ToolIndex;
pub use block::{WriterOptions, fence_for};
use block::{block_lines, body_lines, result_header};
pub use compaction::{compaction_message, insert_compaction};
use flemma_ids::{ToolName, ToolUseId};
pub use jobs::{JobPlacement, job_result_lines, place_job_result};
pub use place::{Placement, insert_placeholder, insert_placeholders};

/// The separator to write before a new block appended to a streamed response: nothing when
/// the response is empty, one newline when it ends with one, two otherwise.
pub fn append_prefix(response_so_far: &str) -> &'static str {
    if response_so_far.is_empty() {
        ""
    } else if response_so_far.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    }
}

/// A `**Tool Use:**` block for a streamed response, prefix included.
///
/// ```
/// use flemma_ast::writer;
/// use flemma_ids::{ToolName, ToolUseId};
/// let input = serde_json::json!({"command": "ls"});
/// let block = writer::tool_use_block(
///     "Let me look.",
///     &ToolName::new("bash")?,
///     &ToolUseId::new("toolu_01")?,
///     input.as_object().unwrap(),
/// );
/// assert_eq!(block, "\n\n**Tool Use:** `bash` (`toolu_01`)\n\n```json\n{\"command\":\"ls\"}\n```\n");
/// # Ok::<(), flemma_ids::InvalidId>(())
/// ```
pub fn tool_use_block(
    response_so_far: &str,
    name: &ToolName,
    id: &ToolUseId,
    input: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let json = serde_json::to_string(input).unwrap_or_else(|_| "{}".to_owned());
    let fence = fence_for(&json);
    format!(
        "{}**Tool Use:** `{name}` (`{id}`)\n\n{fence}json\n{json}\n{fence}\n",
        append_prefix(response_so_far)
    )
}

/// A `<thinking>` block for the end of a streamed response.
///
/// The text is trimmed; with no text and a signature an open/close pair with no body is written.
/// The text is the model's: it is escaped as its reply is ([`crate::escape::escape_assistant`]),
/// so a `</thinking>` or `@You:` line in it stays inside the block, and the signature keeps only
/// what a tag can carry (letters and digits for the provider, no `"` or line break in the value).
///
/// ```
/// use flemma_ast::writer::thinking_block;
/// assert_eq!(
///     thinking_block("plan\n</thinking>\n@You:", Some(("anthropic", "s\"ig")), false),
///     "<thinking anthropic:signature=\"sig\">\nplan\n\\</thinking>\n\\@You:\n</thinking>\n"
/// );
/// ```
pub fn thinking_block(text: &str, signature: Option<(&str, &str)>, redacted: bool) -> String {
    let open = match (redacted, signature) {
        (true, _) => "<thinking redacted>".to_owned(),
        (false, Some((provider, value))) => {
            let provider: String = provider
                .chars()
                .filter(char::is_ascii_alphanumeric)
                .collect();
            let provider = if provider.is_empty() {
                "unknown"
            } else {
                &provider
            };
            let value: String = value
                .chars()
                .filter(|c| !matches!(c, '"' | '\n' | '\r'))
                .collect();
            format!("<thinking {provider}:signature=\"{value}\">")
        }
        (false, None) => "<thinking>".to_owned(),
    };
    let body = if redacted { text } else { text.trim() };
    if body.is_empty() {
        format!("{open}\n</thinking>\n")
    } else {
        format!(
            "{open}\n{}\n</thinking>\n",
            crate::escape::escape_assistant(body)
        )
    }
}

/// The abort marker to append to an interrupted response, separator included.
///
/// ```
/// assert_eq!(
///     flemma_ast::writer::abort_marker("Partial answer", flemma_ast::ABORTED_BY_USER),
///     "\n\n<!-- flemma:aborted: Response interrupted by the user. -->\n"
/// );
/// ```
pub fn abort_marker(response_so_far: &str, message: &str) -> String {
    format!(
        "{}<!-- flemma:aborted: {message} -->\n",
        append_prefix(response_so_far)
    )
}

/// The outcome of a tool, as written into its result block.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultBody {
    /// Successful text output.
    Success(String),
    /// Successful structured output, written as JSON in a `json` fence.
    Json(serde_json::Value),
    /// A failure.
    Error {
        /// The error text; `Unknown error` when absent.
        message: Option<String>,
        /// Output produced before the failure, appended after `Partial output:`.
        partial_output: Option<String>,
    },
}

impl ResultBody {
    /// The fence content, language and whether the header carries `(error)`.
    fn render(&self) -> (String, Option<&'static str>, bool) {
        match self {
            ResultBody::Success(text) => (text.clone(), None, false),
            ResultBody::Json(value) => (value.to_string(), Some("json"), false),
            ResultBody::Error {
                message,
                partial_output,
            } => {
                let mut text = message
                    .clone()
                    .unwrap_or_else(|| msg::UNKNOWN_ERROR.to_owned());
                if let Some(output) = partial_output.as_deref().filter(|o| !o.is_empty()) {
                    text.push_str(msg::PARTIAL_OUTPUT_SEPARATOR);
                    text.push_str(output);
                }
                (text, None, true)
            }
        }
    }
}

/// Replaces the (last) result block of a tool use with its final result.
///
/// The header loses any status and meta; errors get `(error)`.
///
/// # Errors
///
/// [`AstError::UnknownToolResult`] when the tool use has no result block.
pub fn write_result(
    doc: &Document,
    tool_use_id: &str,
    body: &ResultBody,
    opts: WriterOptions,
) -> Result<TextEdit, AstError> {
    Ok(write_at(
        result_span(doc, tool_use_id)?,
        tool_use_id,
        body,
        opts,
    ))
}

/// [`write_result`] finding the result block through `index` (built from `doc`, as
/// [`IncrementalParser::tool_index`](crate::IncrementalParser::tool_index) keeps one) instead of
/// a scan of the document: writing many results into a large document costs each result, not
/// the document.
///
/// # Errors
///
/// [`AstError::UnknownToolResult`] when the tool use has no result block.
///
/// ```
/// use flemma_ast::writer::{self, ResultBody, WriterOptions};
/// use flemma_ast::{IncrementalParser, ToolStatus};
///
/// let mut parser = IncrementalParser::new(
///     "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\n\
///      @You:\n**Tool Result:** `t1` (approved)\n```\n```\n",
/// );
/// let body = ResultBody::Success("ok".into());
/// let edit = writer::write_result_in(parser.document(), parser.tool_index(), "t1", &body, WriterOptions::default())?;
/// parser.apply_edits(&[edit])?;
/// assert!(parser.text().ends_with("**Tool Result:** `t1`\n```\nok\n```\n"));
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
pub fn write_result_in(
    doc: &Document,
    index: &ToolIndex,
    tool_use_id: &str,
    body: &ResultBody,
    opts: WriterOptions,
) -> Result<TextEdit, AstError> {
    let span = indexed_span(doc, index, tool_use_id)?;
    Ok(write_at(span, tool_use_id, body, opts))
}

/// The edit replacing the block at `span` with a final result.
fn write_at(span: LineSpan, tool_use_id: &str, body: &ResultBody, opts: WriterOptions) -> TextEdit {
    let (content, language, is_error) = body.render();
    let header = result_header(tool_use_id, is_error.then_some("error"));
    TextEdit::replace(
        span.start_line,
        span.end_line,
        block_lines(header, &content, language, opts),
    )
}

/// The span of the last result block answering `tool_use_id`. Searched from the end: the
/// blocks a harness rewrites are usually the newest, so this touches only the last messages.
fn result_span(doc: &Document, tool_use_id: &str) -> Result<LineSpan, AstError> {
    doc.messages
        .iter()
        .rev()
        .flat_map(|m| m.segments.iter().rev())
        .find_map(|s| match s {
            Segment::ToolResult(r) if r.tool_use_id == tool_use_id => Some(r.span),
            _ => None,
        })
        .ok_or_else(|| AstError::UnknownToolResult {
            id: tool_use_id.to_owned(),
        })
}

/// Rewrites a result header to carry `status` (or no suffix), keeping the block.
///
/// # Errors
///
/// [`AstError::UnknownToolResult`] when the tool use has no result block.
pub fn set_status(
    doc: &Document,
    tool_use_id: &str,
    status: Option<ToolStatus>,
) -> Result<TextEdit, AstError> {
    set_modeline(doc, tool_use_id, status.map_or("", ToolStatus::as_str))
}

/// Rewrites a result header's suffix to a raw modeline (`job=job_ab12cd34`,
/// `error job=job_ab12cd34`); an empty modeline removes the suffix.
///
/// # Errors
///
/// [`AstError::UnknownToolResult`] when the tool use has no result block.
pub fn set_modeline(
    doc: &Document,
    tool_use_id: &str,
    modeline: &str,
) -> Result<TextEdit, AstError> {
    let span = result_span(doc, tool_use_id)?;
    Ok(TextEdit::replace(
        span.start_line,
        span.start_line,
        vec![result_header(tool_use_id, Some(modeline))],
    ))
}

/// [`set_status`] finding the result block through `index` (built from `doc`) instead of a
/// scan, as [`write_result_in`] does.
///
/// # Errors
///
/// [`AstError::UnknownToolResult`] when the tool use has no result block.
pub fn set_status_in(
    doc: &Document,
    index: &ToolIndex,
    tool_use_id: &str,
    status: Option<ToolStatus>,
) -> Result<TextEdit, AstError> {
    set_modeline_in(
        doc,
        index,
        tool_use_id,
        status.map_or("", ToolStatus::as_str),
    )
}

/// [`set_modeline`] finding the result block through `index` (built from `doc`) instead of a
/// scan, as [`write_result_in`] does.
///
/// # Errors
///
/// [`AstError::UnknownToolResult`] when the tool use has no result block.
pub fn set_modeline_in(
    doc: &Document,
    index: &ToolIndex,
    tool_use_id: &str,
    modeline: &str,
) -> Result<TextEdit, AstError> {
    let span = indexed_span(doc, index, tool_use_id)?;
    Ok(TextEdit::replace(
        span.start_line,
        span.start_line,
        vec![result_header(tool_use_id, Some(modeline))],
    ))
}

/// The span of the last result block answering `tool_use_id`, through `index`.
fn indexed_span(
    doc: &Document,
    index: &ToolIndex,
    tool_use_id: &str,
) -> Result<LineSpan, AstError> {
    index
        .last_tool_result(doc, tool_use_id)
        .map(|found| found.node.span)
        .ok_or_else(|| AstError::UnknownToolResult {
            id: tool_use_id.to_owned(),
        })
}

/// Keeps a result's header and replaces its body with `content` in a fresh fence.
///
/// # Errors
///
/// [`AstError::UnknownToolResult`] when the tool use has no result block.
pub fn rewrite_fence_body(
    doc: &Document,
    tool_use_id: &str,
    content: &str,
    opts: WriterOptions,
) -> Result<TextEdit, AstError> {
    let span = result_span(doc, tool_use_id)?;
    Ok(TextEdit::replace(
        span.start_line + 1,
        span.end_line,
        body_lines(content, None, opts),
    ))
}

/// Replaces the input of the tool use `tool_use_id` (its first block, through `index`) with
/// `input`, written as one line of JSON in a fresh fence; the header line is kept. A hook
/// that rewrites a call's input leaves it in the transcript this way, so the block shows the
/// input the call runs with.
///
/// ```
/// use flemma_ast::{ToolIndex, apply_edits, parse, writer};
/// let text = "@Assistant:\n**Tool Use:** `bash` (`t1`)\n\n```json\n{\"command\":\"rm -rf /\"}\n```\n";
/// let doc = parse(text);
/// let input = serde_json::json!({"command": "echo no"});
/// let edit = writer::rewrite_tool_use_input(&doc, &ToolIndex::new(&doc), "t1", input.as_object().unwrap())?;
/// let rewritten = apply_edits(text, &[edit])?;
/// assert_eq!(parse(&rewritten).messages[0].tool_uses().next().unwrap().input()["command"], "echo no");
/// assert!(rewritten.starts_with("@Assistant:\n**Tool Use:** `bash` (`t1`)\n\n```json\n{\"command\":\"echo no\"}\n```"));
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
///
/// # Errors
///
/// [`AstError::UnknownToolUse`] when the document has no tool use with that id.
pub fn rewrite_tool_use_input(
    doc: &Document,
    index: &ToolIndex,
    tool_use_id: &str,
    input: &serde_json::Map<String, serde_json::Value>,
) -> Result<TextEdit, AstError> {
    let found = index
        .tool_use(doc, tool_use_id)
        .ok_or_else(|| AstError::UnknownToolUse {
            id: tool_use_id.to_owned(),
        })?;
    let span = found.node.span;
    let json = serde_json::to_string(input).unwrap_or_else(|_| "{}".to_owned());
    let fence = fence_for(&json);
    // The blank line after the header stays as it was written.
    let mut lines = Vec::with_capacity(4);
    if found.node.layout.blank_after_header {
        lines.push(String::new());
    }
    lines.extend([format!("{fence}json"), json, fence]);
    Ok(TextEdit::replace(span.start_line + 1, span.end_line, lines))
}
