//! What the harness writes into a transcript (spec §1.16, §1.17, §8.5), as [`TextEdit`]s.
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

use crate::ast::{Document, Message, Role, Segment, ToolStatus};
use crate::error::AstError;
use crate::messages as msg;
use crate::query::{build_tool_sibling_table, find_job_result};
use crate::source::Source;
use flemma_ids::{JobId, ToolName, ToolUseId};

/// Replaces lines `start..end` (1-based, `end` exclusive) with `lines`.
///
/// `start == end` inserts before line `start`; `start == line_count + 1` appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextEdit {
    /// First line replaced (1-based).
    pub start: u32,
    /// Line after the last one replaced (1-based, exclusive).
    pub end: u32,
    /// The new lines, without terminators.
    pub lines: Vec<String>,
}

impl TextEdit {
    /// Inserts `lines` before line `at`.
    pub fn insert(at: u32, lines: Vec<String>) -> Self {
        Self {
            start: at,
            end: at,
            lines,
        }
    }

    /// Replaces lines `start..=end_inclusive`.
    pub fn replace(start: u32, end_inclusive: u32, lines: Vec<String>) -> Self {
        Self {
            start,
            end: end_inclusive + 1,
            lines,
        }
    }
}

/// Applies non-overlapping edits, all expressed against the original text.
///
/// The text's own line ending (CRLF when its first line ends in CRLF) is used for every line,
/// and a final newline is kept when the text had one (or was empty).
///
/// # Errors
///
/// [`AstError::EditOutOfRange`] when an edit names lines the text does not have, and
/// [`AstError::OverlappingEdits`] when two edits replace the same line.
///
/// ```
/// use flemma_ast::{TextEdit, apply_edits};
/// let text = apply_edits("a\nb\n", &[TextEdit::insert(2, vec!["x".into()])])?;
/// assert_eq!(text, "a\nx\nb\n");
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
pub fn apply_edits(text: &str, edits: &[TextEdit]) -> Result<String, AstError> {
    let src = Source::new(text);
    let line_count = src.len() as u32;
    let mut sorted: Vec<&TextEdit> = edits.iter().collect();
    sorted.sort_by_key(|e| (e.start, e.end));
    let mut previous_end = 1;
    for edit in &sorted {
        if edit.start < 1 || edit.end < edit.start || edit.end > line_count + 1 {
            return Err(AstError::EditOutOfRange {
                start: edit.start,
                end: edit.end,
                line_count,
            });
        }
        if edit.start < previous_end {
            return Err(AstError::OverlappingEdits { line: edit.start });
        }
        previous_end = edit.end.max(previous_end);
    }
    let eol = crate::source::line_ending(text);
    let mut lines: Vec<&str> = Vec::with_capacity(src.len() + 8);
    let mut next = 1u32;
    for edit in sorted {
        lines.extend((next..edit.start).map(|i| src.line(i as usize - 1)));
        lines.extend(edit.lines.iter().map(String::as_str));
        next = edit.end;
    }
    lines.extend((next..=line_count).map(|i| src.line(i as usize - 1)));
    let mut out = lines.join(eol);
    if (text.is_empty() || text.ends_with('\n')) && !lines.is_empty() {
        out.push_str(eol);
    }
    Ok(out)
}

/// Options that change what the writer produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Omit the blank line between a block header and its fence (`editing.compact_headers`,
    /// default `true`).
    pub compact_headers: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            compact_headers: true,
        }
    }
}

