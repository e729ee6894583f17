//! Integration tests of the facade: the session loop, scripted and over HTTP.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod book;
mod compaction;
mod defaults;
mod durability;
mod file_access;
mod hooks;
mod http;
mod scratch;
mod session;
mod streams;
mod subagents;
mod telemetry;

use std::path::PathBuf;
use std::sync::Arc;

use flemma::core::{ToolDefinition, ToolOutput, tool_fn};
use flemma::runtime::ToolRegistry;

/// A file of `shared/fixtures/peer`.
pub(crate) fn peer(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/peer")
        .join(name)
}

/// A registry with `calculator` (`a <op> b`, as the peer recordings ask) and `slow` (sleeps
/// for `seconds`).
pub(crate) fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(tool_fn(
        ToolDefinition::builder("calculator", "Evaluate `a <op> b`.")
            .unwrap()
            .build()
            .unwrap(),
        |input, _ctx| {
            let expression = input["expression"].as_str().unwrap_or_default();
            let parts: Vec<&str> = expression.split_whitespace().collect();
            let [a, op, b] = parts[..] else {
                return ToolOutput::error(format!("cannot evaluate {expression:?}"));
            };
            let (a, b): (f64, f64) = match (a.parse(), b.parse()) {
                (Ok(a), Ok(b)) => (a, b),
                _ => return ToolOutput::error(format!("cannot evaluate {expression:?}")),
            };
            let value = match op {
                "+" => a + b,
                "-" => a - b,
                "*" => a * b,
                "/" => a / b,
                _ => return ToolOutput::error(format!("unknown operator {op}")),
            };
            ToolOutput::text(value.to_string())
        },
    ));
    registry.register(flemma::core::async_tool_fn(
        ToolDefinition::builder("slow", "Sleep.")
            .unwrap()
            .build()
            .unwrap(),
        |input, _ctx| {
            let seconds = input["seconds"].as_u64().unwrap_or(60);
            Box::pin(async move {
                tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
                ToolOutput::text("slept")
            })
        },
    ));
    registry
}

/// A registry with the async `wait` tool (sleeps `ms`), which can run in the background.
pub(crate) fn background_registry() -> flemma::runtime::ToolRegistry {
    use flemma::core::async_tool_fn;
    let registry = registry();
    registry.register(async_tool_fn(
        ToolDefinition::builder("wait", "Wait a while.")
            .unwrap()
            .asynchronous(true)
            .build()
            .unwrap(),
        |input, _ctx| async move {
            let ms = input["ms"].as_u64().unwrap_or(10);
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            ToolOutput::text(format!("waited {ms} ms"))
        },
    ));
    registry
}

/// Options that keep an unnamed conversation's store (its job journal) in `dir`: under the
/// temporary directory, where the default puts it, it would be left behind.
pub(crate) fn unnamed_store_in(dir: &std::path::Path) -> flemma::config::Config {
    let mut config = flemma::config::Config::new();
    let format = format!(
        "{}/{{{{ bufnr }}}}/{{{{ source }}}}_{{{{ name }}}}_{{{{ id }}}}.txt",
        dir.display()
    );
    config
        .set(
            flemma::config::Layer::Setup,
            "tools.store.unnamed_path_format",
            format,
        )
        .unwrap();
    config
}

/// A conversation whose frontmatter approves `tools` and whose last message is `ask`.
pub(crate) fn chat(tools: &[&str], ask: &str) -> Arc<flemma::runtime::MemoryConversation> {
    let list = serde_json::to_string(tools).unwrap();
    Arc::new(flemma::runtime::MemoryConversation::new(format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"auto_approve\": {list}}}}}}}\n```\n@You:\n{ask}\n"
    )))
}
