//! Reading Phase 2's work from a document, and the small rules the executor applies.

use std::collections::HashMap;

use flemma_ast::writer::ResultBody;
use flemma_ast::{Document, Segment, ToolIndex, ToolStatus};
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

use super::state::Call;
use crate::messages as msg;

/// Phase 2's work, read from one document.
pub(super) struct Plan {
    /// Results to write now: `None` clears a pending suffix (a pasted result).
    pub(super) settle: Vec<(ToolUseId, ToolName, Option<ResultBody>)>,
    /// Empty pending blocks.
    pub(super) pending: Vec<Call>,
    /// Approved, empty, not running.
    pub(super) approved: Vec<Call>,
    /// Approved blocks with edited content.
    pub(super) protected: usize,
}

/// A lifecycle result, its tool use and the index of the tool use's message.
type Lifecycle<'d> = (&'d flemma_ast::ToolResult, &'d flemma_ast::ToolUse, usize);

/// The last result of each tool use whose status is a lifecycle status, with its tool use, in
/// the order of the tool uses.
fn lifecycle_results<'d>(doc: &'d Document, tool_index: &ToolIndex) -> Vec<Lifecycle<'d>> {
    // Lifecycle results are few and recent: each looks for its tool use backwards from its own
    // message, instead of indexing the whole transcript.
    let mut groups: Vec<(u32, Lifecycle<'_>)> = Vec::new();
    for (index, message) in doc.messages.iter().enumerate() {
        for result in message.tool_results() {
            if !result.status.is_some_and(ToolStatus::is_lifecycle) {
                continue;
            }
            let id = result.tool_use_id.as_str();
            // Only the last result of a tool use counts.
            let last = tool_index.last_tool_result(doc, id);
            if !last.is_some_and(|r| std::ptr::eq(r.node, result)) {
                continue;
            }
            // The nearest tool use at or before the result's message.
            let found = match tool_index.only_tool_use(doc, id) {
                Some(Some(only)) => {
                    (only.message_index <= index).then_some((only.node, only.message_index))
                }
                Some(None) => None,
                None => doc.messages[..=index]
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(i, m)| m.tool_uses().find(|u| u.id == id).map(|u| (u, i))),
            };
            if let Some((tool_use, use_message)) = found {
                groups.push((tool_use.span.start_line, (result, tool_use, use_message)));
            }
        }
    }
    groups.sort_by_key(|(line, _)| *line);
    groups.into_iter().map(|(_, group)| group).collect()
}

/// Phase 2's work in `doc`: results to settle, pending and approved calls (those in
/// `running` left out), and approved blocks with content.
pub(super) fn plan<T>(
    doc: &Document,
    tool_index: &ToolIndex,
    running: &HashMap<ToolUseId, T>,
) -> Plan {
    let mut plan = Plan {
        settle: Vec::new(),
        pending: Vec::new(),
        approved: Vec::new(),
        protected: 0,
    };
    for (result, tool_use, message) in lifecycle_results(doc, tool_index) {
        let id = tool_use.id.clone();
        let tool = tool_use.name.clone();
        let has_content = !result.content.trim().is_empty();
        let error = |message: String| {
            Some(ResultBody::Error {
                message: Some(message),
                partial_output: None,
            })
        };
        let call = || Call {
            id: id.clone(),
            tool: tool.clone(),
            input: Value::Object(tool_use.input().clone()),
        };
        match result.status {
            Some(ToolStatus::Pending) if has_content => plan.settle.push((id, tool, None)),
            Some(ToolStatus::Pending) => plan.pending.push(call()),
            // A resolver's reason (a hook's names the hook) is the placeholder's body.
            Some(ToolStatus::Denied) if has_content => {
                let text = format!("{} {}", msg::DENIED, result.content.trim());
                plan.settle.push((id, tool, error(text)));
            }
            Some(ToolStatus::Denied) => {
                plan.settle.push((id, tool, error(msg::DENIED.to_owned())));
            }
            Some(ToolStatus::Rejected) => {
                let text = if has_content {
                    result.content.clone()
                } else {
                    msg::REJECTED.to_owned()
                };
                plan.settle.push((id, tool, error(text)));
            }
            Some(ToolStatus::Aborted) => {
                let text = abort_message(&doc.messages[message]);
                plan.settle.push((id, tool, error(text)));
            }
            Some(ToolStatus::Approved) if has_content => plan.protected += 1,
            Some(ToolStatus::Approved) if running.contains_key(id.as_str()) => {}
            Some(ToolStatus::Approved) => plan.approved.push(call()),
            _ => {}
        }
    }
    plan
}

/// The abort marker's message of an assistant message (`Response interrupted by the user.`
/// when it has none).
fn abort_message(message: &flemma_ast::Message) -> String {
    message
        .segments
        .iter()
        .find_map(|s| match s {
            Segment::Aborted(a) if !a.message.trim().is_empty() => Some(a.message.clone()),
            _ => None,
        })
        .unwrap_or_else(|| msg::REQUEST_ABORTED.to_owned())
}

/// Whether a message holds anything but whitespace.
pub(super) fn has_content(message: &flemma_ast::Message) -> bool {
    message.segments.iter().any(|s| match s {
        Segment::Text(t) => !t.value.trim().is_empty(),
        _ => true,
    })
}
