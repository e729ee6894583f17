//! The executor's state and the types its phases share: what it is made of, the calls it
//! runs, the options of the moment, and the small accessors every phase uses. A leaf: it
//! imports none of the files that implement the executor's phases.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use flemma_approval::Chain;
use flemma_ast::{Document, TextEdit, ToolIndex};
use flemma_config::OptionDiagnostic;
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::claim::table::{Claimant, Table};
use super::types::ExecutorError;
use crate::events::Event;
use crate::registry::ToolRegistry;
use crate::transcript::Transcript;
use flemma_core::Approver;
use flemma_core::Revision;
use flemma_core::ToolOutput;

/// What an executor is made of: set by [`ExecutorBuilder`](super::ExecutorBuilder), kept by
/// [`Executor`].
pub(super) struct Setup {
    /// The conversation's text, its options, its edits.
    pub(super) transcript: Arc<Transcript>,
    /// The transcript's registry (a handle to the same tools).
    pub(super) registry: ToolRegistry,
    pub(super) chain: Option<Arc<Chain>>,
    pub(super) approver: Option<Arc<dyn Approver>>,
    /// Asked before every cycle; a message refuses it.
    pub(super) guard: Option<CycleGuard>,
    /// The executor's own hooks ([`ExecutorBuilder::hook`](super::ExecutorBuilder::hook)).
    pub(super) hooks: Arc<Vec<crate::hooks::HookRegistration>>,
    /// The host's own ledger of placements, when it gave one.
    pub(super) placements: Option<Arc<dyn crate::placements::Placements>>,
    /// Whether an `(approved)` in the transcript approves by itself.
    pub(super) approvals: crate::placements::TranscriptApprovals,
    /// What calls may ask of the session beyond their own work (child conversations).
    pub(super) delegate: Option<Arc<dyn flemma_core::Delegate>>,
}

/// A host's check before each cycle (see
/// [`ExecutorBuilder::cycle_guard`](super::ExecutorBuilder::cycle_guard)).
pub(super) type CycleGuard = Arc<dyn Fn() -> Option<super::Refusal> + Send + Sync>;

/// Runs the tool cycle on one conversation. Share it behind an `Arc` to cancel calls from
/// another task while a cycle runs.
pub struct Executor {
    pub(super) setup: Setup,
    pub(super) events: Arc<crate::fanout::Fanout<Event>>,
    /// Foreground calls running now, by id.
    pub(super) running: Mutex<HashMap<ToolUseId, RunningCall>>,
    /// Background jobs.
    pub(super) jobs: Arc<crate::jobs::table::Jobs>,
    /// Whether orphan recovery ran (the first cycle runs it).
    pub(super) recovered: std::sync::atomic::AtomicBool,
    /// This executor as the holder of call claims (one execution per call across hosts).
    pub(super) claimant: Claimant,
    /// The option warnings last emitted (each shown once while it lasts).
    pub(super) option_warnings: Mutex<Vec<OptionDiagnostic>>,
    /// The context `PreToolUse` hooks left for calls not yet finished: (hook, text), by call.
    pub(super) hook_notes: Mutex<HashMap<ToolUseId, Vec<(String, String)>>>,
    /// The `(approved)` calls this executor decided to run (its chain approved them, or a
    /// person did and the chain denied nothing), with the digest of their input: Phase 2 runs
    /// these, and no other (see [`crate::placements`]).
    pub(super) decided: Mutex<HashMap<ToolUseId, String>>,
}

/// A foreground call that runs now.
pub(super) struct RunningCall {
    pub(super) token: CancellationToken,
    pub(super) tool: ToolName,
    /// Hands the call to the background; `None` for synchronous tools.
    pub(super) handoff: Option<Handoff>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("registry", &self.setup.registry)
            .field("conversation_id", &self.setup.transcript.conversation_id())
            .finish_non_exhaustive()
    }
}

/// Everything a cycle needs from the options of the moment: the transcript's
/// [`Settings`](crate::transcript::Settings) (`shared`: the options, the store, the sandbox,
/// the writer's options) and the executor's own journal and claims.
pub(crate) struct Settings {
    pub(super) shared: Arc<crate::transcript::Settings>,
    /// Where the conversation's call claims are kept.
    pub(super) claims: Table,
    /// Where the calls placed for a person's decision are remembered.
    pub(super) placements: Arc<dyn crate::placements::Placements>,
}

/// A call ready to run.
pub(super) struct Call {
    pub(super) id: ToolUseId,
    pub(super) tool: ToolName,
    pub(super) input: Value,
}

/// A call this executor claimed and runs: its claim, and its input as its block read then
/// (the input it runs with, harness parameters included), so that the result is written
/// under that input even when the block was edited while the call ran.
pub(super) struct Claimed {
    /// The claim; `None` when the call could not be claimed (it runs all the same).
    pub(super) hold: Option<super::claim::table::Held>,
    pub(super) input: Value,
}

