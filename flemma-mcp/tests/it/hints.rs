//! Tool annotations as hints, and the approval chain reading them: the real
//! `@modelcontextprotocol/server-filesystem` (its read tools `readOnlyHint: true`, `write_file`
//! and `edit_file` `destructiveHint: true`, `create_directory` neither) in a real
//! `Chain::with_builtins()` with [`register_hint_resolvers`]. The servers are trusted by the
//! host (`trusted = true`) unless a test says otherwise: an untrusted server's read-only hint
//! approves nothing.

use flemma_approval::{
    ApprovalContext, CONFIG_RESOLVER, Chain, Decision, Explanation, ToolCall, TraceResult,
};
use flemma_config::{Config, Layer};
use flemma_ids::ToolName;
use flemma_mcp::{
    MCP_DESTRUCTIVE_RESOLVER, MCP_READ_ONLY_RESOLVER, McpServerHandle, ToolHints,
    register_hint_resolvers,
};
use flemma_runtime::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::filesystem::{allowed, filesystem};
use crate::support::{call, eventually, python_server, registry_with};

/// The chain with the built-ins and the hint resolvers of `servers`.
fn chain(servers: &[McpServerHandle]) -> Chain {
    let mut chain = Chain::with_builtins();
    register_hint_resolvers(&mut chain, servers).unwrap();
    chain
}

/// How `chain` decides a call of `tool` in a conversation with `config`.
async fn explain(
    chain: &Chain,
    registry: &ToolRegistry,
    config: &Config,
    tool: &str,
) -> Explanation {
    let options = config.options().unwrap();
    let ctx = ApprovalContext::new(config, &options)
        .with_tools(registry)
        .with_sandbox(&false);
    let name = ToolName::new(tool).unwrap();
    let input = json!({});
    let call = ToolCall {
        name: &name,
        input: &input,
        id: None,
    };
    let explanation = chain.explain(&call, &ctx).await;
    // `decide` agrees with `explain`.
    let outcome = chain.decide(&call, &ctx).await;
    assert_eq!(outcome.decision, explanation.decision);
    assert_eq!(
        outcome.resolver.map(ToString::to_string),
        explanation.resolver
    );
    explanation
}

/// A configuration whose setup layer sets `path` to `value`.
fn with(path: &str, value: serde_json::Value) -> Config {
    let mut config = Config::new();
    config.set(Layer::Setup, path, value).unwrap();
    config
}

/// What the resolver `name` said in `explanation`.
fn said(explanation: &Explanation, name: &str) -> Option<(TraceResult, Option<String>)> {
    explanation
        .trace
        .iter()
        .find(|e| e.resolver.as_str() == name)
        .map(|e| (e.result, e.detail.clone()))
}

#[tokio::test]
async fn the_filesystem_servers_hints_are_kept_by_registered_name() {
    let (_dir, real) = allowed("hints-list");
    let (registry, handles) = registry_with(vec![filesystem(&real).with_trusted(true)]).await;
    let fs = &handles[0];
    let hints = fs.tool_hints();
    let names: Vec<&str> = hints.iter().map(|(n, _)| n.as_str()).collect();
    let registered = registry.names();
    let registered: Vec<&str> = registered.iter().map(ToolName::as_str).collect();
    assert_eq!(names, registered, "one entry per registered tool, sorted");

    let of = |tool: &str| fs.hints(&ToolName::new(tool).unwrap()).unwrap();
    for read_only in [
        "fs.read_text_file",
        "fs.list_directory",
        "fs.search_files",
        "fs.get_file_info",
    ] {
        assert!(
            of(read_only).is_read_only(),
            "{read_only}: {:?}",
            of(read_only)
        );
    }
    for destructive in ["fs.write_file", "fs.edit_file"] {
        assert!(
            of(destructive).is_destructive(),
            "{destructive}: {:?}",
            of(destructive)
        );
    }
    let create = of("fs.create_directory");
    assert_eq!(
        (create.read_only, create.destructive),
        (Some(false), Some(false))
    );
    assert!(
        of("fs.read_text_file")
            .describe()
            .contains("readOnlyHint: true")
    );
    assert!(
        of("fs.write_file")
            .describe()
            .contains("destructiveHint: true")
    );
    // Only the server's registered names: not its own names, not other tools.
    assert_eq!(fs.hints(&ToolName::new("read_text_file").unwrap()), None);
    assert_eq!(fs.hints(&ToolName::new("read").unwrap()), None);
}

