//! Programmatic approval: calls that need a decision go to an `Approver` (a dialog, a chat
//! message to a reviewer, a rule) instead of waiting in the transcript.
//!
//! ```text
//! cargo run --example approver
//! ```
#![allow(clippy::print_stdout, reason = "an example talks to its user")]

use std::sync::Arc;

use flemma::async_trait;
use flemma::core::{Answer, Approver, PendingCall};
use flemma::core::{ToolDefinition, ToolOutput, tool_fn};
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::MemoryConversation;
use flemma::runtime::ToolRegistry;
use flemma::runtime::{Session, SessionEvent};
use serde_json::json;

/// Approves deployments to staging, rejects the rest with a reason the model reads (as
/// `User feedback: <reason>`).
struct Reviewer;

#[async_trait]
impl Approver for Reviewer {
    async fn ask(&self, call: &PendingCall) -> Answer {
        match call.input["target"].as_str() {
            Some("staging") => Answer::Approve,
            _ => Answer::Reject(Some("Production deploys need a change ticket.".into())),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let tools = ToolRegistry::new();
    tools.register(tool_fn(
        ToolDefinition::builder("deploy", "Deploy the current build.")?.build()?,
        |input, _ctx| ToolOutput::text(format!("deployed to {}", input["target"])),
    ));
    let model = Arc::new(ScriptedProvider::new([
        Turn::tool_use("deploy", json!({"target": "staging"}))
            .with_tool_use("deploy", json!({"target": "production"})),
        Turn::text("Staging is deployed; production needs a change ticket."),
    ]));
    // No `auto_approve`: both calls need approval, so both go to the reviewer.
    let chat = Arc::new(MemoryConversation::new(
        "@You:\nDeploy to staging and production.\n",
    ));
    let session = Session::builder(chat.clone(), tools, model)
        .executor(|e| e.approver(Arc::new(Reviewer)))
        .build();
    let mut events = session.subscribe();
    session.run().await?;
    let mut asked = 0;
    while let Some(event) = events.try_recv() {
        if let SessionEvent::Tool(flemma::runtime::Event::ApprovalAsked { preview, .. }) = event {
            println!("asked: {preview}");
            asked += 1;
        }
    }
    let text = chat.text();
    anyhow::ensure!(asked == 2, "the reviewer was asked {asked} times");
    anyhow::ensure!(text.contains("deployed to \"staging\""), "{text}");
    anyhow::ensure!(
        text.contains("(error)\n```\nUser feedback: Production deploys need a change ticket.\n```"),
        "{text}"
    );
    println!("{text}");
    Ok(())
}
