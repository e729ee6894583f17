//! Integration tests of flemma-runtime: the registry and its sources, the executor's cycle,
//! claims, placements, durability, jobs and hooks (the built-in tools' are flemma-builtins').
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod agents;
mod claims;
mod conversation_ids;
mod cycle;
mod cycle_many;
mod duplicate_ids;
mod durability;
mod edited_inputs;
mod executor;
mod hooks;
mod id_names;
mod jobs;
mod paths;
mod placements;
mod registry;
mod scratch;
mod selection;
mod store_names;
mod timeouts;

/// An error and its causes, joined by `: `.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}

/// A subagent warning with the causes of the error it holds.
pub(crate) fn chain_warning(warning: &flemma_runtime::agents::AgentWarning) -> String {
    match warning {
        flemma_runtime::agents::AgentWarning::Skipped { error } => chain(error),
        other => other.to_string(),
    }
}
