//! Integration tests of flemma-providers: one binary, one module per concern.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod errors;
mod http;
mod prompt;
mod recordings;
mod requests_a;
mod requests_b;
mod sse;

use std::path::PathBuf;

/// A recording from `shared/fixtures/peer`.
pub(crate) fn peer(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/peer")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every streamed recording (`*_stream.txt`, `*_streaming.txt`).
pub(crate) fn stream_files() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/peer");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("_stream.txt") || n.ends_with("_streaming.txt"))
        .collect();
    names.sort();
    assert!(names.len() >= 20, "{names:?}");
    names
}
