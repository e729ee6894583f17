//! The input a call ran with stays in the transcript. The conversation is locked
//! while calls run, but the lock is advisory ([`Conversation::set_locked`]
//! is a hint an editor may honour; a file cannot be locked): a user may still edit a running
//! call's `**Tool Use:**` block. Its result is then written with the input that ran put back
//! in the same edit, and a warning quotes what the user wrote, so the transcript never pairs
//! a result with input the tool did not see and nothing the user typed is lost.
//!
//! An input that only changed its layout (the same JSON object) is left as the user wrote it.
//! A block the edit left unreadable as a tool use (invalid JSON, an unclosed fence) is not
//! rewritten: where it ends is not known for certain, and a malformed block is never sent;
//! the warning quotes it.
//!
//! [`Conversation::set_locked`]: crate::Conversation::set_locked

use flemma_ast::writer::{self, ResultBody, WriterOptions};
use flemma_ast::{AstError, Document, Segment, TextEdit, ToolIndex};
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

use super::state::Executor;
use super::types::ExecutorError;
use crate::events::Event;

/// A finished call's result on its way into the transcript, with the input it ran with.
pub(super) struct RanResult {
    pub(super) id: ToolUseId,
    pub(super) tool: ToolName,
    pub(super) body: ResultBody,
    /// The call's input as its block read when the call was claimed (harness parameters
    /// included); `None` when not known (the result is written as it stands).
    pub(super) input: Option<Value>,
}

/// What became of a call's block when its result was written.
enum Edited {
    /// The input was changed: the input that ran was put back; the JSON the user wrote.
    Restored(String),
    /// The block no longer reads as a tool use: left as it is; its text.
    Unreadable(String),
}

impl Executor {
    /// Writes final results in one edit (as [`write_finals`](Self::write_finals)); a call
    /// whose input was edited while it ran gets the input it ran with back in the same edit,
    /// and a warning quoting the edit.
    pub(super) async fn write_ran(
        &self,
        results: &[RanResult],
        writer: WriterOptions,
    ) -> Result<(), ExecutorError> {
        let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
        // What each call's last computed edit found (the edit is computed again when the text
        // changed in between; only the applied one counts).
        let mut edited: Vec<Option<Edited>> = results.iter().map(|_| None).collect();
        self.setup
            .transcript
            .edit_blocks(&ids, writer, |doc, index, at, edits| {
                let result = &results[at];
                edited[at] = None;
                edits.push(writer::write_result_in(
                    doc,
                    index,
                    result.id.as_str(),
                    &result.body,
                    writer,
                )?);
                edited[at] = match &result.input {
                    Some(input) => keep_input(doc, index, &result.id, input, edits)?,
                    None => None,
                };
                Ok(())
            })
            .await?;
        for (result, edited) in results.iter().zip(edited) {
            let (id, tool) = (&result.id, &result.tool);
            match edited {
                Some(Edited::Restored(json)) => self.emit(Event::Warning(format!(
                    "the input of {tool} call {id} was edited while the call ran: its result is written under the input it ran with, and the edit is undone; the edited input was {}",
                    one_line(&json)
                ))),
                Some(Edited::Unreadable(text)) => self.emit(Event::Warning(format!(
                    "the input of {tool} call {id} was edited while the call ran and its block no longer reads as a tool use: its result is written, and the block is left as edited; the edited block was {}",
                    one_line(&text)
                ))),
                None => {}
            }
        }
        Ok(())
    }
}

/// Pushes the edit that puts `ran` back into the block of the call `id` when its input is no
/// longer `ran`; says what the block held.
fn keep_input(
    doc: &Document,
    index: &ToolIndex,
    id: &ToolUseId,
    ran: &Value,
    edits: &mut Vec<TextEdit>,
) -> Result<Option<Edited>, AstError> {
    let Some(found) = index.tool_use(doc, id.as_str()) else {
        // Removed (nothing claims an input then), or no longer readable as a tool use.
        return Ok(unreadable_block(doc, id).map(Edited::Unreadable));
    };
    let now = found.node;
    if ran.as_object() == Some(now.input()) {
        return Ok(None);
    }
    let Value::Object(input) = ran else {
        // A block's input is always an object; nothing else can be written back.
        return Ok(None);
    };
    edits.push(writer::rewrite_tool_use_input(
        doc,
        index,
        id.as_str(),
        input,
    )?);
    Ok(Some(Edited::Restored(now.raw_input().to_owned())))
}

/// The text of the malformed block whose header is the tool use `id`'s, when there is one
/// (searched from the end: the running calls are in the last messages).
fn unreadable_block(doc: &Document, id: &ToolUseId) -> Option<String> {
    doc.messages
        .iter()
        .rev()
        .flat_map(|m| m.segments.iter().rev())
        .find_map(|segment| match segment {
            Segment::Malformed(m) if header_of(&m.text, id) => Some(m.text.clone()),
            _ => None,
        })
}

/// Whether the first line of `text` is the `**Tool Use:**` header of the call `id`: the
/// parser reads it, followed by an empty input.
fn header_of(text: &str, id: &ToolUseId) -> bool {
    let header = text.lines().next().unwrap_or_default();
    if !header.starts_with("**Tool Use:**") {
        return false;
    }
    let probe = flemma_ast::parse(&format!("@Assistant:\n{header}\n```json\n{{}}\n```\n"));
    probe
        .messages
        .iter()
        .flat_map(flemma_ast::Message::tool_uses)
        .any(|u| u.id == *id)
}

/// `text` on one line: line breaks, control and invisible characters and backslashes
/// escaped as Rust writes them; quotes kept as typed.
fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '\'' => line.push(c),
            c => line.extend(c.escape_debug()),
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn one_line_escapes_breaks_controls_and_backslashes_and_keeps_quotes() {
        assert_eq!(
            one_line("{\n\t\"a\": \"b\\nc\u{202e}\"\r\n}"),
            r#"{\n\t"a": "b\\nc\u{202e}"\r\n}"#
        );
    }
}
