//! Job results: their lines and where delivery puts them.

use super::block::{WriterOptions, block_lines};
use crate::ast::{Document, Message, Role, Segment};
use crate::edit::TextEdit;
use crate::query::find_job_result;
use flemma_ids::JobId;

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

/// How [`place_job_result`] placed a job result.
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

/// Places a Job Result block (from [`job_result_lines`]) per the delivery rules.
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
