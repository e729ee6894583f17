//! Integration tests of flemma-approval: one binary, one module per concern.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod bash_rules;
mod cases;
mod chain;
#[cfg(feature = "lua")]
mod lua;
mod resolvers;
