//! Integration tests of flemma-schema: one binary, one module per concern.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod capabilities;
mod dsl;
mod errors;
mod golden;
mod inputs;
mod strict;
mod validation;
