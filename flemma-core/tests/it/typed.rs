//! A typed tool: schema from the Rust type, input decoded, bad input answered with the
//! schema's validation message.

use flemma_core::{ExecutionContext, Tool, ToolDefinition, ToolOutput, typed_tool_fn};
use serde_json::json;

/// Adds two numbers.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    /// The first number
    a: f64,
    /// The second number
    b: f64,
    /// Round the sum
    round: Option<bool>,
}

#[tokio::test]
async fn typed_tools_decode_their_input_and_explain_bad_input() {
    let add = typed_tool_fn(
        ToolDefinition::builder("add", "Add two numbers.").unwrap(),
        |input: Add, _ctx| async move {
            let sum = input.a + input.b;
            ToolOutput::text(if input.round == Some(true) {
                sum.round().to_string()
            } else {
                sum.to_string()
            })
        },
    )
    .unwrap();
    let spec = add.definition().spec();
    assert!(spec.strict);
    assert_eq!(
        spec.input_schema["required"],
        json!(["a", "b", "round", "flemma.save_to"])
    );
    let ctx = ExecutionContext::builder("t1".parse().unwrap(), "add".parse().unwrap())
        .build()
        .unwrap();
    // `null` for an optional field means absent.
    let out = add
        .execute(json!({"a": 1.5, "b": 2, "round": null}), &ctx)
        .await;
    assert_eq!(out, ToolOutput::text("3.5"));
    let out = add
        .execute(json!({"a": 1.5, "b": 2, "round": true}), &ctx)
        .await;
    assert_eq!(out, ToolOutput::text("4"));
    let out = add
        .execute(json!({"a": "1", "b": 2, "round": null}), &ctx)
        .await;
    assert_eq!(
        out,
        ToolOutput::error("input.a: expected number, got string \"1\"")
    );
}
