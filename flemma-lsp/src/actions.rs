//! Code actions and code lenses on pending and approved calls: approve, reject, approve all.
//! Each edit is the one `flemma approve` / `flemma reject` / `flemma approve-all` makes
//! (`flemma_runtime::{approve, reject, approve_all_pending}`), so the file ends up the same.

use std::collections::HashMap;

use flemma_ast::{Segment, ToolStatus};
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CodeLens, Command, Range, TextEdit, Uri,
    WorkspaceEdit,
};
use serde_json::{Value, json};

use crate::document::OpenDocument;
use crate::position::ParserLines;

/// The command that approves a pending call: arguments `[uri, id]`.
pub const APPROVE: &str = "flemma.approve";
/// The command that rejects a pending or approved call: arguments `[uri, id, reason?]`.
pub const REJECT: &str = "flemma.reject";
/// The command that approves every pending call: arguments `[uri]`.
pub const APPROVE_ALL: &str = "flemma.approveAll";

/// The command that runs the tool cycle of a conversation (as `flemma cycle`, on the editor's
/// text): arguments `[uri]`.
pub const CYCLE: &str = "flemma.cycle";

/// The commands the server executes (`workspace/executeCommand`).
pub const COMMANDS: [&str; 4] = [APPROVE, REJECT, APPROVE_ALL, CYCLE];

/// What a user can do to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Approve the pending call.
    Approve(String),
    /// Reject the call, with an optional reason (`User feedback: …`).
    Reject(String, Option<String>),
    /// Approve every pending call.
    ApproveAll,
}

impl Action {
    /// The action a command names, from its arguments.
    pub fn from_command(command: &str, arguments: &[Value]) -> Option<(Uri, Action)> {
        let uri: Uri = arguments.first()?.as_str()?.parse().ok()?;
        let id = || arguments.get(1).and_then(Value::as_str).map(str::to_owned);
        let action = match command {
            APPROVE => Action::Approve(id()?),
            REJECT => Action::Reject(
                id()?,
                arguments.get(2).and_then(Value::as_str).map(str::to_owned),
            ),
            APPROVE_ALL => Action::ApproveAll,
            _ => return None,
        };
        Some((uri, action))
    }

    fn command(&self, uri: &Uri) -> Command {
        let (title, command, arguments) = match self {
            Action::Approve(id) => (
                format!("Approve {id}"),
                APPROVE,
                vec![json!(uri.as_str()), json!(id)],
            ),
            Action::Reject(id, reason) => {
                let mut arguments = vec![json!(uri.as_str()), json!(id)];
                if let Some(reason) = reason {
                    arguments.push(json!(reason));
                }
                (format!("Reject {id}"), REJECT, arguments)
            }
            Action::ApproveAll => (
                "Approve all pending".to_owned(),
                APPROVE_ALL,
                vec![json!(uri.as_str())],
            ),
        };
        Command {
            title,
            command: command.to_owned(),
            arguments: Some(arguments),
        }
    }
}

/// The one edit of `doc` that `action` makes, as the protocol's edit of the client's text:
/// the writer's line edits applied to the text, then the changed bytes as one replacement.
///
/// # Errors
///
/// The action's error text (`Tool not found: …`, `No pending tools to approve`, …).
pub fn action_edit(doc: &OpenDocument, action: &Action) -> Result<TextEdit, String> {
    let document = doc.document();
    let edits = match action {
        Action::Approve(id) => flemma_runtime::approve(document, id),
        Action::Reject(id, reason) => flemma_runtime::reject(
            document,
            id,
            reason.as_deref(),
            flemma_ast::writer::WriterOptions::default(),
        ),
        Action::ApproveAll => flemma_runtime::approve_all_pending(document),
    }
    .map_err(|e| e.to_string())?;
    let old = doc.text();
    let new = flemma_ast::apply_edits(old, &edits).map_err(|e| e.to_string())?;
    Ok(replacement(doc.lines(), old, &new))
}

/// Records a person's approval of the calls `action` approves in the conversation's ledger
/// ([`flemma_runtime::placements`]), as `flemma approve` does: an `(approved)` that no host
/// placed and no person approved through one is not an approval. Nothing for a rejection.
///
/// # Errors
///
/// The ledger's error text.
pub(crate) fn record_approval(
    doc: &OpenDocument,
    uri: &Uri,
    action: &Action,
) -> Result<(), String> {
    let document = doc.document();
    let ids: Vec<String> = match action {
        Action::Approve(id) => vec![id.clone()],
        Action::ApproveAll => document
            .messages
            .iter()
            .flat_map(flemma_ast::Message::tool_results)
            .filter(|r| r.status == Some(ToolStatus::Pending))
            .map(|r| r.tool_use_id.to_string())
            .collect(),
        Action::Reject(..) => return Ok(()),
    };
    let chat = crate::navigation::uri_path(uri).map(|p| flemma_config::conversation_path(&p));
    let ledger = flemma_runtime::placements::for_file(chat.as_deref());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    for id in ids {
        if let Some(placement) = flemma_runtime::placements::person_approval(document, &id) {
            runtime
                .block_on(ledger.record(&placement))
                .map_err(|e| format!("the approval of {id} could not be recorded: {e}"))?;
        }
    }
    Ok(())
}

