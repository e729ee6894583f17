//! A conversation narrows a configured server (`mcp.servers.<name>` in its frontmatter) and
//! cannot define one: the real `@modelcontextprotocol/server-filesystem` behind an executor.
//! A tool taken away is not offered, even when the `tools` list names it, and a call of it
//! never reaches the server (no file is written).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use flemma_config::{Config, Layer};
use flemma_core::ToolOutput;
use flemma_mcp::{McpServerHandle, register_hint_resolvers};
use flemma_runtime::{Executor, MemoryConversation, ToolRegistry};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::filesystem::{allowed, filesystem};
use crate::support::{python_server, registry_with, scratch};

/// A transcript with `frontmatter` whose assistant calls `fs.write_file` (writing
/// `dir/x.txt`) and `fs.list_directory` (of `dir`).
fn transcript(frontmatter: &str, dir: &Path) -> String {
    let file = dir.join("x.txt");
    let write = json!({"path": file, "content": "written"});
    let list = json!({"path": dir});
    format!(
        "```json\n{frontmatter}\n```\n@You:\nWrite, then list.\n\n@Assistant:\n\
         **Tool Use:** `fs.write_file` (`toolu_w`)\n```json\n{write}\n```\n\n\
         **Tool Use:** `fs.list_directory` (`toolu_l`)\n```json\n{list}\n```\n"
    )
}

/// The text of the result of `id` in `text` (up to the next block).
fn result<'t>(text: &'t str, id: &str) -> &'t str {
    let header = format!("**Tool Result:** `{id}`");
    let start = text
        .find(&header)
        .unwrap_or_else(|| panic!("no result for {id}:\n{text}"));
    let rest = &text[start + header.len()..];
    let end = rest.find("**Tool ").unwrap_or(rest.len());
    &rest[..end]
}

/// The text after one cycle of an executor over `registry` on [`transcript`]`(frontmatter, dir)`.
async fn cycled(registry: ToolRegistry, frontmatter: &str, dir: &Path) -> String {
    let conversation = Arc::new(MemoryConversation::new(transcript(frontmatter, dir)));
    let executor = Executor::builder(conversation.clone(), registry).build();
    executor.cycle().await.unwrap();
    conversation.text()
}

/// The filesystem server on `dir` with the resolvers of `handles` in its registry's chain.
async fn filesystem_with_resolvers(dir: &Path) -> (ToolRegistry, Vec<McpServerHandle>) {
    let (registry, handles) = registry_with(vec![filesystem(dir)]).await;
    registry
        .update_approval_chain(|chain| register_hint_resolvers(chain, &handles))
        .unwrap();
    (registry, handles)
}

/// The names a conversation with `frontmatter` is offered, sorted.
fn offered(registry: &ToolRegistry, frontmatter: &str) -> Vec<String> {
    let mut config = Config::new();
    config.apply_frontmatter("json", frontmatter, 2).unwrap();
    let options = registry.evaluate(&mut config).unwrap().options;
    registry
        .tool_set(&options)
        .iter()
        .map(|t| t.definition().name().to_string())
        .collect()
}

#[tokio::test]
async fn an_excluded_tool_is_not_offered_and_its_call_is_denied_before_it_reaches_the_server() {
    let (_dir, real) = allowed("narrow-exclude");
    std::fs::write(real.join("seen.txt"), "here").unwrap();
    let (registry, _handles) = filesystem_with_resolvers(&real).await;
    let frontmatter = r#"{"flemma": {"tools": {"auto_approve": ["fs.*", "fs.write_file"]}, "mcp": {"servers": {"fs": {"exclude": ["write_*", "edit_*"]}}}}}"#;
    let names = offered(&registry, frontmatter);
    assert!(names.contains(&"fs.list_directory".to_owned()), "{names:?}");
    assert!(names.contains(&"fs.read_text_file".to_owned()), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n == "fs.write_file" || n == "fs.edit_file"),
        "{names:?}"
    );
    assert!(
        registry.contains("fs.write_file"),
        "still registered: other conversations use it"
    );

    let text = cycled(registry, frontmatter, &real).await;
    // The narrowing resolver (120) denies before the destructive resolver (110) asks and
    // before `auto_approve` naming the tool exactly could approve it.
    assert!(
        result(&text, "toolu_w").contains("The tool was denied by a policy."),
        "{text}"
    );
    assert!(
        !real.join("x.txt").exists(),
        "the server wrote the file:\n{text}"
    );
    assert!(result(&text, "toolu_l").contains("seen.txt"), "{text}");
}