/// A finished call on its way into the transcript.
pub(super) struct Finished {
    pub(super) id: ToolUseId,
    pub(super) tool: ToolName,
    pub(super) output: ToolOutput,
    pub(super) save_to: Option<String>,
    pub(super) overflow: Option<PathBuf>,
    /// Why the full output of a truncation could not be stored, when it could not.
    pub(super) overflow_error: Option<Arc<flemma_store::StoreError>>,
    /// Why the call ended without a result ([`ExecutionContext::defer`]): its block goes back
    /// to `(approved)` instead.
    ///
    /// [`ExecutionContext::defer`]: flemma_core::ExecutionContext::defer
    pub(super) deferred: Option<String>,
}

/// What starting a background call gave.
pub(super) enum Started {
    /// The job runs.
    Job,
    /// The call ended at once (no command, a sandbox error, a spawn failure).
    Finished(Finished),
}

/// The hand-over of a running foreground call to the background.
pub(super) struct Handoff {
    pub(super) token: CancellationToken,
    pub(super) save_to: Option<String>,
    pub(super) sender: tokio::sync::oneshot::Sender<Box<dyn FnOnce(Finished) + Send>>,
}

impl Executor {
    pub(super) fn emit(&self, event: Event) {
        // Nobody listening is fine.
        self.events.emit(event);
    }

    pub(super) fn decided(&self) -> std::sync::MutexGuard<'_, HashMap<ToolUseId, String>> {
        self.decided.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn running_calls(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ToolUseId, RunningCall>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the hand-over of a running foreground call: its tool, and `None` when the tool
    /// is synchronous.
    pub(super) fn take_handoff(&self, id: &str) -> Option<(ToolName, Option<Handoff>)> {
        let mut running = self.running_calls();
        let call = running.get_mut(id)?;
        let handoff = call.handoff.take();
        let tool = call.tool.clone();
        if handoff.is_some() {
            running.remove(id);
        }
        Some((tool, handoff))
    }

    /// Reads the conversation, parses it (incrementally when possible) and hands the
    /// document to `f` (the [`Transcript`]'s).
    pub(super) async fn with_document<T>(
        &self,
        f: impl FnOnce(&Document, Revision) -> T,
    ) -> Result<T, ExecutorError> {
        Ok(self.setup.transcript.read(f).await?)
    }

    /// Computes edits from the current document and applies them as one change, computing
    /// them again when the conversation changed in between (the [`Transcript`]'s loop).
    pub(super) async fn edit(
        &self,
        mut f: impl FnMut(&Document) -> Result<Vec<TextEdit>, ExecutorError>,
    ) -> Result<(), ExecutorError> {
        self.edit_text(|doc, _| f(doc)).await
    }

    /// [`with_document`](Self::with_document) with the document's tool index (one per
    /// revision, shared).
    pub(super) async fn with_index<T>(
        &self,
        f: impl FnOnce(&Document, &ToolIndex) -> T,
    ) -> Result<T, ExecutorError> {
        Ok(self.setup.transcript.read_indexed(f).await?)
    }

    /// [`edit`](Self::edit) with the document's tool index (one per revision, shared).
    pub(super) async fn edit_indexed(
        &self,
        f: impl FnMut(&Document, &ToolIndex) -> Result<Vec<TextEdit>, ExecutorError>,
    ) -> Result<(), ExecutorError> {
        self.setup.transcript.edit_indexed(f).await.map(|_| ())
    }

    /// [`edit`](Self::edit) for edits that need the text as well.
    pub(super) async fn edit_text(
        &self,
        f: impl FnMut(&Document, &str) -> Result<Vec<TextEdit>, ExecutorError>,
    ) -> Result<(), ExecutorError> {
        self.setup.transcript.edit(f).await.map(|_| ())
    }

    /// The options of the moment: the transcript's settings (evaluated once per revision of
    /// the frontmatter), the journal and the claims under its store.
    pub(super) async fn settings(&self) -> Result<Settings, ExecutorError> {
        let shared = self.setup.transcript.settings().await?;
        Ok(self.settings_under(shared))
    }

    /// [`settings`](Self::settings) with the frontmatter of `doc`, a parse of the
    /// conversation the caller holds: the conversation is not read.
    pub(super) fn settings_in(&self, doc: &Document) -> Result<Settings, ExecutorError> {
        let shared = self.setup.transcript.settings_in(doc)?;
        Ok(self.settings_under(shared))
    }

    /// The executor's settings on top of the transcript's `shared` ones.
    fn settings_under(&self, shared: Arc<crate::transcript::Settings>) -> Settings {
        let store_dir = shared.store_directory();
        self.jobs
            .use_store_directory(store_dir, &**self.setup.transcript.conversation());
        let claims = Table::of(self.setup.transcript.conversation(), store_dir);
        let placements = match &self.setup.placements {
            Some(own) => Arc::clone(own),
            None => crate::placements::of_conversation(
                &**self.setup.transcript.conversation(),
                shared.chat(),
            ),
        };
        Settings {
            shared,
            claims,
            placements,
        }
    }
}