/// Issue 34, item 7: a server's annotations are its own claims; unless the host trusts it,
/// its `readOnlyHint` approves nothing (a destructive hint still asks).
#[tokio::test]
async fn an_untrusted_servers_read_only_hint_approves_nothing() {
    let (_dir, real) = allowed("hints-untrusted");
    let (registry, handles) = registry_with(vec![filesystem(&real)]).await;
    let chain = chain(&handles);
    let explanation = explain(&chain, &registry, &Config::new(), "fs.read_text_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    let (result, detail) = said(&explanation, MCP_READ_ONLY_RESOLVER).unwrap();
    assert_eq!(result, TraceResult::Pass);
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d
                .starts_with("MCP server 'fs' is not trusted: its annotations are its own claims")),
        "{detail:?}"
    );
    let explanation = explain(&chain, &registry, &Config::new(), "fs.write_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_DESTRUCTIVE_RESOLVER)
    );
}

#[tokio::test]
async fn a_read_only_tool_is_approved_by_the_default_standard_preset() {
    let (_dir, real) = allowed("hints-standard");
    let (registry, handles) = registry_with(vec![filesystem(&real).with_trusted(true)]).await;
    let chain = chain(&handles);
    let explanation = explain(&chain, &registry, &Config::new(), "fs.read_text_file").await;
    assert_eq!(explanation.decision, Decision::Approve);
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_READ_ONLY_RESOLVER)
    );
    let (_, detail) = said(&explanation, MCP_READ_ONLY_RESOLVER).unwrap();
    let detail = detail.unwrap();
    assert!(
        detail.starts_with("MCP server 'fs' marks the tool read-only (readOnlyHint: true"),
        "{detail}"
    );
    assert!(
        detail.ends_with("and the conversation auto-approves the read-only built-ins ($readonly)"),
        "{detail}"
    );

    // `$readonly` alone does too.
    let config = with("tools.auto_approve", json!(["$readonly"]));
    let explanation = explain(&chain, &registry, &config, "fs.list_directory").await;
    assert_eq!(explanation.decision, Decision::Approve);
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_READ_ONLY_RESOLVER)
    );

    // Without the hint resolvers, the same call waits for approval.
    let builtins = Chain::with_builtins();
    let options = Config::new().options().unwrap();
    let config = Config::new();
    let ctx = ApprovalContext::new(&config, &options)
        .with_tools(&registry)
        .with_sandbox(&false);
    let name = ToolName::new("fs.read_text_file").unwrap();
    let input = json!({});
    let call = ToolCall {
        name: &name,
        input: &input,
        id: None,
    };
    assert_eq!(
        builtins.decide(&call, &ctx).await.decision,
        Decision::RequireApproval
    );
}

