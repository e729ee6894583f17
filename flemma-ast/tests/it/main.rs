//! Integration tests of flemma-ast: one binary, one module per concern.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod common;
mod deep_input;
mod fixtures;
mod incremental;
mod peer;
mod queries;
mod roundtrip;
mod writer;
