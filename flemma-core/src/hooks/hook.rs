//! The [`Hook`] trait: one async method per event, each defaulting to no opinion.

use std::sync::Arc;

use async_trait::async_trait;

use super::error::HookError;
use super::event::{
    NotificationInput, PostCompactInput, PostToolUseAnswer, PostToolUseInput, PreCompactAnswer,
    PreCompactInput, PreToolUseAnswer, PreToolUseInput, PromptAnswer, SessionInput, StopAnswer,
    StopInput, SubagentInput, UserPromptSubmitInput,
};

/// Code that runs at the [`HookEvent`](super::HookEvent)s it is registered for. Every method
/// defaults to no opinion, so a hook implements only the events it answers.
///
/// ```
/// use flemma_core::hooks::{Hook, HookError, PostToolUseAnswer, PostToolUseInput};
/// use async_trait::async_trait;
///
/// /// Tells the model that a write was formatted.
/// struct Formatted;
///
/// #[async_trait]
/// impl Hook for Formatted {
///     async fn post_tool_use(&self, event: &PostToolUseInput) -> Result<PostToolUseAnswer, HookError> {
///         Ok(if event.tool == "write" { PostToolUseAnswer::append("(formatted)") } else { PostToolUseAnswer::pass() })
///     }
/// }
/// ```
#[async_trait]
pub trait Hook: Send + Sync {
    /// A call about to be decided: allow, deny, ask, rewrite its input, add context.
    async fn pre_tool_use(&self, event: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
        let _ = event;
        Ok(PreToolUseAnswer::pass())
    }

    /// A call that succeeded, before its result is written.
    async fn post_tool_use(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        let _ = event;
        Ok(PostToolUseAnswer::pass())
    }

    /// A call that failed, before its error is written.
    async fn post_tool_use_failure(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        let _ = event;
        Ok(PostToolUseAnswer::pass())
    }

    /// A send carrying a new user message.
    async fn user_prompt_submit(
        &self,
        event: &UserPromptSubmitInput,
    ) -> Result<PromptAnswer, HookError> {
        let _ = event;
        Ok(PromptAnswer::pass())
    }

    /// The session is about to go idle.
    async fn stop(&self, event: &StopInput) -> Result<StopAnswer, HookError> {
        let _ = event;
        Ok(StopAnswer::pass())
    }

    /// A session starts.
    async fn session_start(&self, event: &SessionInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }

    /// A session ends.
    async fn session_end(&self, event: &SessionInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }

    /// A call waits for approval.
    async fn notification(&self, event: &NotificationInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }

    /// A subagent starts.
    async fn subagent_start(&self, event: &SubagentInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }

    /// A subagent stopped.
    async fn subagent_stop(&self, event: &SubagentInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }

    /// The conversation is about to be compacted: cancel it, or add instructions.
    async fn pre_compact(&self, event: &PreCompactInput) -> Result<PreCompactAnswer, HookError> {
        let _ = event;
        Ok(PreCompactAnswer::pass())
    }

    /// The conversation was compacted.
    async fn post_compact(&self, event: &PostCompactInput) -> Result<(), HookError> {
        let _ = event;
        Ok(())
    }
}

#[async_trait]
impl<H: Hook + ?Sized> Hook for Arc<H> {
    async fn pre_tool_use(&self, event: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
        (**self).pre_tool_use(event).await
    }
    async fn post_tool_use(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        (**self).post_tool_use(event).await
    }
    async fn post_tool_use_failure(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        (**self).post_tool_use_failure(event).await
    }
    async fn user_prompt_submit(
        &self,
        event: &UserPromptSubmitInput,
    ) -> Result<PromptAnswer, HookError> {
        (**self).user_prompt_submit(event).await
    }
    async fn stop(&self, event: &StopInput) -> Result<StopAnswer, HookError> {
        (**self).stop(event).await
    }
    async fn session_start(&self, event: &SessionInput) -> Result<(), HookError> {
        (**self).session_start(event).await
    }
    async fn session_end(&self, event: &SessionInput) -> Result<(), HookError> {
        (**self).session_end(event).await
    }
    async fn notification(&self, event: &NotificationInput) -> Result<(), HookError> {
        (**self).notification(event).await
    }
    async fn subagent_start(&self, event: &SubagentInput) -> Result<(), HookError> {
        (**self).subagent_start(event).await
    }
    async fn subagent_stop(&self, event: &SubagentInput) -> Result<(), HookError> {
        (**self).subagent_stop(event).await
    }
    async fn pre_compact(&self, event: &PreCompactInput) -> Result<PreCompactAnswer, HookError> {
        (**self).pre_compact(event).await
    }
    async fn post_compact(&self, event: &PostCompactInput) -> Result<(), HookError> {
        (**self).post_compact(event).await
    }
}
