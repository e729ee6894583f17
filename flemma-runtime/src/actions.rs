//! What a user does to a pending call: approve it, reject it, approve them all.
//! Each is a set of [`TextEdit`]s computed from the document, so a host with its own buffer can
//! apply them as one undo step.

use flemma_ast::writer::{self, WriterOptions};
use flemma_ast::{Document, TextEdit, ToolStatus};

use crate::messages as msg;

/// Why a user action cannot apply (these are the Flemma plugin's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// No tool use has this id: `Tool not found: <id>`.
    #[error("Tool not found: {0}")]
    ToolNotFound(String),
    /// The tool use has no result block: `No tool result placeholder for <id>`.
    #[error("No tool result placeholder for {0}")]
    NoPlaceholder(String),
    /// The result is final: `Tool <id> has already completed`.
    #[error("Tool {0} has already completed")]
    AlreadyCompleted(String),
    /// `approve_all_pending` found nothing: `No pending tools to approve`.
    #[error("No pending tools to approve")]
    NothingPending,
}

/// The result block of `id`, checked to still carry a lifecycle status.
fn placeholder<'d>(doc: &'d Document, id: &str) -> Result<&'d flemma_ast::ToolResult, ActionError> {
    let table = flemma_ast::build_tool_sibling_table(doc);
    let pair = table.get(id).filter(|p| p.tool_use.is_some());
    let pair = pair.ok_or_else(|| ActionError::ToolNotFound(id.to_owned()))?;
    let result = pair
        .tool_result
        .ok_or_else(|| ActionError::NoPlaceholder(id.to_owned()))?;
    match result.status {
        Some(status) if status.is_lifecycle() => Ok(result),
        _ => Err(ActionError::AlreadyCompleted(id.to_owned())),
    }
}

fn edit_error(id: &str) -> impl Fn(flemma_ast::AstError) -> ActionError + '_ {
    move |_| ActionError::NoPlaceholder(id.to_owned())
}

/// Marks the call `id` approved (its header suffix becomes `(approved)`).
///
/// # Errors
///
/// [`ActionError`] when there is no such call, no placeholder, or it already completed.
pub fn approve(doc: &Document, id: &str) -> Result<Vec<TextEdit>, ActionError> {
    placeholder(doc, id)?;
    let edit = writer::set_status(doc, id, Some(ToolStatus::Approved)).map_err(edit_error(id))?;
    Ok(vec![edit])
}

/// Marks the call `id` rejected; `message` (the user's reason) goes into the block as
/// `User feedback: <reason>` ([`rejection_feedback`]), the error the model sees. Without a
/// reason (or a blank one) the block stays empty and Phase 2 answers the call with `This tool
/// has been rejected by the user.` Text a user types into a `(rejected)` block themselves is
/// sent as written; only a reason given here is wrapped.
///
/// # Errors
///
/// As [`approve`].
pub fn reject(
    doc: &Document,
    id: &str,
    message: Option<&str>,
    opts: WriterOptions,
) -> Result<Vec<TextEdit>, ActionError> {
    placeholder(doc, id)?;
    let status = writer::set_status(doc, id, Some(ToolStatus::Rejected)).map_err(edit_error(id))?;
    let mut edits = vec![status];
    if let Some(message) = message.filter(|m| !m.trim().is_empty()) {
        let feedback = rejection_feedback(message);
        let body = writer::rewrite_fence_body(doc, id, &feedback, opts).map_err(edit_error(id))?;
        // The status rewrite covers the header line, the body rewrite what follows it.
        edits.push(body);
    }
    Ok(edits)
}

