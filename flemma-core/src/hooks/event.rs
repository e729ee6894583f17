//! What each hook event tells a hook, and what a hook may answer.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

use super::error::HookError;

/// The moments a hook can run at (Claude Code's event names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HookEvent {
    /// A tool call was parsed; the approval chain has not decided yet.
    PreToolUse,
    /// A call succeeded; its result is not written yet.
    PostToolUse,
    /// A call failed (an error result); its result is not written yet.
    PostToolUseFailure,
    /// A send that carries a new user message is about to go out.
    UserPromptSubmit,
    /// The session is about to go idle.
    Stop,
    /// A session starts.
    SessionStart,
    /// A session ends.
    SessionEnd,
    /// A call waits for approval.
    Notification,
    /// A subagent starts (an `agent` call of the conversation).
    SubagentStart,
    /// A subagent stopped (answered, waits, failed or was cancelled).
    SubagentStop,
    /// The conversation is about to be compacted (a hook may cancel it or add instructions
    /// for the summary).
    PreCompact,
    /// The conversation was compacted: its `**Compaction:**` block is written.
    PostCompact,
}

impl HookEvent {
    /// Every event, in the order above.
    pub const ALL: [HookEvent; 12] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::Notification,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
    ];

    /// The event's name (`PreToolUse`), as `hook_event_name` and `flemma.toml` write it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
        }
    }

    /// Whether the event is about one tool call (its matcher matches the tool's name).
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::PostToolUseFailure
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HookEvent {
    type Err = HookError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HookEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| HookError::new(format!("unknown hook event `{s}`")))
    }
}

/// What every event tells a hook about the conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HookContext {
    /// The conversation's id (`session_id` of a command hook's input).
    pub session_id: String,
    /// The `.chat` file, when the conversation has one.
    pub transcript_path: Option<PathBuf>,
    /// The directory the conversation works in (its file's directory, else the process's).
    pub cwd: PathBuf,
}

impl HookContext {
    /// A context for the conversation `session_id`, working in `cwd`.
    pub fn new(session_id: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            session_id: session_id.into(),
            transcript_path: None,
            cwd: cwd.into(),
        }
    }

    /// With the conversation's file.
    #[must_use]
    pub fn with_transcript(mut self, path: impl Into<PathBuf>) -> Self {
        self.transcript_path = Some(path.into());
        self
    }
}

/// `PreToolUse`: a call about to be decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PreToolUseInput {
    /// The conversation.
    pub context: HookContext,
    /// The tool the model asked for.
    pub tool: ToolName,
    /// The call's id.
    pub id: ToolUseId,
    /// The call's input (as rewritten by the hooks that ran before this one).
    pub input: Value,
}

impl PreToolUseInput {
    /// The event for one call.
    pub fn new(context: HookContext, tool: ToolName, id: ToolUseId, input: Value) -> Self {
        Self {
            context,
            tool,
            id,
            input,
        }
    }
}

/// A `PreToolUse` hook's decision about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Run it without asking (the chain approves).
    Allow,
    /// Refuse it; the reason reaches the model.
    Deny,
    /// Ask the user (the call becomes `(pending)`).
    Ask,
}

impl Permission {
    /// `allow`, `deny`, `ask`.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Allow => "allow",
            Permission::Deny => "deny",
            Permission::Ask => "ask",
        }
    }
}

/// What a `PreToolUse` hook answers. [`PreToolUseAnswer::pass`] (the default) has no
/// opinion.
///
/// ```
/// use flemma_core::hooks::{Permission, PreToolUseAnswer};
/// let answer = PreToolUseAnswer::deny("no recursive deletes");
/// assert_eq!(answer.permission, Some(Permission::Deny));
/// let rewritten = PreToolUseAnswer::pass().with_input(serde_json::json!({"command": "ls -a"}));
/// assert!(rewritten.permission.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PreToolUseAnswer {
    /// A message shown to the user (not the model): Claude Code's `systemMessage`.
    pub notice: Option<String>,
    /// The decision, or none.
    pub permission: Option<Permission>,
    /// Why: shown to the model for a denial, to the user for `ask`.
    pub reason: Option<String>,
    /// The input the call runs with instead (a JSON object; the `**Tool Use:**` block is
    /// rewritten to hold it).
    pub updated_input: Option<Value>,
    /// Text for the model, added to the call's result.
    pub context: Option<String>,
}

