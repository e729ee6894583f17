//! Integration tests of flemma-providers: one binary, one module per concern.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod compaction;
mod errors;
mod from_options;
mod http;
mod model_text;
mod prompt;
mod recordings;
mod requests_a;
mod requests_b;
mod sse;
mod stalls;
mod templates;

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

/// The prompt of a peer transcript (`conversation_with_tools.chat`).
pub(crate) fn prompt(name: &str) -> flemma_providers::Prompt<'static> {
    let text = String::from_utf8(peer(name)).unwrap();
    flemma_providers::build_prompt(&flemma_ast::parse(&text)).into_owned()
}

/// A strict `calculator` tool, as the peer transcripts use.
pub(crate) fn calculator() -> flemma_schema::ToolSpec {
    flemma_schema::ToolSpec::builder(
        flemma_ids::ToolName::new("calculator").unwrap(),
        "Evaluate an arithmetic expression.",
    )
    .input(flemma_schema::dsl::object([(
        "expression",
        flemma_schema::dsl::string().describe("The expression"),
    )]))
    .strict(true)
    .build()
    .unwrap()
}

/// Options for `model` offering the calculator, thinking off.
pub(crate) fn options(model: &str) -> flemma_providers::RequestOptions {
    flemma_providers::RequestOptions {
        tools: vec![calculator()],
        thinking: flemma_providers::Thinking::Off,
        ..flemma_providers::RequestOptions::new(model)
    }
}

/// A directory under the system temp dir, removed on drop.
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub(crate) fn new(test: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("flemma-providers-it-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self { path }
    }

    /// Writes `bytes` to `rest` (parent directories created) and returns its path.
    pub(crate) fn write(&self, rest: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path.join(rest);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bytes).unwrap();
        path
    }

    pub(crate) fn join(&self, rest: &str) -> PathBuf {
        self.path.join(rest)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
