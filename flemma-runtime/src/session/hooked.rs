//! The session's hook events: `SessionStart` at the first run, `UserPromptSubmit` before a
//! send that carries a new user message, `Stop` when the model answered without tools, and
//! `SessionEnd` when the host ends the session. What a hook adds is written into the
//! transcript: a prompt's context into the user's message, a `Stop` hook's reason as a new
//! user message. A hook's words are not the user's: they are escaped
//! ([`flemma_ast::escape::escape_user`]), so they can start no message, result or template.

use std::path::Path;
use std::sync::atomic::Ordering;

use crate::Durability;
use crate::hooks::{HookContext, HookEvent, Hooks, SessionInput, StopInput, UserPromptSubmitInput};
use flemma_ast::{Role, Segment};

use super::{Session, SessionError, SessionEvent};

/// How a hook's text is written into a message: its own paragraph, naming the hook, escaped
/// so that it stays text in a `@You:` message.
fn note(hook: &str, text: &str) -> String {
    flemma_ast::escape::escape_user(&format!("Hook `{hook}`: {}", text.trim())).into_owned()
}

impl Session {
    /// The conversation's hooks ([`Executor::hooks`](crate::Executor::hooks)).
    pub(super) async fn hooks(&self) -> Result<Hooks, SessionError> {
        Ok(self.inner.executor.hooks().await?)
    }

    /// What the session's hooks are told about the conversation.
    pub(super) fn hook_context(&self) -> HookContext {
        let transcript = self.inner.transcript();
        let chat = transcript
            .conversation()
            .path()
            .map(flemma_config::conversation_path);
        let cwd = chat
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_owned)
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        let context = HookContext::new(transcript.conversation_id(), cwd);
        match chat {
            Some(chat) => context.with_transcript(chat),
            None => context,
        }
    }

    pub(super) fn warn_all(&self, warnings: Vec<String>) {
        for warning in warnings {
            self.emit(SessionEvent::Warning(warning));
        }
    }

    /// `SessionStart`, once per session (at its first run).
    pub(super) async fn start_hooks(&self) {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return;
        }
        // Options that do not evaluate fail the run right after; no hook runs here.
        let Ok(hooks) = self.hooks().await else {
            return;
        };
        if !hooks.has(HookEvent::SessionStart) {
            return;
        }
        let event = SessionInput::new(self.hook_context(), "startup");
        let warnings = hooks.session(true, &event).await;
        self.warn_all(warnings);
    }

    /// Ends the session for its hooks: runs the `SessionEnd` hooks with `reason` (`exit`,
    /// `clear`, …). A host calls it once, when it is done with the conversation.
    pub async fn end(&self, reason: &str) {
        let hooks = match self.hooks().await {
            Ok(hooks) => hooks,
            Err(error) => {
                let report =
                    crate::hooks::HookError::with_source("SessionEnd hooks not run", error)
                        .report();
                self.emit(SessionEvent::Warning(report));
                return;
            }
        };
        if !hooks.has(HookEvent::SessionEnd) {
            return;
        }
        let event = SessionInput::new(self.hook_context(), reason);
        let warnings = hooks.session(false, &event).await;
        self.warn_all(warnings);
    }

    /// `UserPromptSubmit` before a send whose last message is the user's, with text: `false`
    /// when a hook blocked the send (a [`SessionEvent::PromptBlocked`] tells the UI); the
    /// hooks' context is added to the user's message first.
    pub(super) async fn prompt_hooks(&self) -> Result<bool, SessionError> {
        let hooks = self.hooks().await?;
        if !hooks.has(HookEvent::UserPromptSubmit) {
            return Ok(true);
        }
        let prompt = self
            .inner
            .transcript()
            .read(|doc, _| {
                let last = doc.messages.last().filter(|m| m.role == Role::You)?;
                let text: Vec<&str> = last
                    .segments
                    .iter()
                    .filter_map(|s| match s {
                        Segment::Text(t) if !t.value.trim().is_empty() => Some(t.value.as_str()),
                        _ => None,
                    })
                    .collect();
                (!text.is_empty()).then(|| text.concat().trim().to_owned())
            })
            .await?;
        let Some(prompt) = prompt else {
            return Ok(true);
        };
        let event = UserPromptSubmitInput::new(self.hook_context(), prompt);
        let outcome = hooks.user_prompt_submit(&event).await;
        self.warn_all(outcome.warnings);
        if let Some((hook, reason)) = outcome.block {
            self.emit(SessionEvent::PromptBlocked { hook, reason });
            return Ok(false);
        }
        if !outcome.context.is_empty() {
            let notes: Vec<String> = outcome.context.iter().map(|(h, t)| note(h, t)).collect();
            self.append_paragraph(&notes.join("\n\n")).await?;
        }
        Ok(true)
    }

    /// `Stop` when the model answered without tools: `true` when a hook keeps the session
    /// going (its reason written as a new user message the model reads).
    pub(super) async fn stop_hooks(&self, active: bool) -> Result<bool, SessionError> {
        let hooks = self.hooks().await?;
        if !hooks.has(HookEvent::Stop) {
            return Ok(false);
        }
        let last = self
            .inner
            .transcript()
            .read(|doc, _| {
                let last = doc.messages.last().filter(|m| m.role == Role::Assistant)?;
                let text: String = last
                    .segments
                    .iter()
                    .filter_map(|s| match s {
                        Segment::Text(t) => Some(flemma_ast::escape::unescape_assistant(&t.value)),
                        _ => None,
                    })
                    .collect();
                Some(text.trim().to_owned())
            })
            .await?;
        let event = StopInput::new(self.hook_context(), active, last);
        let outcome = hooks.stop(&event).await;
        self.warn_all(outcome.warnings);
        let Some((hook, reason)) = outcome.continue_with else {
            return Ok(false);
        };
        self.append_message(&note(&hook, &reason)).await?;
        Ok(true)
    }
}

impl Session {
    /// Adds `text` as a paragraph of the last message.
    async fn append_paragraph(&self, text: &str) -> Result<(), SessionError> {
        self.inner
            .executor
            .append_lines(&format!("\n{text}"), Durability::Durable)
            .await?;
        Ok(())
    }

    /// Adds a user message holding `text` (into the empty `@You:` a complete response
    /// leaves, when it is there).
    async fn append_message(&self, text: &str) -> Result<(), SessionError> {
        let empty_prompt = self
            .inner
            .transcript()
            .read(|doc, _| {
                doc.messages
                    .last()
                    .is_some_and(|m| m.role == Role::You && m.is_blank())
            })
            .await?;
        let lines = if empty_prompt {
            text.to_owned()
        } else {
            format!("\n@You:\n{text}")
        };
        self.inner
            .executor
            .append_lines(&lines, Durability::Durable)
            .await?;
        Ok(())
    }
}
