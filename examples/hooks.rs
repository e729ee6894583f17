//! Hooks around a scripted model's tool calls: an in-process `PreToolUse` hook refuses
//! recursive deletes and rewrites another command, a command hook (a shell command given the
//! event as JSON, in Claude Code's contract) notes each result, and a `Stop` hook keeps the
//! session going once. Everything a hook changed is in the transcript printed at the end.
//!
//! ```text
//! cargo run --example hooks
//! ```
#![allow(clippy::print_stdout, reason = "an example talks to its user")]

use std::sync::Arc;

use flemma::core::hooks::HookEvent;
use flemma::core::hooks::{PreToolUseAnswer, StopAnswer, on};
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::hooks::HookRegistration;
use flemma::runtime::hooks::{CommandHook, hook_fn};
use flemma::runtime::{MemoryConversation, ToolRegistry};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let tools = ToolRegistry::new();
    flemma::runtime::register_builtins(&tools)?;

    // In process: deny `rm -rf`, make `ls` list hidden files too.
    let guard = hook_fn(on::PreToolUse, |call| {
        let command = call.input["command"].as_str().unwrap_or_default();
        if command.contains("rm -rf") {
            PreToolUseAnswer::deny("recursive deletes are not allowed in this project")
        } else if command == "ls" {
            let mut input = call.input.clone();
            input["command"] = json!("ls -a");
            PreToolUseAnswer::allow().with_input(input)
        } else {
            PreToolUseAnswer::pass()
        }
    });
    tools.register_hook(guard.named("guard")?.matcher("bash")?.priority(90))?;

    // A command hook: what a `[[hooks.PostToolUse]]` table of flemma.toml registers.
    let note = CommandHook::new(
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "logged to the audit trail"}}'"#,
    );
    tools.register_hook(HookRegistration::new(
        "audit",
        [HookEvent::PostToolUse],
        note,
    )?)?;

    // Keep going once when the model stops.
    let once = hook_fn(on::Stop, |stop| {
        if stop.stop_hook_active {
            StopAnswer::pass()
        } else {
            StopAnswer::continue_with("Say which files you saw before you stop.")
        }
    });
    tools.register_hook(once.named("summary")?)?;

    let model = Arc::new(ScriptedProvider::new([
        Turn::tool_use("bash", json!({"label": "clean", "command": "rm -rf build"}))
            .with_tool_use("bash", json!({"label": "list", "command": "ls"})),
        Turn::text("The build directory stays; listed the files."),
        Turn::text("I saw the project's files, hidden ones included."),
    ]));
    let chat = Arc::new(MemoryConversation::new(
        "@You:\nClean the build directory, then list the files.\n",
    ));
    let session = flemma::runtime::Session::builder(chat.clone(), tools, model).build();
    session.run().await?;
    session.end("exit").await;

    let text = chat.text();
    anyhow::ensure!(
        text.contains("The tool was denied by a policy. Hook `guard`: recursive deletes are not allowed in this project"),
        "{text}"
    );
    anyhow::ensure!(text.contains(r#""command":"ls -a""#), "{text}");
    anyhow::ensure!(
        text.contains("Hook `audit`: logged to the audit trail"),
        "{text}"
    );
    anyhow::ensure!(
        text.contains("Hook `summary`: Say which files you saw before you stop."),
        "{text}"
    );
    anyhow::ensure!(text.contains("hidden ones included"), "{text}");
    println!("{text}");
    Ok(())
}
