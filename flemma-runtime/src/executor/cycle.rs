//! The executor's public face: its events, its conversation, cancellation, the cycle, and
//! the user's actions on pending calls.

use std::path::PathBuf;
use std::sync::Arc;

use flemma_ast::TextEdit;
use flemma_config::Options;

use super::state::Executor;
use super::types::{CycleReport, ExecutorError, Next};
use crate::actions;
use crate::conversation::Conversation;
use crate::events::Event;
use crate::transcript::Transcript;
#[cfg(doc)]
use crate::transcript::TranscriptError;

/// The cycle's spans and events keep the target they had before the executor's files were
/// split (`RUST_LOG=flemma_runtime::executor=debug`, and what `flemma -vv` shows).
const LOG_TARGET: &str = "flemma_runtime::executor";

impl Executor {
    /// Follows what the executor does from now on: every event in order, in a queue of its
    /// own; one that falls [`event_capacity`](super::ExecutorBuilder::event_capacity) events behind
    /// reads [`Event::Missed`] in place of those that did not fit.
    pub fn subscribe(&self) -> crate::fanout::Subscription<Event> {
        self.events.subscribe()
    }

    /// The conversation.
    pub fn conversation(&self) -> &Arc<dyn Conversation> {
        self.setup.transcript.conversation()
    }

    /// The host's approver, when it set one.
    pub(crate) fn approver(&self) -> Option<&Arc<dyn flemma_core::Approver>> {
        self.setup.approver.as_ref()
    }

    /// The conversation's text, options and edits, shared with the executor's clients (a
    /// session builds its requests from the same parse and the same evaluation).
    pub fn transcript(&self) -> &Arc<Transcript> {
        &self.setup.transcript
    }

    /// The conversation's store directory under `options` (what tools see as
    /// `$FLEMMA_TOOLS_STORE_PATH`); `None` when the store's path format does not render.
    pub fn store_directory(&self, options: &Options) -> Option<PathBuf> {
        self.setup.transcript.store_directory(options)
    }

    /// Whether the call `id` is running.
    pub fn is_running(&self, id: &str) -> bool {
        self.running_calls().contains_key(id)
    }

    /// Cancels a running call or background job by its call id: it ends with `User aborted
    /// tool execution.` Returns whether it was running.
    pub fn cancel(&self, id: &str) -> bool {
        let foreground = self
            .running_calls()
            .get(id)
            .map(|call| call.token.cancel())
            .is_some();
        foreground || self.jobs.cancel_call(id)
    }

    /// Cancels every running call and background job.
    pub fn cancel_all(&self) {
        for call in self.running_calls().values() {
            call.token.cancel();
        }
        self.jobs.cancel_all();
    }

    /// Phase 1 then Phase 2: places placeholders, settles every lifecycle
    /// status and runs the approved calls, returning when their results are written.
    ///
    /// # Errors
    ///
    /// [`ExecutorError`] for faults of the harness: the conversation cannot be read or
    /// written, the frontmatter or options do not evaluate.
    pub async fn cycle(&self) -> Result<CycleReport, ExecutorError> {
        use tracing::Instrument as _;
        let span = tracing::debug_span!(
            target: LOG_TARGET,
            "flemma.cycle",
            conversation = %self.setup.transcript.conversation_id()
        );
        if let Some(refusal) = self.setup.guard.as_ref().and_then(|guard| guard()) {
            return Err(ExecutorError::Refused(refusal));
        }
        async {
            // Tools still loading (an MCP server's list) must not be answered `Unknown tool`.
            self.setup.registry.ready().await;
            if !self.recovered.load(std::sync::atomic::Ordering::Relaxed) {
                self.recover().await?;
            }
            let settings = self.settings().await?;
            self.report_options(&settings.shared.evaluated.diagnostics)?;
            self.migrate_names().await?;
            // Calls whose host died mid-run get their error first.
            let lost = self.settle_claims(&settings).await?;
            let placed = self
                .phase_one(&settings)
                .instrument(tracing::debug_span!(target: LOG_TARGET, "flemma.phase_one"))
                .await?;
            let mut completed = lost;
            completed.extend(
                self.phase_two(&settings)
                    .instrument(tracing::debug_span!(target: LOG_TARGET, "flemma.phase_two"))
                    .await?,
            );
            // A delivery point (spec §8.5): no foreground call runs now.
            if self.running_calls().is_empty() {
                self.drain_jobs().await?;
            }
            let mut next = self.next_step().await?;
            // Read after the document: a call another host claims later was `(approved)` in
            // it, so `next` was not `send` then.
            if next != Next::Running && self.claimed_elsewhere(&settings).await {
                next = Next::Running;
            }
            tracing::debug!(
                target: LOG_TARGET,
                placed = placed.len(),
                completed = completed.len(),
                ?next,
                "cycle done"
            );
            // What the cycle left buffered (Phase 1's placeholders, the response before
            // them) is durable when it returns.
            self.conversation()
                .sync()
                .await
                .map_err(crate::transcript::TranscriptError::from)?;
            if next == Next::Idle {
                self.emit(Event::ConversationIdle);
            }
            Ok(CycleReport {
                placed,
                completed,
                next,
            })
        }
        .instrument(span)
        .await
    }

