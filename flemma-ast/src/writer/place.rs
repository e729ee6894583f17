//! Result placeholders: where Phase 1 of the tool cycle puts them.

use std::collections::{BTreeMap, HashSet};

use super::block::{WriterOptions, body_lines, result_header};
use crate::ast::{Document, Message, Role, Segment, ToolStatus};
use crate::edit::TextEdit;
use crate::error::AstError;
use crate::query::{ToolPair, build_tool_sibling_table};
use flemma_ids::ToolUseId;

/// Where [`insert_placeholder`] put (or found) a result header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The edit to apply; `None` when a result already exists.
    pub edit: Option<TextEdit>,
    /// The line the result header has after the edit.
    pub header_line: u32,
}

/// Inserts a `**Tool Result:**` placeholder with `status` for a tool use.
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

/// Placeholders for several tool uses at once, as one set of edits (Phase 1 of the tool cycle).
///
/// Each `(tool_use_id, status)` gets a `**Tool Result:**` placeholder unless a result for that
/// tool use already exists (or the id came earlier in the list). The edits do not overlap and
/// are meant to be applied together, as one undo step, with [`apply_edits`](crate::apply_edits) or
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

/// Where placeholders go, relative to the messages around their tool use.
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
    // Where each tool use stands in its message, per message: one scan of a message, however
    // many of its calls get a placeholder.
    let mut positions: foldhash::HashMap<usize, foldhash::HashMap<&ToolUseId, usize>> =
        foldhash::HashMap::default();
    for (order, &(id, status)) in placeholders.iter().enumerate() {
        let pair = table.get(id).copied().unwrap_or_default();
        let (Some(tool_use), Some(use_message)) = (pair.tool_use, pair.use_message) else {
            return Err(AstError::UnknownToolUse { id: id.to_owned() });
        };
        if pair.tool_result.is_some() || !seen.insert(id) {
            continue;
        }
        let assistant = &doc.messages[use_message];
        let position = positions.entry(use_message).or_insert_with(|| {
            let mut map = foldhash::HashMap::default();
            for (i, u) in assistant.tool_uses().enumerate() {
                map.entry(&u.id).or_insert(i);
            }
            map
        });
        let index_of = |id: &ToolUseId| position.get(id).copied();
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
