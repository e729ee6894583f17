//! Integration tests of flemma-core: truncation, previews and typed tool inputs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod preview;
mod truncate;
#[cfg(feature = "typed")]
mod typed;
