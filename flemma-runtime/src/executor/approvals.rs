//! Which calls run: the chain's decision for a new call (its hooks first), and which
//! `(approved)` blocks are approvals (see [`crate::placements`]): those this executor decided,
//! those a person approved of a call this host placed (unless the chain denies them now), and
//! none other. Every other `(approved)` call is decided again, as a new call.

use std::sync::Arc;

use flemma_approval::{ApprovalContext, Chain, Decision, KnownVerdicts, ToolCall};
use flemma_ast::writer;
use flemma_ast::{Document, ToolIndex, ToolStatus};
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

use super::plan::plan;
use super::state::{Call, Executor, Settings};
use super::types::ExecutorError;
use crate::events::{Event, Placed};
use crate::hooks::{HOOKS_RESOLVER, HookContext, HookEvent, Hooks};
use crate::placements::{PlacedBy, Placement, TranscriptApprovals, input_digest};
use crate::transcript::TranscriptError;

/// What decides a call in Phase 1: the conversation's settings, its hooks and the chain
/// (with the hooks' resolver).
pub(super) struct Decider<'a> {
    pub(super) settings: &'a Settings,
    pub(super) hooks: &'a Hooks,
    pub(super) chain: &'a Arc<Chain>,
    /// Given when a hook runs for `PreToolUse` or `Notification`.
    pub(super) context: Option<&'a HookContext>,
}

/// A call's decision.
pub(super) struct Decided {
    pub(super) status: ToolStatus,
    /// A denial's text, for its placeholder.
    pub(super) reason: Option<String>,
    /// The input a hook rewrote the call to.
    pub(super) input: Option<Value>,
}

impl Executor {
    /// Decides a call: its `PreToolUse` hooks, then the chain (whose hooks resolver answers
    /// with their verdict).
    pub(super) async fn decide(
        &self,
        d: &Decider<'_>,
        id: &ToolUseId,
        tool: &ToolName,
        input: &Value,
    ) -> Decided {
        let span = crate::telemetry::approval(tool.as_str(), id.as_str());
        let decided =
            tracing::Instrument::instrument(self.decide_in_span(d, id, tool, input), span.clone())
                .await;
        let word = match decided.status {
            ToolStatus::Approved => "approve",
            ToolStatus::Pending => "ask",
            _ => "deny",
        };
        span.record("flemma.approval.decision", word);
        decided
    }

    /// [`decide`](Self::decide), in its span.
    async fn decide_in_span(
        &self,
        d: &Decider<'_>,
        id: &ToolUseId,
        tool: &ToolName,
        input: &Value,
    ) -> Decided {
        let mut verdict = None;
        let mut rewritten = None;
        if let Some(context) = d.context.filter(|_| d.hooks.has(HookEvent::PreToolUse)) {
            let (decided, input) = self.pre_tool_use(d.hooks, context, id, tool, input).await;
            verdict = Some(decided);
            rewritten = input;
        }
        let input_now = rewritten.as_ref().unwrap_or(input);
        let call = ToolCall {
            name: tool,
            input: input_now,
            id: Some(id),
        };
        let ctx = self.approval_context(&d.settings.shared);
        // The hooks ran once for the call: their verdict is the hooks resolver's.
        let known = match verdict {
            Some(verdict) => KnownVerdicts::new().with(HOOKS_RESOLVER, verdict),
            None => KnownVerdicts::new(),
        };
        let outcome = d.chain.decide_knowing(&call, &ctx, &known).await;
        self.report_failures(&outcome);
        let (status, reason) = match outcome.decision {
            Decision::Approve => (ToolStatus::Approved, None),
            Decision::RequireApproval => (ToolStatus::Pending, None),
            Decision::Deny { reason } => (ToolStatus::Denied, self.denial_text(id, reason)),
        };
        Decided {
            status,
            reason,
            input: rewritten,
        }
    }

