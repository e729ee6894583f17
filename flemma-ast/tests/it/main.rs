//! Integration tests of flemma-ast: one binary, one module per concern.

mod common;
mod fixtures;
mod incremental;
mod peer;
mod queries;
mod roundtrip;
mod writer;
