//! What a tool call may ask of the session that runs it beyond its own work: a child
//! conversation (a subagent). The tool context holds it as a [`Delegate`], so that the tool
//! and the session do not depend on each other's insides.

use crate::{ExecutionContext, ToolOutput};

/// A child conversation a call asks for: which agent, with what task.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DelegateRequest {
    /// The agent's name.
    pub agent: String,
    /// The task: the child's first user message.
    pub prompt: String,
}

impl DelegateRequest {
    /// A request for `agent` to do `prompt`.
    pub fn new(agent: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self {
            agent: agent.into(),
            prompt: prompt.into(),
        }
    }
}

/// Runs child conversations for the calls of one session: a child never has more power than
/// its parent (its tools within the parent's, the parent's approvals, the parent's limits).
/// The runtime's `Session` lends it to the calls of its conversation when the host enables
/// subagents; a tool reads it with [`ExecutionContext::delegate`].
#[async_trait::async_trait]
pub trait Delegate: Send + Sync + std::fmt::Debug {
    /// Runs the child `request` asks for, as a child of the call `ctx` describes, until it
    /// answers, stops or is cancelled (through `ctx`'s cancellation). The output is the call's
    /// result: the child's answer, or why there is none.
    async fn delegate(&self, request: &DelegateRequest, ctx: &ExecutionContext) -> ToolOutput;
}
