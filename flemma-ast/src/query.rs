//! Stateless queries over a [`Document`].

use std::collections::HashMap;

use crate::ast::{Document, JobResult, Message, Segment, ToolResult, ToolUse};
use flemma_ids::{ToolName, ToolUseId};

/// A node found in a document, with the message that holds it.
#[derive(Debug, Clone, Copy)]
pub struct SegmentRef<'d, T = Segment> {
    /// The node.
    pub node: &'d T,
    /// The message holding it.
    pub message: &'d Message,
    /// Index of that message in [`Document::messages`].
    pub message_index: usize,
    /// Index of the segment in [`Message::segments`].
    pub segment_index: usize,
}

/// Walks every top-level segment with its position.
fn segments(doc: &Document) -> impl DoubleEndedIterator<Item = SegmentRef<'_>> {
    doc.messages
        .iter()
        .enumerate()
        .flat_map(|(message_index, message)| {
            message
                .segments
                .iter()
                .enumerate()
                .map(move |(segment_index, node)| SegmentRef {
                    node,
                    message,
                    message_index,
                    segment_index,
                })
        })
}

fn narrow<'d, T>(found: &SegmentRef<'d>, node: &'d T) -> SegmentRef<'d, T> {
    SegmentRef {
        node,
        message: found.message,
        message_index: found.message_index,
        segment_index: found.segment_index,
    }
}

/// The tool use with `id`.
///
/// ```
/// let doc = flemma_ast::parse("@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n");
/// let found = flemma_ast::find_tool_use_by_id(&doc, "t1").unwrap();
/// assert_eq!((found.node.name.as_str(), found.message_index), ("bash", 0));
/// ```
pub fn find_tool_use_by_id<'d>(doc: &'d Document, id: &str) -> Option<SegmentRef<'d, ToolUse>> {
    segments(doc).find_map(|s| match s.node {
        Segment::ToolUse(u) if u.id == id => Some(narrow(&s, &**u)),
        _ => None,
    })
}

/// The first tool result answering `id`, anywhere in the document.
pub fn find_tool_result_by_id<'d>(
    doc: &'d Document,
    id: &str,
) -> Option<SegmentRef<'d, ToolResult>> {
    segments(doc).find_map(|s| match s.node {
        Segment::ToolResult(r) if r.tool_use_id == id => Some(narrow(&s, &**r)),
        _ => None,
    })
}

/// For a tool use, the first result with its id; for a tool result, its tool use.
pub fn find_tool_sibling<'d>(doc: &'d Document, segment: &Segment) -> Option<SegmentRef<'d>> {
    match segment {
        Segment::ToolUse(u) => segments(doc)
            .find(|s| matches!(s.node, Segment::ToolResult(r) if r.tool_use_id == u.id)),
        Segment::ToolResult(r) => {
            segments(doc).find(|s| matches!(s.node, Segment::ToolUse(u) if u.id == r.tool_use_id))
        }
        _ => None,
    }
}

/// A tool use and its result, as gathered by [`build_tool_sibling_table`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolPair<'d> {
    /// The tool use, when present.
    pub tool_use: Option<&'d ToolUse>,
    /// Index of the message holding the tool use.
    pub use_message: Option<usize>,
    /// The result; when several answer the same id, the last one in document order.
    pub tool_result: Option<&'d ToolResult>,
    /// Index of the message holding the result.
    pub result_message: Option<usize>,
}

/// Maps every tool use id to its use and result (a map with a fast, non-cryptographic hasher:
/// ids come from the transcript, and the table lives for one query).
pub fn build_tool_sibling_table(doc: &Document) -> foldhash::HashMap<&str, ToolPair<'_>> {
    let mut table: foldhash::HashMap<&str, ToolPair<'_>> = foldhash::HashMap::default();
    for s in segments(doc) {
        match s.node {
            Segment::ToolUse(u) => {
                let pair = table.entry(u.id.as_str()).or_default();
                if pair.tool_use.is_none() {
                    pair.tool_use = Some(u);
                    pair.use_message = Some(s.message_index);
                }
            }
            Segment::ToolResult(r) => {
                let pair = table.entry(r.tool_use_id.as_str()).or_default();
                pair.tool_result = Some(r);
                pair.result_message = Some(s.message_index);
            }
            _ => {}
        }
    }
    table
}

