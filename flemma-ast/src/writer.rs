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

use std::collections::{BTreeMap, HashSet};

use crate::ast::{Document, Message, Role, Segment, ToolStatus};
pub use crate::edit::{LineIndex, TextEdit, apply_edits, apply_edits_in_place};
use crate::error::AstError;
use crate::messages as msg;
use crate::query::{ToolIndex, ToolPair, build_tool_sibling_table, find_job_result};
use flemma_ids::{JobId, ToolName, ToolUseId};

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
/// the tool use already exists, nothing is written and its header line is returned. To place
/// placeholders for several tool uses at once (Phase 1 of the tool cycle), use
/// [`insert_placeholders`]: edits from separate calls can collide when applied together.
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
    if let Some(result) = table.get(tool_use_id).and_then(|pair| pair.tool_result) {
        return Ok(Placement {
            edit: None,
            header_line: result.span.start_line,
        });
    }
    let edit = place_all(doc, &table, &[(tool_use_id, status)], opts)?
        .into_iter()
        .next();
    let header_line = edit.as_ref().map_or(0, |edit| {
        edit.start
            + edit
                .lines
                .iter()
                .position(|l| l.starts_with("**Tool Result:**"))
                .unwrap_or(0) as u32
    });
    Ok(Placement { edit, header_line })
}

/// Placeholders for several tool uses at once, as one set of edits (spec §1.17, §7.1 Phase 1).
///
/// Each `(tool_use_id, status)` gets a `**Tool Result:**` placeholder unless a result for that
/// tool use already exists (or the id came earlier in the list). The edits do not overlap and
/// are meant to be applied together, as one undo step, with [`apply_edits`] or
/// [`IncrementalParser::apply_edits`](crate::IncrementalParser::apply_edits). The result is what
/// placing the placeholders one at a time would give: the placeholders of one assistant
/// message share one `@You:` message, in the order of their tool uses, after the results of
/// earlier tool uses and before any user text.
///
/// # Errors
///
/// [`AstError::UnknownToolUse`] for the first id that names no tool use; nothing is placed.
///
/// ```
/// use flemma_ast::writer::{self, WriterOptions};
/// use flemma_ast::{ToolStatus, apply_edits, parse};
///
/// let text = "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\
///             **Tool Use:** `bash` (`t2`)\n```json\n{}\n```\n";
/// let edits = writer::insert_placeholders(
///     &parse(text),
///     &[("t2", ToolStatus::Pending), ("t1", ToolStatus::Approved)],
///     WriterOptions::default(),
/// )?;
/// let text = apply_edits(text, &edits)?;
/// assert!(text.ends_with(
///     "@You:\n\n**Tool Result:** `t1` (approved)\n```\n```\n\n\
///      **Tool Result:** `t2` (pending)\n```\n```\n"
/// ));
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
pub fn insert_placeholders(
    doc: &Document,
    placeholders: &[(&str, ToolStatus)],
    opts: WriterOptions,
) -> Result<Vec<TextEdit>, AstError> {
    place_all(doc, &build_tool_sibling_table(doc), placeholders, opts)
}

/// Where placeholders go, relative to the messages around their tool use (spec §1.17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Anchor {
    /// No `@You:` after the assistant message: a new one after it.
    NewMessage,
    /// A `@You:` without results: right after its marker (before its text, if any).
    AfterMarker {
        /// The line after the marker has text, which must stay separated by a blank line.
        text_follows: bool,
    },
    /// No existing result of an earlier tool use: before the first result.
    BeforeFirstResult,
    /// After the result of the nearest earlier tool use.
    AfterResult,
}

/// Placeholder blocks bound for one insertion point: `(tool use index, list index, lines)`.
type Group = Vec<(usize, usize, Vec<String>)>;

fn place_all(
    doc: &Document,
    table: &foldhash::HashMap<&str, ToolPair<'_>>,
    placeholders: &[(&str, ToolStatus)],
    opts: WriterOptions,
) -> Result<Vec<TextEdit>, AstError> {
    let mut groups: BTreeMap<(u32, Anchor), Group> = BTreeMap::new();
    let mut seen = HashSet::new();
    for (order, &(id, status)) in placeholders.iter().enumerate() {
        let pair = table.get(id).copied().unwrap_or_default();
        let (Some(tool_use), Some(use_message)) = (pair.tool_use, pair.use_message) else {
            return Err(AstError::UnknownToolUse { id: id.to_owned() });
        };
        if pair.tool_result.is_some() || !seen.insert(id) {
            continue;
        }
        let assistant = &doc.messages[use_message];
        let index_of = |id: &ToolUseId| assistant.tool_uses().position(|u| u.id == *id);
        let k = index_of(&tool_use.id).unwrap_or(0);
        let key = match doc
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
                    (r.span.end_line + 1, Anchor::AfterResult)
                } else {
                    let first = user
                        .tool_results()
                        .next()
                        .map_or(user.span.start_line + 1, |r| r.span.start_line);
                    (first, Anchor::BeforeFirstResult)
                }
            }
            Some(user) => {
                let after_marker = user.span.start_line + 1;
                let text_follows =
                    user.span.end_line >= after_marker && line_has_text(user, after_marker);
                (after_marker, Anchor::AfterMarker { text_follows })
            }
            None => (assistant.span.end_line + 1, Anchor::NewMessage),
        };
        let mut block = vec![result_header(id, Some(status.as_str()))];
        block.extend(body_lines("", None, opts));
        groups.entry(key).or_default().push((k, order, block));
    }
    Ok(groups
        .into_iter()
        .map(|((line, anchor), mut blocks)| {
            blocks.sort_by_key(|&(k, order, _)| (k, order));
            TextEdit::insert(line, group_lines(anchor, blocks))
        })
        .collect())
}

/// The lines one insertion point receives: blocks separated by blank lines, and the blank
/// lines (and marker) their anchor needs around them.
fn group_lines(anchor: Anchor, blocks: Group) -> Vec<String> {
    let mut lines = Vec::new();
    if anchor == Anchor::NewMessage {
        lines.extend([String::new(), "@You:".to_owned()]);
    }
    for (i, (_, _, block)) in blocks.into_iter().enumerate() {
        // Before the first result each block is followed by a blank line instead.
        if i > 0 || anchor != Anchor::BeforeFirstResult {
            lines.push(String::new());
        }
        lines.extend(block);
    }
    if matches!(
        anchor,
        Anchor::BeforeFirstResult | Anchor::AfterMarker { text_follows: true }
    ) {
        lines.push(String::new());
    }
    lines
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
    write_at(result_span(doc, tool_use_id)?, tool_use_id, body, opts)
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
    let span = index
        .last_tool_result(doc, tool_use_id)
        .map(|found| found.node.span)
        .ok_or_else(|| AstError::UnknownToolResult {
            id: tool_use_id.to_owned(),
        })?;
    write_at(span, tool_use_id, body, opts)
}

/// The edit replacing the block at `span` with a final result.
fn write_at(
    span: crate::LineSpan,
    tool_use_id: &str,
    body: &ResultBody,
    opts: WriterOptions,
) -> Result<TextEdit, AstError> {
    let (content, language, is_error) = body.render();
    let header = result_header(tool_use_id, is_error.then_some("error"));
    Ok(TextEdit::replace(
        span.start_line,
        span.end_line,
        block_lines(header, &content, language, opts),
    ))
}

/// The span of the last result block answering `tool_use_id`. Searched from the end: the
/// blocks a harness rewrites are usually the newest, so this touches only the last messages.
fn result_span(doc: &Document, tool_use_id: &str) -> Result<crate::LineSpan, AstError> {
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