    /// What the chain may consult about a conversation under `settings`.
    fn approval_context<'a>(
        &'a self,
        settings: &'a crate::transcript::Settings,
    ) -> ApprovalContext<'a> {
        ApprovalContext::new(&settings.evaluated.config, &settings.evaluated.options)
            .with_tools(&self.setup.registry)
            .with_sandbox(&settings.sandbox_available)
            .with_workspace(&settings.workspace)
    }

    fn report_failures(&self, outcome: &flemma_approval::Outcome) {
        for failure in &outcome.failures {
            self.emit(Event::Warning(format!(
                "approval: resolver '{}' error: {}",
                failure.resolver,
                failure.error.report()
            )));
        }
    }

    /// Remembers a status this host placed: an approved call is this executor's to run, a
    /// pending one goes into the ledger (a person may approve it by editing the transcript).
    pub(super) async fn remember(
        &self,
        settings: &Settings,
        id: &ToolUseId,
        tool: &ToolName,
        input: &Value,
        status: ToolStatus,
    ) {
        match status {
            ToolStatus::Approved => {
                self.decided().insert(id.clone(), input_digest(input));
            }
            ToolStatus::Pending => {
                let placement = Placement::new(id.clone(), tool.clone(), input, PlacedBy::Host);
                if let Err(error) = settings.placements.record(&placement).await {
                    self.emit(Event::Warning(format!(
                        "the placement of {tool} call {id} was not recorded ({error}): approving it by editing the transcript will not run it; approve it through flemma"
                    )));
                }
            }
            _ => {}
        }
    }

    /// Forgets the placement of the call `id` once its placeholder is settled (rejected,
    /// denied, answered) or decided by the approver: a block that later reads `(approved)`
    /// again is not an approval this host knows of. An entry that cannot be removed is left
    /// (it only ever stands for the same tool and input).
    pub(super) async fn forget_placement(&self, settings: &Settings, id: &ToolUseId) {
        if let Err(error) = settings.placements.remove(id).await {
            tracing::debug!(%id, %error, "a placement was not removed");
        }
    }

    /// The `(approved)`, empty, not running calls of `doc` that this executor did not decide
    /// (none when the transcript's approvals are trusted).
    pub(super) fn undecided_approvals(&self, doc: &Document, index: &ToolIndex) -> Vec<Call> {
        if self.setup.approvals == TranscriptApprovals::Trusted {
            return Vec::new();
        }
        let approved = plan(doc, index, &self.running_calls()).approved;
        if approved.is_empty() {
            return approved;
        }
        let decided = self.decided();
        approved
            .into_iter()
            .filter(|c| {
                decided
                    .get(&c.id)
                    .is_none_or(|digest| *digest != input_digest(&c.input))
            })
            .collect()
    }

    /// Decides the `(approved)` calls this executor did not: a call this host placed (or a
    /// person approved through it) runs unless the chain denies it now; any other is decided
    /// as a new call. Returns each call's status (the changed ones are written by
    /// [`set_statuses`](Self::set_statuses)).
    pub(super) async fn review_approved(
        &self,
        d: &Decider<'_>,
        chain: &Arc<Chain>,
        calls: Vec<Call>,
        rewrites: &mut Vec<(ToolUseId, Value)>,
        reasons: &mut Vec<(ToolUseId, String)>,
    ) -> Vec<Placed> {
        let ledger = &d.settings.placements;
        let mut placed = Vec::with_capacity(calls.len());
        for Call {
            id,
            tool,
            mut input,
        } in calls
        {
            let entry = match ledger.get(&id).await {
                Ok(entry) => entry,
                Err(error) => {
                    self.emit(Event::Warning(format!(
                        "the placements of this conversation could not be read ({error}): {tool} call {id} is decided again"
                    )));
                    None
                }
            };
            let status = if entry.is_some_and(|p| p.is_for(&tool, &input)) {
                // A person approved it: a deny of the host's chain still wins.
                let plain = Decider {
                    chain,
                    context: None,
                    ..*d
                };
                let decided = self.decide(&plain, &id, &tool, &input).await;
                let _ = ledger.remove(&id).await;
                if decided.status == ToolStatus::Denied {
                    if let Some(reason) = decided.reason {
                        reasons.push((id.clone(), reason));
                    }
                    ToolStatus::Denied
                } else {
                    self.decided().insert(id.clone(), input_digest(&input));
                    ToolStatus::Approved
                }
            } else {
                let decided = self.decide(d, &id, &tool, &input).await;
                if let Some(rewritten) = decided.input {
                    input = rewritten;
                    rewrites.push((id.clone(), input.clone()));
                }
                if let Some(reason) = decided.reason {
                    reasons.push((id.clone(), reason));
                }
                if decided.status == ToolStatus::Pending {
                    self.emit(Event::Warning(format!(
                        "{tool} call {id} is (approved) in the transcript, but this host did not place it and no person approved it through the host: it waits for approval"
                    )));
                }
                self.remember(d.settings, &id, &tool, &input, decided.status)
                    .await;
                decided.status
            };
            placed.push(Placed { id, tool, status });
        }
        placed
    }

    /// Writes the statuses the review changed (an approval that stands is left as it is).
    pub(super) async fn set_statuses(&self, placed: &[Placed]) -> Result<(), ExecutorError> {
        if placed.iter().all(|p| p.status == ToolStatus::Approved) {
            return Ok(());
        }
        self.edit_indexed(|doc, index| {
            let mut edits = Vec::new();
            for p in placed.iter().filter(|p| p.status != ToolStatus::Approved) {
                match writer::set_status_in(doc, index, p.id.as_str(), Some(p.status)) {
                    Ok(edit) => edits.push(edit),
                    // The block went away meanwhile: nothing to set.
                    Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                    Err(error) => return Err(TranscriptError::Edit(error).into()),
                }
            }
            Ok(edits)
        })
        .await
    }

    /// The approved calls Phase 2 may run: those this executor decided, with the input it
    /// decided on (all of them when the transcript's approvals are trusted). An `(approved)`
    /// block that is not one of them waits for the next cycle's Phase 1.
    pub(super) fn take_decided(&self, approved: Vec<Call>) -> Vec<Call> {
        if self.setup.approvals == TranscriptApprovals::Trusted {
            return approved;
        }
        let mut decided = self.decided();
        approved
            .into_iter()
            .filter(|c| {
                decided
                    .remove(&c.id)
                    .is_some_and(|digest| digest == input_digest(&c.input))
            })
            .collect()
    }

    /// Records that a person approved the calls `ids` through the host, for the executor
    /// that runs them (see [`crate::placements`]).
    pub(super) async fn record_person_approvals(
        &self,
        ids: &[ToolUseId],
    ) -> Result<(), ExecutorError> {
        if self.setup.approvals == TranscriptApprovals::Trusted || ids.is_empty() {
            return Ok(());
        }
        let calls: Vec<Placement> = self
            .with_document(|doc, _| {
                ids.iter()
                    .filter_map(|id| crate::placements::person_approval(doc, id.as_str()))
                    .collect()
            })
            .await?;
        let ledger = self.ledger();
        for placement in &calls {
            ledger
                .record(placement)
                .await
                .map_err(|source| ExecutorError::Placements {
                    id: placement.id.clone(),
                    source,
                })?;
        }
        Ok(())
    }

    /// The `(approved)` calls no approval backs (see
    /// [`Executor::unplaced_approvals`](super::Executor::unplaced_approvals)).
    pub(super) async fn unbacked_approvals(&self) -> Result<Vec<ToolUseId>, ExecutorError> {
        if self.setup.approvals == TranscriptApprovals::Trusted {
            return Ok(Vec::new());
        }
        let calls = self
            .with_index(|doc, index| self.undecided_approvals(doc, index))
            .await?;
        Ok(self.unbacked(calls).await)
    }

    /// [`unbacked_approvals`](Self::unbacked_approvals) of `doc`, a parse of the
    /// conversation the caller holds: the conversation is not read.
    pub(super) async fn unbacked_approvals_in(&self, doc: &Document) -> Vec<ToolUseId> {
        if self.setup.approvals == TranscriptApprovals::Trusted {
            return Vec::new();
        }
        // Only an `(approved)` result block can be unbacked: a document without one (most, and
        // `flemma check` of a large file) needs no index of its calls.
        let any_approved = doc
            .messages
            .iter()
            .flat_map(flemma_ast::Message::tool_results)
            .any(|result| result.status == Some(flemma_ast::ToolStatus::Approved));
        if !any_approved {
            return Vec::new();
        }
        let calls = self.undecided_approvals(doc, &ToolIndex::new(doc));
        self.unbacked(calls).await
    }

    /// The ids of `calls` that the ledger holds no placement of (for the same tool and input).
    async fn unbacked(&self, calls: Vec<Call>) -> Vec<ToolUseId> {
        let ledger = self.ledger();
        let mut unbacked = Vec::new();
        for call in calls {
            let placed = ledger.get(&call.id).await.ok().flatten();
            if !placed.is_some_and(|p| p.is_for(&call.tool, &call.input)) {
                unbacked.push(call.id);
            }
        }
        unbacked
    }

    /// The ledger of this conversation, without evaluating its options.
    fn ledger(&self) -> Arc<dyn crate::placements::Placements> {
        if let Some(own) = &self.setup.placements {
            return Arc::clone(own);
        }
        let conversation = self.setup.transcript.conversation();
        let chat = conversation.path().map(flemma_config::conversation_path);
        crate::placements::of_conversation(&**conversation, chat.as_deref())
    }
}

impl Executor {
    /// How this executor's conversation would decide a call of `tool` with `input` now: its
    /// options and its chain, its `PreToolUse` hooks not run (a child's cycle runs the same
    /// hooks for its own call). What a child's call may get at most
    /// ([`crate::agents`]: the parent's approvals bind its children).
    pub(crate) async fn decision_for(
        &self,
        tool: &ToolName,
        input: &Value,
    ) -> Result<Decision, ExecutorError> {
        let settings = self.settings().await?;
        let chain = self
            .setup
            .chain
            .clone()
            .unwrap_or_else(|| self.setup.registry.approval_chain());
        let call = ToolCall {
            name: tool,
            input,
            id: None,
        };
        let ctx = self.approval_context(&settings.shared);
        let known = KnownVerdicts::new().with(HOOKS_RESOLVER, flemma_approval::Verdict::pass());
        let outcome = chain.decide_knowing(&call, &ctx, &known).await;
        self.report_failures(&outcome);
        Ok(outcome.decision)
    }
}
