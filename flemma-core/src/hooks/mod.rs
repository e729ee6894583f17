//! The hook contract: the [`Hook`] trait (one async method per [`HookEvent`], each defaulting
//! to "no opinion"), what each event tells a hook (`…Input`) and what a hook may answer
//! (`…Answer`), and [`HookError`].
//!
//! This module holds the contract only. Registering a hook (`HookRegistration`, a `Matcher`
//! on the tool's name, priorities), running hooks, command hooks in Claude Code's contract and
//! the `hook_fn` closure adapter are flemma-runtime's `hooks` module.
//!
//! ```
//! use async_trait::async_trait;
//! use flemma_core::hooks::{Hook, HookError, PreToolUseAnswer, PreToolUseInput};
//!
//! /// Refuses recursive deletes.
//! struct NoRm;
//!
//! #[async_trait]
//! impl Hook for NoRm {
//!     async fn pre_tool_use(&self, call: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
//!         let command = call.input["command"].as_str().unwrap_or_default();
//!         Ok(if command.contains("rm -rf") {
//!             PreToolUseAnswer::deny("recursive deletes are not allowed here")
//!         } else {
//!             PreToolUseAnswer::pass()
//!         })
//!     }
//! }
//! # let _ = NoRm;
//! ```

mod error;
mod event;
mod hook;

pub use error::HookError;
pub use event::{
    CompactTrigger, HookContext, HookEvent, NotificationInput, Permission, PostCompactInput,
    PostToolUseAnswer, PostToolUseInput, PreCompactAnswer, PreCompactInput, PreToolUseAnswer,
    PreToolUseInput, PromptAnswer, SessionInput, StopAnswer, StopInput, SubagentInput,
    UserPromptSubmitInput,
};
pub use hook::Hook;

/// One event as a type: what a hook for it is given and what it answers. The markers are in
/// [`on`]; flemma-runtime's `hook_fn` takes one to make a hook of a closure.
pub trait HookKind: Copy + Send + Sync + 'static {
    /// What the hook is given.
    type Input: Send + Sync;
    /// What it answers.
    type Answer: Send;
    /// The event.
    const EVENT: HookEvent;
}

/// The events as [`HookKind`] markers (`on::PreToolUse`).
pub mod on {
    use super::{HookEvent, HookKind, event};

    macro_rules! kinds {
        ($($(#[$doc:meta])* $name:ident: $input:ty => $answer:ty;)*) => {$(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;
            impl HookKind for $name {
                type Input = $input;
                type Answer = $answer;
                const EVENT: HookEvent = HookEvent::$name;
            }
        )*};
    }

    kinds! {
        /// `PreToolUse`.
        PreToolUse: event::PreToolUseInput => event::PreToolUseAnswer;
        /// `PostToolUse`.
        PostToolUse: event::PostToolUseInput => event::PostToolUseAnswer;
        /// `PostToolUseFailure`.
        PostToolUseFailure: event::PostToolUseInput => event::PostToolUseAnswer;
        /// `UserPromptSubmit`.
        UserPromptSubmit: event::UserPromptSubmitInput => event::PromptAnswer;
        /// `Stop`.
        Stop: event::StopInput => event::StopAnswer;
        /// `SessionStart`.
        SessionStart: event::SessionInput => ();
        /// `SessionEnd`.
        SessionEnd: event::SessionInput => ();
        /// `Notification`.
        Notification: event::NotificationInput => ();
        /// `SubagentStart`.
        SubagentStart: event::SubagentInput => ();
        /// `SubagentStop`.
        SubagentStop: event::SubagentInput => ();
        /// `PreCompact`.
        PreCompact: event::PreCompactInput => event::PreCompactAnswer;
        /// `PostCompact`.
        PostCompact: event::PostCompactInput => ();
    }
}
