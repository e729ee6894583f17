//! The phases of a cycle: the options checked, legacy names migrated, Phase 1's
//! placeholders through the approval chain, Phase 2's settled statuses and approver, and the
//! next step.

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError};

use flemma_ast::writer::{self, ResultBody};
use flemma_ast::{Role, Segment, TextEdit, ToolStatus};
use flemma_config::OptionDiagnostic;
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

use super::approvals::Decider;
use super::plan::{has_content, plan};
use super::state::{Call, Executor, Settings};
use super::types::{Completed, ExecutorError, Next};
use crate::actions;
use crate::events::{Event, Placed};
use crate::hooks::HookEvent;
use crate::messages as msg;
use crate::transcript::TranscriptError;
use flemma_core::{Answer, PendingCall};

impl Executor {
    /// Stops on the errors of the options (a tool set other than the one
    /// asked for is never run); emits each warning once while it lasts.
    pub(super) fn report_options(
        &self,
        diagnostics: &[OptionDiagnostic],
    ) -> Result<(), ExecutorError> {
        use flemma_ids::Severity;
        let (errors, warnings): (Vec<_>, Vec<_>) = diagnostics
            .iter()
            .cloned()
            .partition(|d| d.severity() == Severity::Error);
        if !errors.is_empty() {
            return Err(flemma_config::ConfigError::Finalize { errors }.into());
        }
        let mut shown = self
            .option_warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *shown != warnings {
            for warning in &warnings {
                self.emit(Event::Warning(warning.to_string()));
            }
            *shown = warnings;
        }
        Ok(())
    }
    /// Rewrites tool names written with the legacy `:` separator to `.` (one batch).
    pub(super) async fn migrate_names(&self) -> Result<(), ExecutorError> {
        let mut migrated = Vec::new();
        self.edit_text(|doc, text| {
            migrated.clear();
            let mut edits = Vec::new();
            for message in &doc.messages {
                for tool_use in message.tool_uses().filter(|u| u.name.is_legacy()) {
                    let new = tool_use.name.migrated();
                    if let Some(edit) = rename_in_header(text, tool_use, &new) {
                        edits.push(edit);
                        migrated.push((tool_use.name.clone(), new));
                    }
                }
            }
            Ok(edits)
        })
        .await?;
        if !migrated.is_empty() {
            self.emit(Event::NamesMigrated(migrated));
        }
        Ok(())
    }

    /// Phase 1: a placeholder for every tool use without a result, in one batch; and a status
    /// of this host's for every `(approved)` call it did not decide (see
    /// [`crate::placements`]).
    pub(super) async fn phase_one(
        &self,
        settings: &Settings,
    ) -> Result<Vec<Placed>, ExecutorError> {
        let (unanswered, approved) = self
            .with_index(|doc, index| (unanswered(doc), self.undecided_approvals(doc, index)))
            .await?;
        if unanswered.is_empty() && approved.is_empty() {
            return Ok(Vec::new());
        }
        let hooks = self.hooks_of(&settings.shared);
        let chain = self
            .setup
            .chain
            .clone()
            .unwrap_or_else(|| self.setup.registry.approval_chain());
        let hooked_chain = crate::hooks::chain_with_hooks(Arc::clone(&chain), &hooks);
        let context = (hooks.has(HookEvent::PreToolUse) || hooks.has(HookEvent::Notification))
            .then(|| self.hook_context(settings));
        let decider = Decider {
            settings,
            hooks: &hooks,
            chain: &hooked_chain,
            context: context.as_ref(),
        };
        let mut placed = Vec::with_capacity(unanswered.len() + approved.len());
        let mut rewrites = Vec::new();
        let mut reasons = Vec::new();
        for (id, tool, mut input, aborted) in unanswered {
            let status = if aborted {
                ToolStatus::Aborted
            } else {
                let decision = self.decide(&decider, &id, &tool, &input).await;
                if let Some(rewritten) = decision.input {
                    input = rewritten;
                    rewrites.push((id.clone(), input.clone()));
                }
                if let Some(reason) = decision.reason {
                    reasons.push((id.clone(), reason));
                }
                decision.status
            };
            self.remember(settings, &id, &tool, &input, status).await;
            placed.push(Placed { id, tool, status });
        }
        let reviewed = self
            .review_approved(&decider, &chain, approved, &mut rewrites, &mut reasons)
            .await;
        // Inputs the hooks rewrote are in the transcript before their placeholders.
        self.rewrite_inputs(&rewrites).await?;
        // The placeholder batch skips uses that got a result meanwhile; a use that went away
        // (the text changed) is left out and the batch computed again.
        let batch: Vec<(&str, ToolStatus)> =
            placed.iter().map(|p| (p.id.as_str(), p.status)).collect();
        // Buffered: the placeholders are made durable before a call starts or when the cycle
        // ends (see `Executor::cycle`), with the response before them.
        self.setup
            .transcript
            .place_stored(&batch, settings.shared.writer, crate::Durability::Buffered)
            .await?;
        self.set_statuses(&reviewed).await?;
        placed.extend(reviewed);
        // A denial's reason is its placeholder's body, for Phase 2's error.
        self.write_denials(&reasons, settings.shared.writer).await?;
        self.emit(Event::PlaceholdersPlaced(placed.clone()));
        if let Some(context) = &context {
            for p in placed.iter().filter(|p| p.status == ToolStatus::Pending) {
                self.notify_pending(&hooks, context, &p.id, &p.tool).await;
            }
        }
        Ok(placed)
    }

