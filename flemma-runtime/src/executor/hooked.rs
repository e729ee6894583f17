//! The executor's side of hooks: `PreToolUse` in Phase 1 (inputs rewritten in the
//! transcript, the verdict left for the chain's hooks resolver, context kept for the result),
//! `Notification` for calls left pending, `PostToolUse` / `PostToolUseFailure` before a
//! result is written.

use std::sync::PoisonError;

use flemma_ast::writer;
use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

use super::state::{Executor, Settings};
use super::types::ExecutorError;
use crate::events::Event;
use crate::hooks::{
    HookContext, HookEvent, Hooks, NotificationInput, PostToolUseInput, PreToolUseInput,
};
use crate::transcript::TranscriptError;
use flemma_core::ToolOutput;

/// How a hook's context for the model is written into a result: its own paragraph, naming
/// the hook.
pub(super) fn context_note(hook: &str, text: &str) -> String {
    format!("Hook `{hook}`: {}", text.trim())
}

impl Executor {
    /// What hooks are told about this conversation.
    pub(super) fn hook_context(&self, settings: &Settings) -> HookContext {
        let chat = settings.shared.chat();
        let cwd = chat
            .and_then(std::path::Path::parent)
            .map(std::path::Path::to_owned)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        let context = HookContext::new(self.setup.transcript.conversation_id(), cwd);
        match chat {
            Some(path) => context.with_transcript(path),
            None => context,
        }
    }

    /// The hooks of this conversation under `settings`: the registry's, the executor's own
    /// and those its frontmatter added.
    pub(super) fn hooks_of(&self, settings: &crate::transcript::Settings) -> Hooks {
        settings
            .evaluated
            .hooks_with(&self.setup.registry.hooks().merged(&self.setup.hooks, true))
    }

    /// The hooks that run for this executor's conversation now, in the order they run: the
    /// registry's ([`ToolRegistry::register_hook`](crate::ToolRegistry::register_hook)), the
    /// executor's own ([`ExecutorBuilder::hook`](super::ExecutorBuilder::hook), which replace
    /// registry hooks of their names) and those the conversation's frontmatter added where the
    /// host allows it ([`from_frontmatter`](crate::hooks::from_frontmatter)).
    ///
    /// # Errors
    ///
    /// [`ExecutorError::Transcript`] when the conversation's options do not evaluate.
    pub async fn hooks(&self) -> Result<Hooks, ExecutorError> {
        let settings = self.setup.transcript.settings().await?;
        Ok(self.hooks_of(&settings))
    }