#[tokio::test]
async fn without_the_resolver_a_call_of_a_tool_taken_away_is_refused_by_the_executor() {
    let (_dir, real) = allowed("narrow-disabled");
    let (registry, _handles) = registry_with(vec![filesystem(&real)]).await;
    // The list names the tools, `auto_approve` approves them: the narrowing still wins.
    let frontmatter = r#"{"flemma": {"tools": {"list": ["fs.write_file", "fs.list_directory"], "auto_approve": ["fs.write_file", "fs.list_directory"]}, "mcp": {"servers": {"fs": {"enabled": false}}}}}"#;
    assert_eq!(offered(&registry, frontmatter), Vec::<String>::new());
    let text = cycled(registry, frontmatter, &real).await;
    for (id, tool) in [
        ("toolu_w", "fs.write_file"),
        ("toolu_l", "fs.list_directory"),
    ] {
        assert!(
            result(&text, id).contains(&format!(
                "Tool '{tool}' is not available in this conversation"
            )),
            "{text}"
        );
    }
    assert!(
        !real.join("x.txt").exists(),
        "the server wrote the file:\n{text}"
    );
}

#[tokio::test]
async fn include_keeps_only_the_matching_tools_and_the_others_run_as_before() {
    let (_dir, real) = allowed("narrow-include");
    std::fs::write(real.join("seen.txt"), "here").unwrap();
    let (registry, _handles) = filesystem_with_resolvers(&real).await;
    let frontmatter = r#"{"flemma": {"tools": {"auto_approve": ["fs.*"]}, "mcp": {"servers": {"fs": {"include": ["list_*"]}}}}}"#;
    let names = offered(&registry, frontmatter);
    assert!(!names.is_empty());
    assert!(names.iter().all(|n| n.starts_with("fs.list_")), "{names:?}");
    let text = cycled(registry, frontmatter, &real).await;
    assert!(
        result(&text, "toolu_w").contains("The tool was denied by a policy."),
        "{text}"
    );
    assert!(result(&text, "toolu_l").contains("seen.txt"), "{text}");
    assert!(!real.join("x.txt").exists());
}

#[tokio::test]
async fn a_frontmatter_defining_a_server_stops_the_cycle_before_anything_runs() {
    let (_dir, real) = allowed("narrow-define");
    let (registry, _handles) = filesystem_with_resolvers(&real).await;
    let marker = real.join("started");
    let frontmatter = format!(
        r#"{{"flemma": {{"tools": {{"auto_approve": ["fs.*"]}}, "mcp": {{"servers": {{"evil": {{"command": "touch", "args": ["{}"]}}}}}}}}}}"#,
        marker.display()
    );
    let conversation = Arc::new(MemoryConversation::new(transcript(&frontmatter, &real)));
    let executor = Executor::builder(conversation.clone(), registry).build();
    let error = executor.cycle().await.unwrap_err();
    let text = crate::support::chain(&error);
    assert!(text.contains("cannot define an MCP server"), "{text}");
    assert!(!marker.exists(), "a process was started");
    assert!(!conversation.text().contains("**Tool Result:**"));
}

#[tokio::test]
async fn a_narrowed_server_the_options_files_do_not_configure_stops_the_cycle() {
    let (_dir, real) = allowed("narrow-unknown");
    let (registry, _handles) = filesystem_with_resolvers(&real).await;
    let mut config = Config::new();
    config
        .load_toml_str(
            &format!(
                "[mcp.servers.fs]\ncommand = \"mcp-server-filesystem\"\nargs = [{:?}]\n",
                real.display().to_string()
            ),
            "flemma.toml".as_ref(),
        )
        .unwrap();
    let frontmatter = r#"{"flemma": {"tools": {"auto_approve": ["fs.*"]}, "mcp": {"servers": {"fss": {"enabled": false}}}}}"#;
    let conversation = Arc::new(MemoryConversation::new(transcript(frontmatter, &real)));
    let executor = Executor::builder(conversation.clone(), registry)
        .config(config)
        .build();
    let error = executor.cycle().await.unwrap_err();
    let text = crate::support::chain(&error);
    assert!(text.contains("Unknown MCP server 'fss'"), "{text}");
    assert!(text.contains("did you mean 'fs'?"), "{text}");
    assert!(!real.join("x.txt").exists());
}

#[tokio::test]
async fn a_conversation_shortens_the_tool_timeout_and_cannot_lengthen_it() {
    let dir = scratch("narrow-timeout");
    let record = dir.join("cancelled.jsonl");
    let server = python_server("rec", "recorder", &[&record.to_string_lossy()])
        .with_tool_timeout(Duration::from_millis(1500));
    let (registry, _) = registry_with(vec![server]).await;
    let tool = registry.get("rec.slow").unwrap();
    for (narrowed, expected) in [(0.5, "0.5s"), (60.0, "1.5s")] {
        let mut config = Config::new();
        config
            .set(Layer::Frontmatter, "mcp.servers.rec.tool_timeout", narrowed)
            .unwrap();
        let ctx = flemma_core::ExecutionContext::builder(
            flemma_ids::ToolUseId::new("toolu_01").unwrap(),
            flemma_ids::ToolName::new("rec.slow").unwrap(),
        )
        .options(Arc::new(config.options().unwrap()))
        .build()
        .unwrap();
        let out = tool.execute(json!({"seconds": 30}), &ctx).await;
        assert_eq!(
            out,
            ToolOutput::error(format!(
                "MCP tool 'slow' of server 'rec' timed out after {expected}"
            ))
        );
    }
}