    /// Phase 2: settles every lifecycle status and runs the approved calls.
    pub(super) async fn phase_two(
        &self,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let plan = self
            .with_index(|doc, index| plan(doc, index, &self.running_calls()))
            .await?;
        let mut completed = Vec::new();
        let approved = self.take_decided(plan.approved);
        if plan.protected > 0 {
            self.emit(Event::Warning(msg::edited_approved(plan.protected)));
        }
        // Pasted results, denied, rejected and aborted calls: one batch.
        let writer = settings.shared.writer;
        if !plan.settle.is_empty() {
            self.edit_indexed(|doc, index| {
                let mut edits = Vec::new();
                for (id, _, body) in &plan.settle {
                    let edit = match body {
                        None => writer::set_status_in(doc, index, id.as_str(), None),
                        Some(body) => {
                            writer::write_result_in(doc, index, id.as_str(), body, writer)
                        }
                    };
                    match edit {
                        Ok(edit) => edits.push(edit),
                        // The block went away meanwhile: nothing to settle.
                        Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                        Err(error) => return Err(TranscriptError::Edit(error).into()),
                    }
                }
                Ok(edits)
            })
            .await?;
            for (id, tool, body) in &plan.settle {
                self.forget_placement(settings, id).await;
                let success = !matches!(body, Some(ResultBody::Error { .. }));
                self.emit(Event::ToolCompleted {
                    id: id.clone(),
                    tool: tool.clone(),
                    success,
                });
                completed.push(Completed {
                    id: id.clone(),
                    tool: tool.clone(),
                    success,
                });
            }
        }
        // Pending calls go to the approver, when there is one.
        let mut run: VecDeque<Call> = approved.into();
        completed.extend(self.ask_approver(plan.pending, &mut run, settings).await?);
        completed.extend(self.run_calls(run, settings).await?);
        Ok(completed)
    }

    /// Asks the host's approver about the pending calls (when it has one): the approved join
    /// `run`, the rejected get their error (the host's reason as `User feedback: <reason>`).
    async fn ask_approver(
        &self,
        pending: Vec<Call>,
        run: &mut VecDeque<Call>,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let writer = settings.shared.writer;
        let mut completed = Vec::new();
        if let Some(approver) = &self.setup.approver {
            for call in pending {
                // The approver decides it now: the placeholder is no longer waiting for an
                // edit, so its placement goes (see `crate::placements`).
                self.forget_placement(settings, &call.id).await;
                let preview = self.preview(&call.tool, &call.input);
                self.emit(Event::ApprovalAsked {
                    id: call.id.clone(),
                    tool: call.tool.clone(),
                    preview: preview.clone(),
                });
                let question = PendingCall {
                    id: call.id.clone(),
                    tool: call.tool.clone(),
                    input: call.input.clone(),
                    preview,
                };
                match approver.ask(&question).await {
                    Answer::Approve => run.push_back(call),
                    Answer::Reject(reason) => {
                        // The host's reason reaches the model as `User feedback: <reason>`.
                        let message = reason.filter(|r| !r.trim().is_empty()).map_or_else(
                            || msg::REJECTED.to_owned(),
                            |r| actions::rejection_feedback(&r),
                        );
                        let body = ResultBody::Error {
                            message: Some(message),
                            partial_output: None,
                        };
                        self.write_final(&call.id, &body, writer).await?;
                        self.emit(Event::ToolCompleted {
                            id: call.id.clone(),
                            tool: call.tool.clone(),
                            success: false,
                        });
                        completed.push(Completed {
                            id: call.id,
                            tool: call.tool,
                            success: false,
                        });
                    }
                }
            }
        }
        Ok(completed)
    }