impl PreToolUseAnswer {
    /// No opinion.
    pub fn pass() -> Self {
        Self::default()
    }

    /// Run the call without asking.
    pub fn allow() -> Self {
        Self {
            permission: Some(Permission::Allow),
            ..Self::default()
        }
    }

    /// Refuse the call; `reason` reaches the model.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            permission: Some(Permission::Deny),
            reason: Some(reason.into()),
            ..Self::default()
        }
    }

    /// Ask the user about the call.
    pub fn ask(reason: impl Into<String>) -> Self {
        Self {
            permission: Some(Permission::Ask),
            reason: Some(reason.into()),
            ..Self::default()
        }
    }

    /// Runs the call with `input` instead.
    #[must_use]
    pub fn with_input(mut self, input: Value) -> Self {
        self.updated_input = Some(input);
        self
    }

    /// Adds text for the model.
    #[must_use]
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }
}

/// `PostToolUse` and `PostToolUseFailure`: a call's result before it is written.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PostToolUseInput {
    /// The conversation.
    pub context: HookContext,
    /// The tool.
    pub tool: ToolName,
    /// The call's id.
    pub id: ToolUseId,
    /// The input it ran with.
    pub input: Value,
    /// The result's text (the error's message for a failure), as changed by the hooks that
    /// ran before this one.
    pub result: String,
    /// Whether the result is an error.
    pub is_error: bool,
    /// Whether the text was truncated (the full output is in the result store).
    pub truncated: bool,
}

impl PostToolUseInput {
    /// The event for one finished call.
    pub fn new(
        context: HookContext,
        tool: ToolName,
        id: ToolUseId,
        input: Value,
        result: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self {
            context,
            tool,
            id,
            input,
            result: result.into(),
            is_error,
            truncated: false,
        }
    }

    /// Marks the text as truncated.
    #[must_use]
    pub fn truncated(mut self, truncated: bool) -> Self {
        self.truncated = truncated;
        self
    }
}

/// What a `PostToolUse` / `PostToolUseFailure` hook answers.
///
/// ```
/// use flemma_core::hooks::PostToolUseAnswer;
/// let answer = PostToolUseAnswer::append("formatted with rustfmt").mark_error(false);
/// assert_eq!(answer.is_error, Some(false));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PostToolUseAnswer {
    /// A message shown to the user (not the model): Claude Code's `systemMessage`.
    pub notice: Option<String>,
    /// The result's text instead.
    pub replace: Option<String>,
    /// Text added after the result's.
    pub append: Option<String>,
    /// Makes the result an error (`true`) or a success (`false`).
    pub is_error: Option<bool>,
    /// Text for the model, added to the result as a hook's note.
    pub context: Option<String>,
}

impl PostToolUseAnswer {
    /// No opinion.
    pub fn pass() -> Self {
        Self::default()
    }

    /// The result's text instead.
    pub fn replace(text: impl Into<String>) -> Self {
        Self {
            replace: Some(text.into()),
            ..Self::default()
        }
    }

    /// Text added after the result's.
    pub fn append(text: impl Into<String>) -> Self {
        Self {
            append: Some(text.into()),
            ..Self::default()
        }
    }

    /// Marks the result an error (or, with `false`, a success).
    #[must_use]
    pub fn mark_error(mut self, is_error: bool) -> Self {
        self.is_error = Some(is_error);
        self
    }

    /// Adds text for the model.
    #[must_use]
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = Some(context.into());
        self
    }
}

