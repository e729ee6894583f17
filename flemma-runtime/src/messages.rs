//! Model-facing strings, kept byte-identical to the Flemma plugin's in one table.
//! The runtime's own; those shared with the built-in tools are in `flemma_core::messages`.

pub(crate) use flemma_core::messages::{
    ABORTED, DENIED, JOB_START, NO_OUTPUT, exit_code, tool_timeout, unavailable,
};

/// `tool.rejected`
pub(crate) const REJECTED: &str = "This tool has been rejected by the user.";

/// `tool.rejected.feedback` without its `{{ reason }}`.
pub(crate) const REJECTED_FEEDBACK_PREFIX: &str = "User feedback: ";

/// `request.aborted`, the default message of an abort marker.
pub(crate) const REQUEST_ABORTED: &str = "Response interrupted by the user.";

/// `Unknown tool: <name>`.
pub(crate) fn unknown_tool(name: &str) -> String {
    format!("Unknown tool: {name}")
}

/// `Tool '<name>' is not executable`.
pub(crate) fn not_executable(name: &str) -> String {
    format!("Tool '{name}' is not executable")
}

/// `Tool <id> is already executing`.
pub(crate) fn already_executing(id: &str) -> String {
    format!("Tool {id} is already executing")
}

/// The content-overwrite warning.
pub(crate) fn edited_approved(count: usize) -> String {
    format!(
        "{count} tool result(s) have edited content inside an approved tool block – skipping execution to protect your edits. Remove the (approved) status from the header to send your content."
    )
}

// Background jobs (spec §8, §15).
/// `job.executing.tracked`: the placeholder when `flemma.jobs.status` is in the tool set.
pub(crate) fn job_executing_tracked(job_id: &str) -> String {
    format!(
        "Running as a background job `{job_id}`. Use `flemma.jobs.status` with this job ID to check progress. Do not retry — the result will be delivered to you automatically when the job completes."
    )
}

/// `job.executing.untracked`
pub(crate) const JOB_EXECUTING_UNTRACKED: &str = "Running as a background job. Do not retry or attempt to check progress — the result will be delivered to you automatically when the job completes.";

/// `job.lost`
pub(crate) const JOB_LOST: &str = "Job lost: session ended before completion.";

/// A foreground call whose host ended (was killed) before the call completed (this string is not in
/// the Flemma plugin, whose `job.lost` is for background jobs only).
pub(crate) const CALL_LOST: &str = "Tool execution lost: session ended before completion. It may have run in part; check before retrying.";

/// `tool.flemma.jobs.status.state_running`
pub(crate) const JOB_STATE_RUNNING: &str = "running";

/// `tool.flemma.jobs.status.state_delivery_pending`
pub(crate) const JOB_STATE_DELIVERY_PENDING: &str = "completed (delivery pending)";

/// `tool.flemma.jobs.status.state_completed`
pub(crate) const JOB_STATE_COMPLETED: &str = "completed";

/// `tool.flemma.jobs.status.state_removed`
pub(crate) const JOB_STATE_REMOVED: &str = "completed (removed from conversation)";

// Subagents (flemma-rs's own strings: the plugin has no `agent` tool).

/// An `agent` call naming no defined agent.
pub(crate) fn unknown_agent(name: &str, suggestion: Option<&str>, known: &[&str]) -> String {
    let mut text = format!("Unknown agent '{name}'.");
    if let Some(suggestion) = suggestion {
        text.push_str(" Did you mean '");
        text.push_str(suggestion);
        text.push_str("'?");
    }
    if known.is_empty() {
        text.push_str(" No agents are defined.");
    } else {
        text.push_str(" Agents: ");
        text.push_str(&known.join(", "));
        text.push('.');
    }
    text
}

/// An `agent` call where no session lends children (a tools-only host).
pub(crate) const AGENT_NEEDS_SESSION: &str =
    "The agent tool needs a session with a model; this host runs tools only.";

/// The line after a child's answer that names its transcript.
pub(crate) fn agent_transcript(path: &str) -> String {
    format!("Subagent transcript: {path}")
}

/// A child that stopped without an answer, and why.
pub(crate) fn agent_stopped(agent: &str, why: &str, transcript: Option<&str>) -> String {
    match transcript {
        Some(path) => {
            format!("Subagent '{agent}' stopped without an answer: {why}. Its transcript: {path}")
        }
        None => format!("Subagent '{agent}' stopped without an answer: {why}."),
    }
}

/// What a deferred `agent` call waits for: its child's pending calls, each with the commands
/// that decide it.
pub(crate) fn agent_waits(agent: &str, transcript: &str, pending: &[(String, String)]) -> String {
    let calls: Vec<String> = pending
        .iter()
        .map(|(tool, id)| {
            format!(
                "{tool} {id} (flemma approve {transcript} {id}, or flemma reject {transcript} {id})"
            )
        })
        .collect();
    let mut text = format!("subagent '{agent}' waits for approval in {transcript}");
    if !calls.is_empty() {
        text.push_str(": ");
        text.push_str(&calls.join("; "));
    }
    text
}

/// An `agent` call without a task.
pub(crate) const AGENT_NEEDS_PROMPT: &str =
    "The agent tool needs a prompt: the complete task for the agent.";

/// An `agent` call past the depth limit of subagents.
pub(crate) fn agent_too_deep(limit: u32) -> String {
    format!("Subagents cannot start here: the depth limit of subagents is {limit}.")
}