    /// What the host should do now. A later `**Tool Use:**` with an earlier one's id is an
    /// error of the transcript, reported as a warning each cycle: it is not run, no result
    /// answers it (results are matched to calls by id), and the conversation is not sent
    /// while it is there ([`Next::Idle`]: the user gives the call an id of its own).
    pub(super) async fn next_step(&self) -> Result<Next, ExecutorError> {
        let duplicates = self
            .with_document(|doc, _| flemma_ast::duplicate_tool_uses(doc))
            .await?;
        for duplicate in &duplicates {
            self.emit(Event::Warning(format!(
                "line {}: {}; it is not run and the conversation is not sent",
                duplicate.line, duplicate.message
            )));
        }
        let next = self.next_of_document().await?;
        Ok(match next {
            Next::Send if !duplicates.is_empty() => Next::Idle,
            other => other,
        })
    }

    async fn next_of_document(&self) -> Result<Next, ExecutorError> {
        self.with_document(|doc, _| {
            // A lifecycle status blocks sending when its tool use exists; a result block no
            // tool use answers to is left alone.
            let waiting = doc.messages.iter().enumerate().any(|(index, message)| {
                message.tool_results().any(|result| {
                    result.status.is_some_and(ToolStatus::is_lifecycle)
                        && doc.messages[..=index]
                            .iter()
                            .rev()
                            .any(|m| m.tool_uses().any(|u| u.id == result.tool_use_id))
                })
            });
            if !self.running_calls().is_empty() {
                return Next::Running;
            }
            if waiting {
                return Next::AwaitApproval;
            }
            match doc.messages.last() {
                Some(last) if last.role == Role::You && has_content(last) => Next::Send,
                _ => Next::Idle,
            }
        })
        .await
    }
}

/// The edit that renames a tool use in its header line, keeping everything else on the line.
pub(super) fn rename_in_header(
    text: &str,
    tool_use: &flemma_ast::ToolUse,
    new: &ToolName,
) -> Option<TextEdit> {
    let line_no = tool_use.span.start_line;
    let line = text
        .split('\n')
        .nth(usize::try_from(line_no).ok()?.checked_sub(1)?)?;
    let line = line.strip_suffix('\r').unwrap_or(line);
    let old = format!("`{}`", tool_use.name);
    let at = line.find(&old)?;
    let renamed = format!("{}`{new}`{}", &line[..at], &line[at + old.len()..]);
    Some(TextEdit::replace(line_no, line_no, vec![renamed]))
}

/// Every tool use without a result, once, in document order: its id, tool, input, and whether
/// its response was interrupted (an abort marker in its message).
fn unanswered(doc: &flemma_ast::Document) -> Vec<(ToolUseId, ToolName, Value, bool)> {
    let answered: foldhash::HashSet<&str> = doc
        .messages
        .iter()
        .flat_map(flemma_ast::Message::tool_results)
        .map(|r| r.tool_use_id.as_str())
        .collect();
    let mut calls: Vec<(ToolUseId, ToolName, Value, bool)> = Vec::new();
    // Each id once (a repeated id is the same call), without a scan of the calls per use.
    let mut seen: foldhash::HashSet<&str> = foldhash::HashSet::default();
    for message in doc.messages.iter().filter(|m| m.role == Role::Assistant) {
        let aborted = message
            .segments
            .iter()
            .any(|s| matches!(s, Segment::Aborted(_)));
        for tool_use in message.tool_uses() {
            if !answered.contains(tool_use.id.as_str()) && seen.insert(tool_use.id.as_str()) {
                calls.push((
                    tool_use.id.clone(),
                    tool_use.name.clone(),
                    Value::Object(tool_use.input().clone()),
                    aborted,
                ));
            }
        }
    }
    calls
}