/// The one protocol edit that turns `old` (whose lines `lines` indexes) into `new`: the bytes
/// between their common start and their common end.
pub(crate) fn replacement(lines: &crate::LineIndex, old: &str, new: &str) -> TextEdit {
    let mut prefix = old
        .bytes()
        .zip(new.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while !old.is_char_boundary(prefix) || !new.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let max_suffix = old.len().min(new.len()) - prefix;
    let mut suffix = old
        .bytes()
        .rev()
        .zip(new.bytes().rev())
        .take(max_suffix)
        .take_while(|(a, b)| a == b)
        .count();
    while !old.is_char_boundary(old.len() - suffix) || !new.is_char_boundary(new.len() - suffix) {
        suffix -= 1;
    }
    let range = Range::new(
        lines.position(old, prefix),
        lines.position(old, old.len() - suffix),
    );
    TextEdit::new(range, new[prefix..new.len() - suffix].to_owned())
}

/// A workspace edit of `uri` with one text edit.
pub fn workspace_edit(uri: &Uri, edit: TextEdit) -> WorkspaceEdit {
    WorkspaceEdit {
        changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
        ..WorkspaceEdit::default()
    }
}

/// The calls whose result block's lines meet `lines` (1-based, inclusive), with their
/// status, and whether any call of the document is pending.
fn calls_in(doc: &OpenDocument, from: u32, to: u32) -> (Vec<(String, ToolStatus)>, bool) {
    let mut calls = Vec::new();
    let mut any_pending = false;
    for message in &doc.document().messages {
        for segment in &message.segments {
            let Segment::ToolResult(result) = segment else {
                continue;
            };
            let Some(status) = result.status.filter(|s| s.is_lifecycle()) else {
                continue;
            };
            any_pending |= status == ToolStatus::Pending;
            if result.span.start_line <= to && from <= result.span.end_line {
                calls.push((result.tool_use_id.as_str().to_owned(), status));
            }
        }
    }
    (calls, any_pending)
}

/// The actions offered for a call in the state `status`.
fn actions_for(id: &str, status: ToolStatus) -> Vec<Action> {
    match status {
        ToolStatus::Pending => vec![
            Action::Approve(id.to_owned()),
            Action::Reject(id.to_owned(), None),
        ],
        ToolStatus::Approved => vec![Action::Reject(id.to_owned(), None)],
        _ => Vec::new(),
    }
}

/// The code actions for the lines of `range`: approve and reject each pending call whose
/// result block they meet, reject an approved one, approve all pending. A rejection carries its
/// edit; an approval runs its command (the server records the person's approval, then sends
/// the edit).
pub fn code_actions(doc: &OpenDocument, uri: &Uri, range: Range) -> Vec<CodeActionOrCommand> {
    let Some((from, to)) = crate::navigation::at(doc, range.start)
        .zip(crate::navigation::at(doc, range.end))
        .map(|(a, b)| (a.line, b.line))
    else {
        return Vec::new();
    };
    let (calls, any_pending) = calls_in(doc, from, to);
    let mut actions: Vec<Action> = calls
        .iter()
        .flat_map(|(id, status)| actions_for(id, *status))
        .collect();
    if any_pending && calls.iter().any(|(_, s)| *s == ToolStatus::Pending) {
        actions.push(Action::ApproveAll);
    }
    // The cycle, wherever a call of the document waits for it.
    let cycle = unfinished(doc).then(|| {
        CodeActionOrCommand::CodeAction(CodeAction {
            title: "Run the tool cycle".to_owned(),
            kind: Some(CodeActionKind::SOURCE),
            command: Some(Command {
                title: "Run the tool cycle".to_owned(),
                command: CYCLE.to_owned(),
                arguments: Some(vec![json!(uri.as_str())]),
            }),
            ..CodeAction::default()
        })
    });
    actions
        .into_iter()
        .filter_map(|action| {
            let edit = action_edit(doc, &action).ok()?;
            let command = action.command(uri);
            // An approval runs the server's command, which records it before it edits (see
            // `record_approval`); a rejection only narrows, and carries its edit.
            let approves = matches!(action, Action::Approve(_) | Action::ApproveAll);
            Some(CodeActionOrCommand::CodeAction(CodeAction {
                title: command.title.clone(),
                kind: Some(CodeActionKind::QUICKFIX),
                edit: (!approves).then(|| workspace_edit(uri, edit)),
                command: approves.then_some(command),
                ..CodeAction::default()
            }))
        })
        .chain(cycle)
        .collect()
}

/// Whether a call of the document has no final result yet (no result, or a result that is
/// still `pending` or `approved`).
fn unfinished(doc: &OpenDocument) -> bool {
    let document = doc.document();
    let index = doc.parser().tool_index();
    document
        .messages
        .iter()
        .flat_map(flemma_ast::Message::tool_uses)
        .any(|u| {
            index
                .last_tool_result(document, u.id.as_str())
                .is_none_or(|r| r.node.status.is_some_and(ToolStatus::is_lifecycle))
        })
}

/// Code lenses on the header of each pending call (approve, reject) and approved call
/// (reject), running the commands ([`COMMANDS`]).
pub fn code_lenses(doc: &OpenDocument, uri: &Uri) -> Vec<CodeLens> {
    let lines = ParserLines::new(doc.text(), doc.lines());
    let (calls, _) = calls_in(doc, 1, u32::MAX);
    let mut out = Vec::new();
    for (id, status) in calls {
        let Some(result) = flemma_ast::find_tool_result_by_id(doc.document(), &id) else {
            continue;
        };
        let line = result.node.span.start_line;
        let range = Range::new(lines.line_start(line), lines.line_end(line));
        for action in actions_for(&id, status) {
            out.push(CodeLens {
                range,
                command: Some(action.command(uri)),
                data: None,
            });
        }
    }
    out
}