/// Where the tool uses and results of a document stand, by id: the look-ups of
/// [`find_tool_use_by_id`] and [`find_tool_result_by_id`] (and the last result, which the
/// [`writer`](crate::writer) rewrites) without a scan of the document.
///
/// Built by one scan of a document ([`ToolIndex::new`]), or kept by an
/// [`IncrementalParser`](crate::IncrementalParser) for its document
/// ([`tool_index`](crate::IncrementalParser::tool_index)). An index describes the document it
/// was built from: given another, its look-ups find nothing or what stands at the same places,
/// never a node of another id.
///
/// ```
/// use flemma_ast::{ToolIndex, parse};
///
/// let doc = parse(
///     "@Assistant:\n**Tool Use:** `bash` (`t1`)\n```json\n{}\n```\n\n\
///      @You:\n**Tool Result:** `t1` (pending)\n```\n```\n\n**Tool Result:** `t1`\n```\nok\n```\n",
/// );
/// let index = ToolIndex::new(&doc);
/// assert_eq!(index.tool_use(&doc, "t1").unwrap().node.name.as_str(), "bash");
/// assert_eq!(index.tool_result(&doc, "t1").unwrap().segment_index, 0);
/// assert_eq!(index.last_tool_result(&doc, "t1").unwrap().node.content, "ok");
/// assert!(index.tool_use(&doc, "t2").is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolIndex {
    slots: foldhash::HashMap<ToolUseId, Slot>,
}

/// Positions `(message, segment)` of one id's first tool use and first and last results.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    tool_use: Option<(u32, u32)>,
    last_use: Option<(u32, u32)>,
    first_result: Option<(u32, u32)>,
    last_result: Option<(u32, u32)>,
}

impl ToolIndex {
    /// Indexes `doc` (one scan).
    pub fn new(doc: &Document) -> Self {
        let mut slots: foldhash::HashMap<ToolUseId, Slot> = foldhash::HashMap::default();
        for s in segments(doc) {
            let at = Some((s.message_index as u32, s.segment_index as u32));
            match s.node {
                Segment::ToolUse(u) => {
                    let slot = slots.entry(u.id.clone()).or_default();
                    if slot.tool_use.is_none() {
                        slot.tool_use = at;
                    }
                    slot.last_use = at;
                }
                Segment::ToolResult(r) => {
                    let slot = slots.entry(r.tool_use_id.clone()).or_default();
                    if slot.first_result.is_none() {
                        slot.first_result = at;
                    }
                    slot.last_result = at;
                }
                _ => {}
            }
        }
        Self { slots }
    }

    /// The tool use with `id` (the first, as [`find_tool_use_by_id`]).
    pub fn tool_use<'d>(&self, doc: &'d Document, id: &str) -> Option<SegmentRef<'d, ToolUse>> {
        let at = self.slots.get(id)?.tool_use?;
        found(doc, at, |s| match s {
            Segment::ToolUse(u) if u.id == id => Some(&**u),
            _ => None,
        })
    }

    /// The tool use with `id` when the document has exactly one: `Some(Some(_))`; `Some(None)`
    /// when it has none; `None` when several tool uses share the id (which one a caller wants
    /// then depends on where it looks from).
    #[allow(
        clippy::option_option,
        reason = "none, one, or several: the caller scans only in the last case"
    )]
    pub fn only_tool_use<'d>(
        &self,
        doc: &'d Document,
        id: &str,
    ) -> Option<Option<SegmentRef<'d, ToolUse>>> {
        let Some(slot) = self.slots.get(id) else {
            return Some(None);
        };
        match (slot.tool_use, slot.last_use) {
            (None, _) => Some(None),
            (Some(first), Some(last)) if first != last => None,
            (Some(_), _) => Some(self.tool_use(doc, id)),
        }
    }

    /// The first tool result answering `id`, as [`find_tool_result_by_id`].
    pub fn tool_result<'d>(
        &self,
        doc: &'d Document,
        id: &str,
    ) -> Option<SegmentRef<'d, ToolResult>> {
        let at = self.slots.get(id)?.first_result?;
        found(doc, at, |s| result_with(s, id))
    }

    /// The last tool result answering `id`: the block the [`writer`](crate::writer) rewrites.
    pub fn last_tool_result<'d>(
        &self,
        doc: &'d Document,
        id: &str,
    ) -> Option<SegmentRef<'d, ToolResult>> {
        let at = self.slots.get(id)?.last_result?;
        found(doc, at, |s| result_with(s, id))
    }
}

