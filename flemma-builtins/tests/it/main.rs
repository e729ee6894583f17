//! Integration tests of flemma-builtins: `bash` (its terminal, its processes, its sandbox,
//! under load), the file tools and `grep`/`find`, each run as a host runs a tool, with an
//! `ExecutionContext` of its own.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod bash;
mod bash_load;
mod files;
mod sandbox;
mod scratch;
mod search;
