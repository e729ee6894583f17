//! An approval resolver that awaits a policy: here a (simulated) remote service that allows
//! reading anything but `.env` files and writing only under `notes/`. Registered on the
//! registry's approval chain in the host's band (`priority::HOST`), it decides before the
//! built-in resolvers and no conversation's frontmatter comes before it; its reason for a
//! denial reaches the model after the spec's `The tool was denied by a policy.`
//!
//! ```text
//! cargo run --example custom_resolver
//! ```
#![allow(clippy::print_stdout, reason = "an example talks to its user")]

use std::sync::Arc;
use std::time::Duration;

use flemma::approval::{ResolverError, ToolCall, Verdict, async_resolver_fn, priority};
use flemma::core::{ToolDefinition, ToolOutput, tool_fn};
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::{MemoryConversation, ToolRegistry};
use serde_json::json;

/// The policy service: an answer after a network round trip.
async fn ask_policy(tool: &str, path: &str) -> Result<bool, ResolverError> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    Ok(match tool {
        "read_file" => std::path::Path::new(path).file_name() != Some(".env".as_ref()),
        "write_file" => path.starts_with("notes/"),
        _ => false,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let tools = ToolRegistry::new();
    for name in ["read_file", "write_file"] {
        tools.register(tool_fn(
            ToolDefinition::builder(name, "A pretend file tool.")?.build()?,
            move |input, _ctx| ToolOutput::text(format!("{name} {} done", input["path"])),
        ));
    }
    tools.update_approval_chain(|chain| {
        let policy = async_resolver_fn(|call: &ToolCall<'_>, _ctx| {
            Box::pin(async move {
                let path = call.input["path"].as_str().unwrap_or_default();
                Ok(if ask_policy(call.name.as_str(), path).await? {
                    Verdict::approve()
                } else {
                    Verdict::deny(Some(format!("policy: no {} on {path}", call.name)))
                })
            })
        });
        chain
            .register("policy-service", priority::HOST, policy)
            .map(|_| ())
    })?;

    let model = Arc::new(ScriptedProvider::new([
        Turn::tool_use("read_file", json!({"path": "README.md"}))
            .with_tool_use("read_file", json!({"path": ".env"}))
            .with_tool_use("write_file", json!({"path": "notes/todo.md"})),
        Turn::text("Read the README and wrote the note; the .env file is off limits."),
    ]));
    let chat = Arc::new(MemoryConversation::new(
        "@You:\nRead README.md and .env, then write notes/todo.md.\n",
    ));
    flemma::runtime::Session::builder(chat.clone(), tools, model)
        .build()
        .run()
        .await?;
    let text = chat.text();
    anyhow::ensure!(text.contains("read_file \"README.md\" done"), "{text}");
    anyhow::ensure!(text.contains("write_file \"notes/todo.md\" done"), "{text}");
    anyhow::ensure!(
        text.contains(
            "(error)\n```\nThe tool was denied by a policy. policy: no read_file on .env\n```"
        ),
        "{text}"
    );
    println!("{text}");
    Ok(())
}
