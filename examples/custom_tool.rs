//! Three ways to write a tool: the `Tool` trait, a closure (`tool_fn`), and a closure whose
//! input is a Rust type (`typed_tool_fn`, the schema derived with schemars).
//!
//! ```text
//! cargo run --example custom_tool
//! ```
#![allow(clippy::print_stdout, reason = "an example talks to its user")]

use std::sync::Arc;

use flemma::async_trait;
use flemma::core::{ExecutionContext, Tool, ToolDefinition, ToolOutput};
use flemma::core::{tool_fn, typed_tool_fn};
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::MemoryConversation;
use flemma::runtime::ToolRegistry;
use flemma::schema::dsl::{object, string};
use serde_json::{Value, json};

/// The trait form: a type that owns its definition.
struct WordCount(ToolDefinition);

#[async_trait]
impl Tool for WordCount {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    async fn execute(&self, input: Value, _ctx: &ExecutionContext) -> ToolOutput {
        match input["text"].as_str() {
            Some(text) => ToolOutput::text(text.split_whitespace().count().to_string()),
            None => ToolOutput::error("No text provided"),
        }
    }
}

/// Typed input: the schema (strict) comes from this type, and the closure gets it decoded.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    /// The first number
    a: f64,
    /// The second number
    b: f64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let tools = ToolRegistry::new();
    let text_input = || object([("text", string().describe("The text"))]);
    tools.register(WordCount(
        ToolDefinition::builder("word_count", "Count the words of a text.")?
            .input(text_input())
            .build()?,
    ));
    tools.register(tool_fn(
        ToolDefinition::builder("shout", "Repeat a text in capitals.")?
            .input(text_input())
            .build()?,
        |input, _ctx| ToolOutput::text(input["text"].as_str().unwrap_or_default().to_uppercase()),
    ));
    tools.register(typed_tool_fn(
        ToolDefinition::builder("add", "Add two numbers.")?,
        |input: Add, _ctx| async move { ToolOutput::text((input.a + input.b).to_string()) },
    )?);

    let model = Arc::new(ScriptedProvider::new([
        Turn::text("Using all three.")
            .with_tool_use("word_count", json!({"text": "one two three"}))
            .with_tool_use("shout", json!({"text": "hello"}))
            .with_tool_use("add", json!({"a": 2, "b": 40})),
        Turn::text("3 words, HELLO, and 42."),
    ]));
    let chat = Arc::new(MemoryConversation::new(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"+word_count\", \"+shout\", \"+add\"]}}}\n```\n\
         @You:\nCount, shout and add.\n",
    ));
    flemma::runtime::Session::builder(chat.clone(), tools, model)
        .build()
        .run()
        .await?;
    let text = chat.text();
    for result in ["```\n3\n```", "```\nHELLO\n```", "```\n42\n```"] {
        anyhow::ensure!(text.contains(result), "missing {result:?} in\n{text}");
    }
    println!("{text}");
    Ok(())
}
