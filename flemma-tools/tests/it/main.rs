//! Integration tests of flemma-tools: truncation, previews, the registry and its sources.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod bash;
mod bash_load;
mod claims;
mod cycle;
mod cycle_many;
mod durability;
mod executor;
mod files;
mod hooks;
mod jobs;
mod paths;
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
