//! [`JobHost`]: what the jobs need from the executor that holds them, their one port into
//! it. The conversation (read a document, apply an edit), the options of the moment, a tool
//! call's context, the registry's tools, running a call, and storing a delivered result.

use std::future::Future;
use std::sync::Arc;

use flemma_ast::writer::WriterOptions;
use flemma_ast::{Document, TextEdit};
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::table::Delivery;
use crate::transcript::{Transcript, TranscriptError};
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolOutput;

/// A job's call as the host runs it in its runtime.
pub(crate) struct HostedCall {
    /// The registered tool.
    pub(crate) found: Arc<dyn Tool>,
    pub(crate) id: ToolUseId,
    pub(crate) tool: ToolName,
    pub(crate) input: Value,
    /// Its context (built by [`JobHost::context`]).
    pub(crate) ctx: ExecutionContext,
    /// Cancels it.
    pub(crate) token: CancellationToken,
}

/// A call's future, as the host runs it: its output.
pub(crate) type RunFuture = std::pin::Pin<Box<dyn Future<Output = ToolOutput> + Send>>;

/// What the jobs need from the executor that holds them (see the [module docs](self)).
pub(crate) trait JobHost: Send + Sync {
    /// The options of the moment (evaluated once per cycle or delivery).
    type Settings: Send + Sync;
    /// The host's error.
    type Error: From<super::types::JobError> + From<TranscriptError> + Send;

    /// The conversation's transcript (its edit loop).
    fn transcript(&self) -> &Transcript;

    /// The options of the moment.
    fn settings(&self) -> impl Future<Output = Result<Self::Settings, Self::Error>> + Send;

    /// How blocks are written under `settings`.
    fn writer(&self, settings: &Self::Settings) -> WriterOptions;

    /// Whether `flemma.jobs.status` is in the tool set under `settings` (the placeholder
    /// then tells the model to use it).
    fn tracks_jobs(&self, settings: &Self::Settings) -> bool;

    /// `f` of the conversation's current document.
    fn read<T: Send>(
        &self,
        f: impl FnOnce(&Document) -> T + Send,
    ) -> impl Future<Output = Result<T, Self::Error>> + Send;

    /// Computes edits from the current document and applies them as one change (computed
    /// again when the conversation changed in between).
    fn edit(
        &self,
        f: impl FnMut(&Document) -> Result<Vec<TextEdit>, Self::Error> + Send,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// The context of the call `id` of `tool` (`found` when it is registered).
    fn context(
        &self,
        settings: &Self::Settings,
        id: &ToolUseId,
        tool: &ToolName,
        found: Option<&Arc<dyn Tool>>,
        token: CancellationToken,
    ) -> impl Future<Output = Result<ExecutionContext, Self::Error>> + Send;

    /// The registered tool `name`.
    fn tool(&self, name: &ToolName) -> Option<Arc<dyn Tool>>;

    /// Runs a call in the host's runtime (time limit, panics caught, truncation).
    fn run(&self, call: HostedCall) -> RunFuture;

    /// The text a delivered Job Result holds and whether it is an error: as the
    /// `PostToolUse` hooks leave it, then stored (`source = "job"`) or saved to its
    /// `flemma.save_to`, as `settings` say.
    fn result_text(
        &self,
        settings: &Self::Settings,
        item: &Delivery,
    ) -> impl Future<Output = (String, bool)> + Send;
}
