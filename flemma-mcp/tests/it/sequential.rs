//! `@modelcontextprotocol/server-sequential-thinking` (pinned in `tests/mcp/package.json`),
//! whose only tool's input schema points into itself (`{"$ref":
//! "#/properties/nextThoughtNeeded"}`) when the server runs on zod 3: the SDK then converts
//! schemas with zod-to-json-schema, which writes a schema used twice as a `$ref` to its first
//! place. The server resolves `zod` from wherever it is installed (it does not declare it), so
//! the test gives it zod 3 (`zod3`, pinned next to it) through a Node resolve hook, as an
//! installation with zod 3 hoisted would.

use std::path::PathBuf;
use std::time::Duration;

use flemma_core::ToolOutput;
use flemma_mcp::McpServerConfig;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::scratch::Scratch;
use crate::support::{call, registry_with, scratch};

fn server_js() -> PathBuf {
    let js = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "../tests/mcp/node_modules/@modelcontextprotocol/server-sequential-thinking/dist/index.js",
    );
    assert!(
        js.exists(),
        "{} is missing: run scripts/test (or `npm ci` in tests/mcp) to install the MCP test servers",
        js.display()
    );
    js
}

/// The server as `thinking`, on zod 3, and the directory of its loader hooks (to keep until
/// the server is gone).
fn on_zod3() -> (Scratch, McpServerConfig) {
    let dir = scratch("sequential-zod3");
    std::fs::write(
        dir.join("hooks.mjs"),
        r#"export async function resolve(specifier, context, next) {
  if ((specifier === "zod" || specifier.startsWith("zod/"))
      && context.parentURL && context.parentURL.includes("/server-sequential-thinking/")) {
    return next("zod3" + specifier.slice(3), context);
  }
  return next(specifier, context);
}
"#,
    )
    .unwrap();
    let register = dir.join("register.mjs");
    std::fs::write(
        &register,
        "import { register } from \"node:module\";\nregister(\"./hooks.mjs\", import.meta.url);\n",
    )
    .unwrap();
    let server = McpServerConfig::stdio("thinking", "node")
        .unwrap()
        .with_args([
            "--import".to_owned(),
            register.to_string_lossy().into_owned(),
            server_js().to_string_lossy().into_owned(),
        ])
        .with_startup_timeout(Duration::from_secs(30));
    (dir, server)
}

#[tokio::test]
async fn a_schema_pointing_into_itself_is_resolved_and_the_tool_offered() {
    let (_dir, server) = on_zod3();
    let (registry, _) = registry_with(vec![server]).await;
    assert_eq!(registry.take_warnings(), []);
    let tool = registry.get("thinking.sequentialthinking").unwrap();
    let schema = tool.definition().spec().input_schema.clone();
    // The `$ref`s are resolved: `isRevision` is `nextThoughtNeeded`'s type with its own
    // description, `needsMoreThoughts` likewise through `isRevision`.
    assert_eq!(
        (
            &schema["properties"]["isRevision"],
            &schema["properties"]["needsMoreThoughts"]
        ),
        (
            &json!({"type": ["boolean", "string"], "description": "Whether this revises previous thinking"}),
            &json!({"type": ["boolean", "string"], "description": "If more thoughts are needed"})
        )
    );
    let out = call(
        &registry,
        "thinking.sequentialthinking",
        json!({"thought": "one", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1, "isRevision": false}),
    )
    .await;
    let ToolOutput::Success(flemma_core::Output::Text(text)) = out else {
        panic!("a text result expected: {out:?}");
    };
    let result: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(result["thoughtHistoryLength"], json!(1));
}