/// `UserPromptSubmit`: a send that carries a new user message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserPromptSubmitInput {
    /// The conversation.
    pub context: HookContext,
    /// The user message's text.
    pub prompt: String,
}

impl UserPromptSubmitInput {
    /// The event for one message.
    pub fn new(context: HookContext, prompt: impl Into<String>) -> Self {
        Self {
            context,
            prompt: prompt.into(),
        }
    }
}

/// What a `UserPromptSubmit` hook answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptAnswer {
    /// A message shown to the user (not the model): Claude Code's `systemMessage`.
    pub notice: Option<String>,
    /// Blocks the send; the reason is shown to the user (not the model).
    pub block: Option<String>,
    /// Text for the model, written into the user's message as a hook's note.
    pub context: Option<String>,
}

impl PromptAnswer {
    /// No opinion.
    pub fn pass() -> Self {
        Self::default()
    }

    /// Blocks the send.
    pub fn block(reason: impl Into<String>) -> Self {
        Self {
            block: Some(reason.into()),
            ..Self::default()
        }
    }

    /// Adds text for the model.
    pub fn context(text: impl Into<String>) -> Self {
        Self {
            context: Some(text.into()),
            ..Self::default()
        }
    }
}

/// `Stop`: the session is about to go idle.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StopInput {
    /// The conversation.
    pub context: HookContext,
    /// Whether a `Stop` hook already kept this session going (check it to avoid a loop).
    pub stop_hook_active: bool,
    /// The model's last message, when there is one.
    pub last_message: Option<String>,
}

impl StopInput {
    /// The event.
    pub fn new(context: HookContext, stop_hook_active: bool, last_message: Option<String>) -> Self {
        Self {
            context,
            stop_hook_active,
            last_message,
        }
    }
}

/// What a `Stop` hook answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StopAnswer {
    /// A message shown to the user (not the model): Claude Code's `systemMessage`.
    pub notice: Option<String>,
    /// Keeps the session going: this reason is written as a user message the model reads.
    pub continue_with: Option<String>,
}

impl StopAnswer {
    /// Let the session stop.
    pub fn pass() -> Self {
        Self::default()
    }

    /// Keep the session going with `reason` for the model.
    pub fn continue_with(reason: impl Into<String>) -> Self {
        Self {
            continue_with: Some(reason.into()),
            ..Self::default()
        }
    }
}

/// `SessionStart` and `SessionEnd`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionInput {
    /// The conversation.
    pub context: HookContext,
    /// `startup` (a session starts) or why it ends (`idle`, `error`, `closed`).
    pub reason: String,
}

impl SessionInput {
    /// The event.
    pub fn new(context: HookContext, reason: impl Into<String>) -> Self {
        Self {
            context,
            reason: reason.into(),
        }
    }
}

/// `SubagentStart` and `SubagentStop`: a subagent of the conversation, as Claude Code
/// describes one (`agent_id`, `agent_type`; at its stop, `agent_transcript_path`). The
/// hooks are told; nothing they answer changes the child.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubagentInput {
    /// The parent conversation.
    pub context: HookContext,
    /// The `agent` call that runs the child (Claude Code's `agent_id`).
    pub agent_id: ToolUseId,
    /// The agent's name (Claude Code's `agent_type`).
    pub agent_type: String,
    /// The child's transcript, when it is a file.
    pub agent_transcript_path: Option<PathBuf>,
}

impl SubagentInput {
    /// The event for the child the call `agent_id` runs.
    pub fn new(
        context: HookContext,
        agent_id: ToolUseId,
        agent_type: impl Into<String>,
        agent_transcript_path: Option<PathBuf>,
    ) -> Self {
        Self {
            context,
            agent_id,
            agent_type: agent_type.into(),
            agent_transcript_path,
        }
    }
}

/// `Notification`: a call waits for approval.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotificationInput {
    /// The conversation.
    pub context: HookContext,
    /// What to tell the user (`flemma needs your permission to use bash`).
    pub message: String,
    /// The kind (`permission_prompt`).
    pub kind: String,
    /// The call, when the notification is about one.
    pub tool: Option<(ToolName, ToolUseId)>,
}