/// A fence safe for `content`: backticks, one more than the longest run inside, at least three.
///
/// ```
/// assert_eq!(flemma_ast::writer::fence_for("plain"), "```");
/// assert_eq!(flemma_ast::writer::fence_for("has ```` inside"), "`````");
/// ```
pub fn fence_for(content: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for b in content.bytes() {
        if b == b'`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

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

/// A `**Tool Use:**` block for a streamed response, prefix included (spec §1.16).
///
/// ```
/// use flemma_ast::{ToolName, ToolUseId, writer};
/// let input = serde_json::json!({"command": "ls"});
/// let block = writer::tool_use_block(
///     "Let me look.",
///     &ToolName::new("bash")?,
///     &ToolUseId::new("toolu_01")?,
///     input.as_object().unwrap(),
/// );
/// assert_eq!(block, "\n\n**Tool Use:** `bash` (`toolu_01`)\n\n```json\n{\"command\":\"ls\"}\n```\n");
/// # Ok::<(), flemma_ast::InvalidId>(())
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

/// A `<thinking>` block for the end of a streamed response (spec §1.9).
///
/// The text is trimmed; with no text and a signature an open/close pair with no body is written.
pub fn thinking_block(text: &str, signature: Option<(&str, &str)>, redacted: bool) -> String {
    let open = match (redacted, signature) {
        (true, _) => "<thinking redacted>".to_owned(),
        (false, Some((provider, value))) => format!("<thinking {provider}:signature=\"{value}\">"),
        (false, None) => "<thinking>".to_owned(),
    };
    let body = if redacted { text } else { text.trim() };
    if body.is_empty() {
        format!("{open}\n</thinking>\n")
    } else {
        format!("{open}\n{body}\n</thinking>\n")
    }
}

/// The abort marker to append to an interrupted response, separator included (spec §1.10).
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

/// Header line, optional blank line, fence, content lines, fence.
fn block_lines(
    header: String,
    content: &str,
    language: Option<&str>,
    opts: WriterOptions,
) -> Vec<String> {
    let mut lines = vec![header];
    lines.extend(body_lines(content, language, opts));
    lines
}

fn body_lines(content: &str, language: Option<&str>, opts: WriterOptions) -> Vec<String> {
    let fence = fence_for(content);
    let mut lines = Vec::new();
    if !opts.compact_headers {
        lines.push(String::new());
    }
    lines.push(format!("{fence}{}", language.unwrap_or("")));
    if !content.is_empty() {
        lines.extend(
            content
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned()),
        );
    }
    lines.push(fence);
    lines
}

fn result_header(id: &str, suffix: Option<&str>) -> String {
    match suffix.filter(|s| !s.is_empty()) {
        Some(suffix) => format!("**Tool Result:** `{id}` ({suffix})"),
        None => format!("**Tool Result:** `{id}`"),
    }
}

/// Where [`insert_placeholder`] put (or found) a result header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The edit to apply; `None` when a result already exists.
    pub edit: Option<TextEdit>,
    /// The line the result header has after the edit.
    pub header_line: u32,
}

/// Inserts a `**Tool Result:**` placeholder with `status` for a tool use (spec §1.17).
///
/// Results stay ordered like their tool uses and come before any user text. When a result for
/// the tool use already exists, nothing is written and its header line is returned.
///
/// # Errors
///
/// [`AstError::UnknownToolUse`] when no tool use has `tool_use_id`.
pub fn insert_placeholder(
    doc: &Document,
    tool_use_id: &str,
    status: ToolStatus,
    opts: WriterOptions,
) -> Result<Placement, AstError> {
    let table = build_tool_sibling_table(doc);
    let pair = table.get(tool_use_id).copied().unwrap_or_default();
    let (Some(tool_use), Some(use_message)) = (pair.tool_use, pair.use_message) else {
        return Err(AstError::UnknownToolUse {
            id: tool_use_id.to_owned(),
        });
    };
    if let Some(result) = pair.tool_result {
        return Ok(Placement {
            edit: None,
            header_line: result.span.start_line,
        });
    }
    let assistant = &doc.messages[use_message];
    let index_of = |id: &ToolUseId| assistant.tool_uses().position(|u| u.id == *id);
    let k = index_of(&tool_use.id).unwrap_or(0);
    let mut block = vec![result_header(tool_use_id, Some(status.as_str()))];
    block.extend(body_lines("", None, opts));

    let edit = match doc
        .messages
        .get(use_message + 1)
        .filter(|m| m.role == Role::You)
    {
        Some(user) if user.tool_results().next().is_some() => {
            let predecessor = user
                .tool_results()
                .filter_map(|r| index_of(&r.tool_use_id).filter(|&i| i < k).map(|i| (i, r)))
                .max_by_key(|(i, _)| *i);
            if let Some((_, r)) = predecessor {
                block.insert(0, String::new());
                TextEdit::insert(r.span.end_line + 1, block)
            } else {
                let first = user
                    .tool_results()
                    .next()
                    .map_or(user.span.start_line + 1, |r| r.span.start_line);
                block.push(String::new());
                TextEdit::insert(first, block)
            }
        }
        Some(user) => {
            block.insert(0, String::new());
            let after_marker = user.span.start_line + 1;
            let next_has_text =
                user.span.end_line >= after_marker && line_has_text(user, after_marker);
            if next_has_text {
                block.push(String::new());
            }
            TextEdit::insert(after_marker, block)
        }
        None => {
            let mut lines = vec![String::new(), "@You:".to_owned(), String::new()];
            lines.extend(block);
            TextEdit::insert(assistant.span.end_line + 1, lines)
        }
    };
    let header_line = edit.start
        + edit
            .lines
            .iter()
            .position(|l| l.starts_with("**Tool Result:**"))
            .unwrap_or(0) as u32;
    Ok(Placement {
        edit: Some(edit),
        header_line,
    })
}

