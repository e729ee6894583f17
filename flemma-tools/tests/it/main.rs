//! Integration tests of flemma-tools: truncation, previews, the registry and its sources.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod bash;
mod cycle;
mod executor;
mod files;
mod jobs;
mod preview;
mod registry;
mod sandbox;
mod search;
mod store_names;
mod truncate;
#[cfg(feature = "typed")]
mod typed;