impl NotificationInput {
    /// A call that waits for approval.
    pub fn permission(context: HookContext, tool: ToolName, id: ToolUseId) -> Self {
        Self {
            context,
            message: format!("flemma needs your permission to use {tool}"),
            kind: "permission_prompt".to_owned(),
            tool: Some((tool, id)),
        }
    }
}

/// What started a compaction (Claude Code's `trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactTrigger {
    /// The next request would have crossed `compaction.threshold` of the context window.
    Auto,
    /// A host or a person asked for it (`flemma compact`, `Session::compact` in flemma-runtime).
    Manual,
}

impl CompactTrigger {
    /// `auto` or `manual`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactTrigger::Auto => "auto",
            CompactTrigger::Manual => "manual",
        }
    }
}

/// `PreCompact`: the conversation is about to be compacted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreCompactInput {
    /// The conversation.
    pub context: HookContext,
    /// What started it.
    pub trigger: CompactTrigger,
    /// How many messages the summary is to stand for.
    pub messages: u64,
    /// About how many tokens they take in a request.
    pub tokens: u64,
    /// The instructions the host gave for this compaction (Claude Code's
    /// `custom_instructions`), if any.
    pub custom_instructions: Option<String>,
}

impl PreCompactInput {
    /// The event.
    pub fn new(context: HookContext, trigger: CompactTrigger, messages: u64, tokens: u64) -> Self {
        Self {
            context,
            trigger,
            messages,
            tokens,
            custom_instructions: None,
        }
    }

    /// With the host's instructions.
    #[must_use]
    pub fn with_instructions(mut self, instructions: Option<String>) -> Self {
        self.custom_instructions = instructions;
        self
    }
}

/// What a `PreCompact` hook answers. [`PreCompactAnswer::pass`] (the default) has no opinion.
///
/// ```
/// use flemma_core::hooks::PreCompactAnswer;
/// let keep = PreCompactAnswer::instructions("Keep every file path the user named.");
/// assert!(keep.cancel.is_none());
/// let no = PreCompactAnswer::cancel("a review is in progress");
/// assert_eq!(no.cancel.as_deref(), Some("a review is in progress"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreCompactAnswer {
    /// A message shown to the user (not the model): Claude Code's `systemMessage`.
    pub notice: Option<String>,
    /// Cancels the compaction; the reason is shown to the user (not the model).
    pub cancel: Option<String>,
    /// Instructions added to the request that writes the summary.
    pub instructions: Option<String>,
}

impl PreCompactAnswer {
    /// No opinion.
    pub fn pass() -> Self {
        Self::default()
    }

    /// Cancels the compaction.
    pub fn cancel(reason: impl Into<String>) -> Self {
        Self {
            cancel: Some(reason.into()),
            ..Self::default()
        }
    }

    /// Adds instructions for the summary.
    pub fn instructions(text: impl Into<String>) -> Self {
        Self {
            instructions: Some(text.into()),
            ..Self::default()
        }
    }
}

/// `PostCompact`: the conversation was compacted. The hooks are told; nothing they answer
/// changes the block.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostCompactInput {
    /// The conversation.
    pub context: HookContext,
    /// What started it.
    pub trigger: CompactTrigger,
    /// How many messages the summary stands for.
    pub messages: u64,
    /// About how many tokens they took in a request.
    pub tokens: u64,
    /// About how many tokens the summary takes.
    pub summary_tokens: u64,
    /// The summary written.
    pub summary: String,
}

impl PostCompactInput {
    /// The event.
    pub fn new(
        context: HookContext,
        trigger: CompactTrigger,
        (messages, tokens, summary_tokens): (u64, u64, u64),
        summary: impl Into<String>,
    ) -> Self {
        Self {
            context,
            trigger,
            messages,
            tokens,
            summary_tokens,
            summary: summary.into(),
        }
    }
}