#[tokio::test]
async fn a_read_only_tool_waits_when_the_read_only_builtins_are_not_auto_approved() {
    let (_dir, real) = allowed("hints-bash");
    let (registry, handles) = registry_with(vec![filesystem(&real).with_trusted(true)]).await;
    let chain = chain(&handles);

    let mut config = Config::new();
    config
        .load_toml_str(
            "[tools]\nauto_approve = [\"bash\"]\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    let explanation = explain(&chain, &registry, &config, "fs.read_text_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(explanation.resolver, None);
    let (result, detail) = said(&explanation, MCP_READ_ONLY_RESOLVER).unwrap();
    assert_eq!(result, TraceResult::Pass);
    assert_eq!(
        detail.as_deref(),
        Some(
            "the conversation does not auto-approve the read-only built-ins (read, find, grep, ls not in tools.auto_approve)"
        )
    );

    // Part of them is not enough.
    let config = with("tools.auto_approve", json!(["read", "ls"]));
    let explanation = explain(&chain, &registry, &config, "fs.read_text_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert!(
        said(&explanation, MCP_READ_ONLY_RESOLVER)
            .unwrap()
            .1
            .unwrap()
            .contains("(find, grep not in tools.auto_approve)")
    );
}

#[tokio::test]
async fn a_read_only_tool_waits_when_the_frontmatter_takes_auto_approve_in_hand() {
    let (_dir, real) = allowed("hints-frontmatter");
    let (registry, handles) = registry_with(vec![filesystem(&real).with_trusted(true)]).await;
    let chain = chain(&handles);

    // The frontmatter removes the tool (the default list still has the read-only built-ins).
    let mut config = Config::new();
    config
        .remove(
            Layer::Frontmatter,
            "tools.auto_approve",
            "fs.read_text_file",
        )
        .unwrap();
    let explanation = explain(&chain, &registry, &config, "fs.read_text_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(
        said(&explanation, MCP_READ_ONLY_RESOLVER),
        Some((
            TraceResult::Pass,
            Some("the frontmatter removes the tool from tools.auto_approve".to_owned())
        ))
    );
    // Another read-only tool is still approved.
    let explanation = explain(&chain, &registry, &config, "fs.list_directory").await;
    assert_eq!(explanation.decision, Decision::Approve);

    // The frontmatter sets the list (to the default's own preset, even).
    let mut config = Config::new();
    config
        .set(
            Layer::Frontmatter,
            "tools.auto_approve",
            json!(["$standard"]),
        )
        .unwrap();
    let explanation = explain(&chain, &registry, &config, "fs.read_text_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(
        said(&explanation, MCP_READ_ONLY_RESOLVER),
        Some((
            TraceResult::Pass,
            Some("the frontmatter sets tools.auto_approve".to_owned())
        ))
    );
}

#[tokio::test]
async fn a_destructive_tool_is_approved_only_by_its_exact_name() {
    let (_dir, real) = allowed("hints-destructive");
    let (registry, handles) = registry_with(vec![filesystem(&real).with_trusted(true)]).await;
    let chain = chain(&handles);
    let asks =
        "MCP server 'fs' marks the tool destructive (readOnlyHint: false, destructiveHint: true";

    // The default: waits, and the destructive resolver says why.
    let explanation = explain(&chain, &registry, &Config::new(), "fs.write_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_DESTRUCTIVE_RESOLVER)
    );

    // A glob matching it does not approve it (the config resolver is never asked).
    let config = with("tools.auto_approve", json!(["fs.*"]));
    let explanation = explain(&chain, &registry, &config, "fs.write_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_DESTRUCTIVE_RESOLVER)
    );
    let detail = said(&explanation, MCP_DESTRUCTIVE_RESOLVER)
        .unwrap()
        .1
        .unwrap();
    assert!(detail.starts_with(asks), "{detail}");
    assert!(
        detail.ends_with(": only an auto_approve entry naming 'fs.write_file' exactly approves it"),
        "{detail}"
    );
    // The config resolver after it approves through the glob; the ask decided first.
    assert_eq!(
        said(&explanation, CONFIG_RESOLVER).map(|(result, _)| result),
        Some(TraceResult::Approve)
    );
    // Nor does `*`, nor the same glob for edit_file.
    let config = with("tools.auto_approve", json!(["*"]));
    let explanation = explain(&chain, &registry, &config, "fs.edit_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);

    // Nor does `tools.require_approval = false`.
    let config = with("tools.require_approval", json!(false));
    let explanation = explain(&chain, &registry, &config, "fs.write_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_DESTRUCTIVE_RESOLVER)
    );

    // Its exact name does: the destructive resolver passes, the config resolver approves.
    let config = with("tools.auto_approve", json!(["fs.write_file"]));
    let explanation = explain(&chain, &registry, &config, "fs.write_file").await;
    assert_eq!(explanation.decision, Decision::Approve);
    assert_eq!(explanation.resolver.as_deref(), Some(CONFIG_RESOLVER));
    assert_eq!(
        said(&explanation, MCP_DESTRUCTIVE_RESOLVER).unwrap().0,
        TraceResult::Pass
    );
    // It names that tool only.
    let explanation = explain(&chain, &registry, &config, "fs.edit_file").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
}

#[tokio::test]
async fn a_tool_with_neither_hint_follows_the_ordinary_rules() {
    let (_dir, real) = allowed("hints-ordinary");
    let (registry, handles) = registry_with(vec![filesystem(&real).with_trusted(true)]).await;
    let chain = chain(&handles);

    // The default ($standard) does not name it: it waits, no resolver deciding.
    let explanation = explain(&chain, &registry, &Config::new(), "fs.create_directory").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(explanation.resolver, None);
    let (result, detail) = said(&explanation, MCP_READ_ONLY_RESOLVER).unwrap();
    assert_eq!(result, TraceResult::Pass);
    assert_eq!(
        detail.as_deref(),
        Some(
            "MCP server 'fs' does not mark the tool read-only (readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false)"
        )
    );

    // A glob approves it, through the config resolver.
    let config = with("tools.auto_approve", json!(["fs.*"]));
    let explanation = explain(&chain, &registry, &config, "fs.create_directory").await;
    assert_eq!(explanation.decision, Decision::Approve);
    assert_eq!(explanation.resolver.as_deref(), Some(CONFIG_RESOLVER));

    // Tools of other sources: both resolvers pass without a word (`bash` is not
    // auto-approved by default, so every resolver is consulted).
    let explanation = explain(&chain, &registry, &Config::new(), "bash").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    for resolver in [MCP_READ_ONLY_RESOLVER, MCP_DESTRUCTIVE_RESOLVER] {
        assert_eq!(
            said(&explanation, resolver),
            Some((TraceResult::Pass, None)),
            "{resolver}"
        );
    }
}

#[tokio::test]
async fn the_hints_follow_a_relisting() {
    let (registry, handles) = registry_with(vec![
        python_server("changing", "changing", &[]).with_trusted(true),
    ])
    .await;
    let changing = &handles[0];
    let chain = chain(&handles);
    let stable = ToolName::new("changing.stable").unwrap();
    let alpha = ToolName::new("changing.alpha").unwrap();
    let beta = ToolName::new("changing.beta").unwrap();
    let hints = changing.hints(&stable).unwrap();
    assert!(hints.is_read_only(), "{hints:?}");
    assert_eq!(changing.hints(&alpha), Some(ToolHints::default()));
    assert_eq!(changing.hints(&beta), None);
    let explanation = explain(&chain, &registry, &Config::new(), "changing.stable").await;
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_READ_ONLY_RESOLVER)
    );

    call(&registry, "changing.change", json!({})).await;
    eventually("the new list registered", || {
        registry.contains("changing.beta")
    })
    .await;
    let hints = changing.hints(&stable).unwrap();
    assert!(hints.is_destructive(), "{hints:?}");
    assert_eq!(changing.hints(&alpha), None, "a removed tool has no hints");
    assert_eq!(changing.hints(&beta), Some(ToolHints::default()));
    let names: Vec<String> = changing
        .tool_hints()
        .into_iter()
        .map(|(name, _)| name.to_string())
        .collect();
    assert_eq!(
        names,
        ["changing.beta", "changing.change", "changing.stable"]
    );
    let config = with("tools.auto_approve", json!(["changing.*"]));
    let explanation = explain(&chain, &registry, &config, "changing.stable").await;
    assert_eq!(explanation.decision, Decision::RequireApproval);
    assert_eq!(
        explanation.resolver.as_deref(),
        Some(MCP_DESTRUCTIVE_RESOLVER)
    );
}