fn result_with<'d>(segment: &'d Segment, id: &str) -> Option<&'d ToolResult> {
    match segment {
        Segment::ToolResult(r) if r.tool_use_id == id => Some(&**r),
        _ => None,
    }
}

/// The node at `(message, segment)`, when `pick` accepts it.
fn found<'d, T>(
    doc: &'d Document,
    (message_index, segment_index): (u32, u32),
    pick: impl FnOnce(&'d Segment) -> Option<&'d T>,
) -> Option<SegmentRef<'d, T>> {
    let (message_index, segment_index) = (message_index as usize, segment_index as usize);
    let message = doc.messages.get(message_index)?;
    let node = pick(message.segments.get(segment_index)?)?;
    Some(SegmentRef {
        node,
        message,
        message_index,
        segment_index,
    })
}

/// The job result with `job_id`.
pub fn find_job_result<'d>(doc: &'d Document, job_id: &str) -> Option<SegmentRef<'d, JobResult>> {
    segments(doc).find_map(|s| match s.node {
        Segment::JobResult(j) if j.job_id == job_id => Some(narrow(&s, &**j)),
        _ => None,
    })
}

/// Name and label of a tool use, as gathered by [`build_tool_use_index`].
#[derive(Debug, Clone, Copy)]
pub struct ToolUseInfo<'d> {
    /// The tool name.
    pub name: &'d ToolName,
    /// The `label` input field, when it is a string.
    pub label: Option<&'d str>,
}

/// Maps every tool use id to its name and label.
pub fn build_tool_use_index(doc: &Document) -> HashMap<&str, ToolUseInfo<'_>> {
    segments(doc)
        .filter_map(|s| match s.node {
            Segment::ToolUse(u) => Some((
                u.id.as_str(),
                ToolUseInfo {
                    name: &u.name,
                    label: u.label(),
                },
            )),
            _ => None,
        })
        .collect()
}

/// The top-level segment at a 1-based line and byte column.
///
/// Block segments (tool blocks, thinking, abort markers) match on the line alone; inline
/// segments (text and templates) also on the column.
pub fn find_segment_at_position(doc: &Document, line: u32, col: u32) -> Option<SegmentRef<'_>> {
    let (index, message) = find_message_at_line(doc, line)?;
    message
        .segments
        .iter()
        .enumerate()
        .find(|(_, segment)| match segment {
            Segment::Text(t) => t.span.is_some_and(|s| s.contains(line, col)),
            Segment::Expression(t) | Segment::Code(t) => t.span.contains(line, col),
            other => other.lines().is_some_and(|s| s.contains_line(line)),
        })
        .map(|(segment_index, node)| SegmentRef {
            node,
            message,
            message_index: index,
            segment_index,
        })
}

/// The message covering a 1-based line, with its index.
pub fn find_message_at_line(doc: &Document, line: u32) -> Option<(usize, &Message)> {
    let index = doc.messages.partition_point(|m| m.span.end_line < line);
    let message = doc.messages.get(index)?;
    message.span.contains_line(line).then_some((index, message))
}
