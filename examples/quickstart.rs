//! Embeds the agent loop: the built-in tools, a conversation, a provider, a session.
//!
//! ```text
//! cargo run --example quickstart
//! ```
//!
//! Offline: the provider replays `examples/quickstart.script.json` (swap in
//! `HttpProvider::from_env(ProviderKind::Anthropic, "claude-sonnet-4-5")?` for a real model).
//! The scripted model asks for `ls` and `read`, which run for real in `examples/`.
#![allow(clippy::print_stdout, reason = "an example talks to its user")]

use std::sync::Arc;

use flemma::providers::ScriptedProvider;
use flemma::runtime::{MemoryConversation, ToolRegistry, register_builtins};
use flemma::runtime::{Session, SessionEvent, Stop};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let chat_path = dir.join("quickstart.chat");
    let tools = ToolRegistry::new();
    register_builtins(&tools)?;
    // A file would be `FileConversation::new(path)`; this keeps the example's file unchanged.
    let chat = Arc::new(
        MemoryConversation::new(std::fs::read_to_string(&chat_path)?).with_path(chat_path),
    );
    let model = Arc::new(ScriptedProvider::from_file(
        dir.join("quickstart.script.json"),
    )?);

    let session = Session::builder(chat.clone(), tools, model).build();
    let mut events = session.subscribe();
    let run = tokio::spawn(async move { session.run().await });
    while let Some(event) = events.recv().await {
        match event {
            SessionEvent::TextDelta(text) => print!("{text}"),
            SessionEvent::Tool(flemma::runtime::Event::ToolExecuting { preview, .. }) => {
                println!("\n[running {preview}]");
            }
            SessionEvent::Stopped(stop) => println!("\n[stopped: {stop:?}]"),
            _ => {}
        }
    }
    let stop = run.await??;
    anyhow::ensure!(stop == Stop::Finished, "the loop stopped early: {stop:?}");
    println!("\n--- the transcript ---\n{}", chat.text());
    Ok(())
}
