//! Subagents: the model delegates a review to a `reviewer` agent, which runs as a child
//! conversation with the `read` tool only, under the parent's approvals, and answers; its
//! transcript is a `.chat` file beside the parent's. Offline: a scripted model plays both.
//!
//! ```text
//! cargo run --example subagents
//! ```
#![allow(clippy::print_stdout, reason = "an example talks to its user")]

use std::sync::Arc;

use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::agents::{AgentDefinition, Agents, Subagents};
use flemma::runtime::register_builtins;
use flemma::runtime::{FileConversation, Session, SessionEvent, Stop, ToolRegistry};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    // A project of its own, in a temporary directory removed when `dir` is dropped (however
    // `main` returns): a file to review and the conversation.
    let dir = tempfile::Builder::new()
        .prefix("flemma-subagents-")
        .tempdir()?;
    let project = dir.path();
    std::fs::create_dir_all(project.join(".git"))?;
    std::fs::write(
        project.join("change.txt"),
        "fn add(a: i32, b: i32) -> i32 { a - b }\n",
    )?;
    let chat_path = project.join("notes.chat");
    std::fs::write(&chat_path, "@You:\nHave change.txt reviewed.\n")?;

    // The agents: in code here; a project's `.flemma/agents/*.md` or `.claude/agents/*.md`
    // files give them too (`Agents::load_project`).
    let mut agents = Agents::new();
    agents.register(
        AgentDefinition::new(
            "reviewer",
            "Reviews a file for bugs; read-only.",
            "You review code. Name each bug with its line.",
        )?
        .with_tools(["read"])?
        .with_max_turns(10)?,
    );
    let subagents = Subagents::new(agents);
    let tools = ToolRegistry::new();
    register_builtins(&tools)?;
    tools.register(subagents.tool()?);

    // One scripted model for the parent and the child, in the order they ask.
    let model = Arc::new(ScriptedProvider::new([
        Turn::tool_use(
            "agent",
            json!({"agent": "reviewer", "prompt": "Review change.txt for bugs."}),
        ),
        Turn::tool_use("read", json!({"path": "change.txt"})),
        Turn::text("Line 1: `add` subtracts."),
        Turn::text("The reviewer found one bug: `add` subtracts."),
    ]));
    let mut config = flemma::config::Config::new();
    // The parent approves `agent` calls; `read` is approved by the default `$standard`.
    config.set(
        flemma::config::Layer::Setup,
        "tools.auto_approve",
        json!(["$standard", "agent"]),
    )?;
    let chat = Arc::new(FileConversation::new(&chat_path));
    let session = Session::builder(chat, tools, model)
        .executor(|e| e.config(config))
        .subagents(subagents)
        .build();
    let mut events = session.subscribe();
    let stop = session.run().await?;

    let mut from_child = 0;
    while let Some(event) = events.try_recv() {
        if let SessionEvent::Subagent { agent, event, .. } = event
            && let SessionEvent::ToolCall { name, .. } = *event
        {
            println!("[{agent}] asked for {name}");
            from_child += 1;
        }
    }
    let text = std::fs::read_to_string(&chat_path)?;
    println!("{text}");
    anyhow::ensure!(stop == Stop::Finished, "the run stopped with {stop:?}");
    anyhow::ensure!(from_child == 1, "{from_child} calls seen from the child");
    let child_path = text
        .lines()
        .find_map(|l| l.strip_prefix("Subagent transcript: "))
        .ok_or_else(|| anyhow::anyhow!("no child transcript in:\n{text}"))?;
    let child = std::fs::read_to_string(child_path)?;
    anyhow::ensure!(
        child.contains("a - b"),
        "the child did not read the file:\n{child}"
    );
    println!("--- {child_path}\n{child}");
    Ok(())
}