    /// Runs the `PreToolUse` hooks of a call: their warnings emitted, their context kept for
    /// the call's result. Returns their verdict, for the chain's hooks resolver
    /// ([`resolver::deciding`](crate::hooks::resolver::deciding)), and the input the call
    /// runs with when a hook rewrote it.
    pub(super) async fn pre_tool_use(
        &self,
        hooks: &Hooks,
        context: &HookContext,
        id: &ToolUseId,
        tool: &ToolName,
        input: &Value,
    ) -> (flemma_approval::Verdict, Option<Value>) {
        let event = PreToolUseInput::new(context.clone(), tool.clone(), id.clone(), input.clone());
        let outcome = hooks.pre_tool_use(&event).await;
        for warning in outcome.warnings {
            self.emit(Event::Warning(warning));
        }
        if !outcome.context.is_empty() {
            self.hook_notes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.clone(), outcome.context);
        }
        let verdict = crate::hooks::resolver::verdict_of(outcome.decision.as_ref());
        (verdict, outcome.input)
    }

    /// Writes the inputs hooks rewrote into their `**Tool Use:**` blocks, in one edit.
    pub(super) async fn rewrite_inputs(
        &self,
        rewrites: &[(ToolUseId, Value)],
    ) -> Result<(), ExecutorError> {
        if rewrites.is_empty() {
            return Ok(());
        }
        self.edit_indexed(|doc, index| {
            let mut edits = Vec::with_capacity(rewrites.len());
            for (id, input) in rewrites {
                let Value::Object(input) = input else {
                    continue;
                };
                match writer::rewrite_tool_use_input(doc, index, id.as_str(), input) {
                    Ok(edit) => edits.push(edit),
                    // The call went away meanwhile: nothing to rewrite.
                    Err(flemma_ast::AstError::UnknownToolUse { .. }) => {}
                    Err(error) => return Err(TranscriptError::Edit(error).into()),
                }
            }
            Ok(edits)
        })
        .await
    }

    /// Tells the `Notification` hooks that a call waits for approval.
    pub(super) async fn notify_pending(
        &self,
        hooks: &Hooks,
        context: &HookContext,
        id: &ToolUseId,
        tool: &ToolName,
    ) {
        if !hooks.has(HookEvent::Notification) {
            return;
        }
        let event = NotificationInput::permission(context.clone(), tool.clone(), id.clone());
        for warning in hooks.notification(&event).await {
            self.emit(Event::Warning(warning));
        }
    }

    /// A finished call's output as the `PostToolUse` / `PostToolUseFailure` hooks leave it,
    /// with the context of its `PreToolUse` and `PostToolUse` hooks added as notes.
    pub(super) async fn post_tool_use(
        &self,
        settings: &Settings,
        id: &ToolUseId,
        tool: &ToolName,
        output: ToolOutput,
        truncated: bool,
    ) -> ToolOutput {
        let hooks = self.hooks_of(&settings.shared);
        let mut notes = self
            .hook_notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
            .unwrap_or_default();
        let event = if output.is_success() {
            HookEvent::PostToolUse
        } else {
            HookEvent::PostToolUseFailure
        };
        let mut output = output;
        if hooks.has(event) {
            let input = self
                .with_index(|doc, index| {
                    index
                        .tool_use(doc, id.as_str())
                        .map(|u| Value::Object(u.node.input().clone()))
                })
                .await
                .ok()
                .flatten()
                .unwrap_or(Value::Null);
            let event = PostToolUseInput::new(
                self.hook_context(settings),
                tool.clone(),
                id.clone(),
                input,
                output.result_text(),
                !output.is_success(),
            )
            .truncated(truncated);
            let outcome = hooks.post_tool_use(&event).await;
            for warning in outcome.warnings {
                self.emit(Event::Warning(warning));
            }
            if outcome.changed {
                output = if outcome.is_error {
                    ToolOutput::error(outcome.result)
                } else {
                    ToolOutput::text(outcome.result)
                };
            }
            notes.extend(outcome.context);
        }
        if notes.is_empty() {
            return output;
        }
        let notes: Vec<String> = notes.iter().map(|(h, t)| context_note(h, t)).collect();
        let mut text = output.result_text();
        for note in notes {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&note);
        }
        if output.is_success() {
            ToolOutput::text(text)
        } else {
            ToolOutput::error(text)
        }
    }
}

impl Executor {
    /// What a denied call's placeholder holds for Phase 2's error: the resolver's reason (a
    /// hook's names the hook) and the notes its `PreToolUse` hooks left; `None` when there is
    /// neither.
    pub(super) fn denial_text(&self, id: &ToolUseId, reason: Option<String>) -> Option<String> {
        let notes = self
            .hook_notes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
            .unwrap_or_default();
        let mut parts: Vec<String> = reason
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty())
            .into_iter()
            .collect();
        parts.extend(notes.iter().map(|(h, t)| context_note(h, t)));
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Writes each denial's text into its `(denied)` placeholder, in one edit.
    pub(super) async fn write_denials(
        &self,
        reasons: &[(ToolUseId, String)],
        writer: writer::WriterOptions,
    ) -> Result<(), ExecutorError> {
        if reasons.is_empty() {
            return Ok(());
        }
        self.edit_indexed(|doc, _| {
            let mut edits = Vec::with_capacity(reasons.len());
            for (id, text) in reasons {
                match writer::rewrite_fence_body(doc, id.as_str(), text, writer) {
                    Ok(edit) => edits.push(edit),
                    Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                    Err(error) => return Err(TranscriptError::Edit(error).into()),
                }
            }
            Ok(edits)
        })
        .await
    }
}
