//! Integration tests of flemma-runtime: truncation, previews, the registry and its sources.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod bash;
mod bash_load;
mod claims;
mod conversation_ids;
mod cycle;
mod cycle_many;
mod duplicate_ids;
mod durability;
mod edited_inputs;
mod executor;
mod files;
mod hooks;
mod id_names;
mod jobs;
mod paths;
mod placements;
mod preview;
mod registry;
mod sandbox;
mod search;
mod selection;
mod store_names;
mod timeouts;
mod truncate;
#[cfg(feature = "typed")]
mod typed;

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