/// The calls that wait for a person's decision: each empty `(pending)` block, as (tool, id),
/// in document order (a block whose call is gone has the tool `""`).
///
/// ```
/// let doc = flemma_ast::parse(
///     "@Assistant:\n**Tool Use:** `bash` (`t1`)\n\n```json\n{}\n```\n\n@You:\n\n**Tool Result:** `t1` (pending)\n```\n```\n",
/// );
/// assert_eq!(flemma_runtime::pending_calls(&doc), [("bash".to_owned(), "t1".to_owned())]);
/// ```
pub fn pending_calls(doc: &Document) -> Vec<(String, String)> {
    let mut tools = std::collections::HashMap::new();
    let mut waiting = Vec::new();
    for segment in doc.messages.iter().flat_map(|m| &m.segments) {
        match segment {
            flemma_ast::Segment::ToolUse(call) => {
                tools.insert(call.id.to_string(), call.name.to_string());
            }
            flemma_ast::Segment::ToolResult(result)
                if result.status == Some(ToolStatus::Pending)
                    && result.content.trim().is_empty() =>
            {
                let id = result.tool_use_id.to_string();
                waiting.push((tools.get(&id).cloned().unwrap_or_default(), id));
            }
            _ => {}
        }
    }
    waiting
}

/// Approves every `pending` call.
///
/// # Errors
///
/// [`ActionError::NothingPending`] when no call is pending.
pub fn approve_all_pending(doc: &Document) -> Result<Vec<TextEdit>, ActionError> {
    let mut edits = Vec::new();
    for message in &doc.messages {
        for result in message.tool_results() {
            if result.status == Some(ToolStatus::Pending) {
                let id = result.tool_use_id.as_str();
                edits.push(
                    writer::set_status(doc, id, Some(ToolStatus::Approved))
                        .map_err(edit_error(id))?,
                );
            }
        }
    }
    if edits.is_empty() {
        return Err(ActionError::NothingPending);
    }
    Ok(edits)
}

/// The text a user's rejection reason becomes, the error the model reads:
/// `User feedback: <reason>` (`tool.rejected.feedback`).
///
/// The reason is trimmed. A reason that already starts with `User feedback: ` (a host that
/// pre-fills its prompt with it, as the reference's rejection popup does) is not wrapped
/// twice. [`reject`] and a host [`Approver`](flemma_core::Approver)'s
/// [`Answer::Reject`](flemma_core::Answer::Reject) both go through this.
///
/// ```
/// use flemma_runtime::rejection_feedback;
///
/// assert_eq!(rejection_feedback(" use ls instead\n"), "User feedback: use ls instead");
/// assert_eq!(rejection_feedback("User feedback: no"), "User feedback: no");
/// ```
pub fn rejection_feedback(reason: &str) -> String {
    let reason = reason.trim();
    if reason.starts_with(msg::REJECTED_FEEDBACK_PREFIX) {
        return reason.to_owned();
    }
    format!("{}{reason}", msg::REJECTED_FEEDBACK_PREFIX)
}

/// Answers every call whose result block is the empty, status-less block of a call in
/// progress with the lost-call error (`Tool execution lost: session ended before completion.
/// It may have run in part; check before retrying.`), and returns the edits with the ids they
/// answer.
///
/// For a host that knows no other host runs the conversation now: one holding the
/// conversation's lease (flemma-object's workers), which takes over from a host that died. A
/// host that cannot know that leaves it to the executor's claims, which answer a call only
/// once its claimant is seen to be gone.
///
/// ```
/// use flemma_runtime::answer_interrupted;
///
/// let text = "@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"command\": \"make\"}\n```\n\n\
///             @You:\n**Tool Result:** `toolu_1`\n\n```\n```\n";
/// let doc = flemma_ast::parse(text);
/// let answered = answer_interrupted(&doc, Default::default());
/// assert_eq!(answered.len(), 1);
/// assert_eq!(answered[0].0, "toolu_1");
/// ```
pub fn answer_interrupted(doc: &Document, opts: WriterOptions) -> Vec<(String, TextEdit)> {
    let body = writer::ResultBody::Error {
        message: Some(msg::CALL_LOST.to_owned()),
        partial_output: None,
    };
    let mut answered = Vec::new();
    for message in &doc.messages {
        for result in message.tool_results() {
            if result.status.is_some() || !result.content.trim().is_empty() {
                continue;
            }
            let id = result.tool_use_id.as_str();
            if let Ok(edit) = writer::write_result(doc, id, &body, opts) {
                answered.push((id.to_owned(), edit));
            }
        }
    }
    answered
}