/// Whether `line` of `message` holds non-whitespace text, judged from its segments.
fn line_has_text(message: &Message, line: u32) -> bool {
    message.segments.iter().any(|s| match s {
        Segment::Text(t) => t.span.is_some_and(|span| {
            span.lines().contains_line(line) && {
                let offset = (line - span.start_line) as usize;
                t.value
                    .split('\n')
                    .nth(offset)
                    .is_some_and(|l| !l.trim().is_empty())
            }
        }),
        other => other.lines().is_some_and(|span| span.start_line == line),
    })
}

/// Replaces the (last) result block of a tool use with its final result (spec §1.16).
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
    let span = result_span(doc, tool_use_id)?;
    let (content, language, is_error) = body.render();
    let header = result_header(tool_use_id, is_error.then_some("error"));
    Ok(TextEdit::replace(
        span.start_line,
        span.end_line,
        block_lines(header, &content, language, opts),
    ))
}

fn result_span(doc: &Document, tool_use_id: &str) -> Result<crate::LineSpan, AstError> {
    build_tool_sibling_table(doc)
        .get(tool_use_id)
        .and_then(|pair| pair.tool_result)
        .map(|r| r.span)
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

/// The lines of a `**Job Result:**` block.
pub fn job_result_lines(
    job_id: &JobId,
    is_error: bool,
    content: &str,
    opts: WriterOptions,
) -> Vec<String> {
    let header = if is_error {
        format!("**Job Result:** `{job_id}` (error)")
    } else {
        format!("**Job Result:** `{job_id}`")
    };
    block_lines(header, content, None, opts)
}

/// How [`place_job_result`] placed a job result (spec §8.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPlacement {
    /// An existing Job Result with the same id was replaced in place.
    Replaced,
    /// Put before the user's unsent draft, which stays last.
    Displaced,
    /// Appended to the last `@You:` message.
    Appended,
    /// A new `@You:` message was created at the end.
    Created,
}

/// Places a Job Result block (from [`job_result_lines`]) per the delivery rules (spec §8.5).
pub fn place_job_result(
    doc: &Document,
    job_id: &JobId,
    block: Vec<String>,
) -> (TextEdit, JobPlacement) {
    if let Some(existing) = find_job_result(doc, job_id.as_str()) {
        let span = existing.node.span;
        return (
            TextEdit::replace(span.start_line, span.end_line, block),
            JobPlacement::Replaced,
        );
    }
    let end = doc.line_count + 1;
    let Some(last) = doc.messages.last().filter(|m| m.role == Role::You) else {
        let mut lines = Vec::new();
        if doc.line_count > 0 && !last_line_blank(doc) {
            lines.push(String::new());
        }
        lines.extend(["@You:".to_owned(), String::new()]);
        lines.extend(block);
        return (TextEdit::insert(end, lines), JobPlacement::Created);
    };
    if has_user_text(last) {
        let previous = doc.messages.len().checked_sub(2).map(|i| &doc.messages[i]);
        if let Some(previous) = previous.filter(|m| {
            m.role == Role::You && m.job_results().next().is_some() && !has_user_text(m)
        }) {
            let mut lines = Vec::new();
            if !message_ends_blank(previous) {
                lines.push(String::new());
            }
            lines.extend(block);
            lines.push(String::new());
            return (
                TextEdit::insert(previous.span.end_line + 1, lines),
                JobPlacement::Displaced,
            );
        }
        let mut lines = vec!["@You:".to_owned(), String::new()];
        lines.extend(block);
        lines.push(String::new());
        return (
            TextEdit::insert(last.span.start_line, lines),
            JobPlacement::Displaced,
        );
    }
    let mut lines = Vec::new();
    if last.job_results().next().is_some() && !message_ends_blank(last) {
        lines.push(String::new());
    }
    lines.extend(block);
    (TextEdit::insert(end, lines), JobPlacement::Appended)
}

fn has_user_text(message: &Message) -> bool {
    message.segments.iter().any(|s| match s {
        Segment::Text(t) => !t.value.trim().is_empty(),
        Segment::Expression(_) | Segment::Code(_) => true,
        _ => false,
    })
}

/// Whether the message's last line is blank (its span includes trailing blank lines).
fn message_ends_blank(message: &Message) -> bool {
    let content_end = message
        .segments
        .iter()
        .filter_map(Segment::lines)
        .map(|s| s.end_line)
        .max()
        .unwrap_or(message.span.start_line);
    content_end < message.span.end_line
}

fn last_line_blank(doc: &Document) -> bool {
    doc.messages.last().is_some_and(message_ends_blank)
}