    /// Approves the pending call `id`: a person's approval, recorded in
    /// the conversation's [ledger](crate::placements) so that the call runs at the next cycle
    /// whoever placed it.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Action`] with the Flemma plugin's texts (`Tool not found: <id>`, …).
    pub async fn approve(&self, id: &str) -> Result<(), ExecutorError> {
        // The person's approval is recorded before the file says `(approved)`, so that no
        // cycle takes the block for one that came in the file (see `crate::placements`).
        if let Ok(id) = flemma_ids::ToolUseId::from_header(id) {
            self.record_person_approvals(&[id]).await?;
        }
        self.edit(|doc| actions::approve(doc, id).map_err(ExecutorError::from))
            .await
    }

    /// Rejects the pending call `id`; a reason is written into its block as
    /// `User feedback: <reason>`, the error the model will be told (see
    /// [`reject`](crate::reject)).
    ///
    /// # Errors
    ///
    /// As [`Executor::approve`].
    pub async fn reject(&self, id: &str, message: Option<&str>) -> Result<(), ExecutorError> {
        // Only the writer's options: no store, no sandbox (and the evaluation is shared).
        let writer = self.setup.transcript.evaluated().await?.writer();
        self.edit(|doc| actions::reject(doc, id, message, writer).map_err(ExecutorError::from))
            .await
    }

    /// Approves every pending call.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Action`] with `No pending tools to approve` when none is pending.
    pub async fn approve_all_pending(&self) -> Result<(), ExecutorError> {
        let pending: Vec<flemma_ids::ToolUseId> = self
            .with_document(|doc, _| {
                doc.messages
                    .iter()
                    .flat_map(flemma_ast::Message::tool_results)
                    .filter(|r| r.status == Some(flemma_ast::ToolStatus::Pending))
                    .map(|r| r.tool_use_id.clone())
                    .collect()
            })
            .await?;
        self.record_person_approvals(&pending).await?;
        self.edit(|doc| actions::approve_all_pending(doc).map_err(ExecutorError::from))
            .await
    }

    /// The `(approved)` calls of the conversation that no approval backs: this host did not
    /// place them and no person approved them through it (see [`crate::placements`]), so the
    /// next cycle decides each with the approval chain, as a new call. A host shows them
    /// before it runs a transcript that came from elsewhere (`flemma check` warns). Empty
    /// under [`TranscriptApprovals::Trusted`](crate::placements::TranscriptApprovals::Trusted).
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Transcript`] when the conversation cannot be read.
    pub async fn unplaced_approvals(&self) -> Result<Vec<flemma_ids::ToolUseId>, ExecutorError> {
        self.unbacked_approvals().await
    }

    /// [`unplaced_approvals`](Self::unplaced_approvals) of `doc`, a parse of the
    /// conversation the caller already holds: the conversation is not read again (for a
    /// large transcript, a second read and parse would double the time and the memory of a
    /// check). The calls this executor decided, or runs, are left out as there.
    pub async fn unplaced_approvals_in(
        &self,
        doc: &flemma_ast::Document,
    ) -> Vec<flemma_ids::ToolUseId> {
        self.unbacked_approvals_in(doc).await
    }

    /// Appends whole lines at the end of the conversation (a message, a streamed response's
    /// completed lines), re-parsing only what they add, stored as `durability` asks (a
    /// streamed response's lines are [`Durability::Buffered`](crate::Durability::Buffered)
    /// until it is complete and [`Conversation::sync`](crate::Conversation::sync) runs).
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Transcript`] ([`TranscriptError::Conversation`]) when the
    /// conversation cannot be read or written.
    pub async fn append_lines(
        &self,
        text: &str,
        durability: crate::Durability,
    ) -> Result<(), ExecutorError> {
        let lines: Vec<String> = text
            .strip_suffix('\n')
            .unwrap_or(text)
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
            .collect();
        self.setup
            .transcript
            .edit_stored(durability, |doc, _| {
                Ok::<_, ExecutorError>(vec![TextEdit::insert(doc.line_count + 1, lines.clone())])
            })
            .await
            .map(|_| ())
    }

    /// The conversation's options as the next cycle evaluates them: the host's layers, the
    /// frontmatter, the registry's tools ([`ToolRegistry::evaluate`](crate::ToolRegistry::evaluate)). A host shows its
    /// [`diagnostics`](crate::Evaluation::diagnostics) without running anything; a
    /// [`cycle`](Self::cycle) stops on its errors.
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Transcript`] ([`TranscriptError::Conversation`],
    /// [`TranscriptError::Frontmatter`], [`TranscriptError::Config`]) when the options do not
    /// evaluate at all.
    pub async fn evaluate_options(&self) -> Result<crate::Evaluation, ExecutorError> {
        Ok(self.setup.transcript.evaluated().await?.evaluation())
    }
}
