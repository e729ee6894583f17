//! Spec §5.1-§5.6 against a registry: a conversation's tool set starts from every enabled
//! tool; misspelled names, globs matching nothing and unknown presets stop the cycle with
//! their transcript lines; a glob for tools still loading waits for its second pass.

use std::sync::Arc;
use std::time::Duration;

use flemma_config::{Config, ConfigError, Layer, Origin, Preset};
use flemma_core::{FnTool, ToolDefinition, ToolOutput, tool_fn};
use flemma_ids::Severity;
use flemma_runtime::transcript::TranscriptError;
use flemma_runtime::{
    Event, Executor, ExecutorError, MemoryConversation, Registrar, ToolRegistry, ToolSource,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::Notify;

use crate::chain;

fn tool(name: &str) -> FnTool {
    let def = ToolDefinition::builder(name, format!("The {name} tool.")).unwrap();
    tool_fn(def.build().unwrap(), |_, ctx| {
        ToolOutput::text(ctx.tool_name().to_string())
    })
}

/// Five enabled tools and one off by default.
fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    for name in ["bash", "grep", "read", "write", "edit"] {
        registry.register(tool(name));
    }
    let secret = ToolDefinition::builder("secret", "Off by default.")
        .unwrap()
        .enabled(false);
    registry.register(tool_fn(secret.build().unwrap(), |_, _| {
        ToolOutput::text("s")
    }));
    registry
}

/// The names of the tool set under `config` with a frontmatter applied.
fn tool_set(registry: &ToolRegistry, language: &str, code: &str) -> Vec<String> {
    let mut config = Config::new();
    config.apply_frontmatter(language, code, 2).unwrap();
    offered(registry, &mut config)
}

fn offered(registry: &ToolRegistry, config: &mut Config) -> Vec<String> {
    let evaluation = registry.evaluate(config).unwrap();
    evaluation.check().unwrap();
    registry
        .tool_set(&evaluation.options)
        .iter()
        .map(|t| t.definition().name().to_string())
        .collect()
}

const ALL: [&str; 5] = ["bash", "edit", "grep", "read", "write"];

fn all_but(name: &str) -> Vec<String> {
    ALL.iter()
        .filter(|n| **n != name)
        .map(|n| (*n).to_owned())
        .collect()
}

fn all_and(name: &str) -> Vec<String> {
    let mut names: Vec<String> = ALL.iter().map(|n| (*n).to_owned()).collect();
    names.push(name.to_owned());
    names.sort();
    names
}

#[test]
fn every_list_operation_starts_from_the_enabled_tools() {
    let registry = registry();
    assert_eq!(tool_set(&registry, "json", "{}"), all_but(""));
    for (language, code, expected) in [
        (
            "lua",
            "flemma.opt.tools:remove(\"write\")",
            all_but("write"),
        ),
        (
            "lua",
            "flemma.opt.tools = flemma.opt.tools - \"write\"",
            all_but("write"),
        ),
        ("lua", "flemma.opt.tools:append(\"grep\")", all_but("")),
        (
            "lua",
            "flemma.opt.tools = flemma.opt.tools + \"read\"",
            all_but(""),
        ),
        (
            "lua",
            "flemma.opt.tools:append(\"secret\")",
            all_and("secret"),
        ),
        (
            "lua",
            "flemma.opt.tools:prepend(\"secret\")",
            all_and("secret"),
        ),
        (
            "json",
            r#"{"flemma": {"tools": ["!write"]}}"#,
            all_but("write"),
        ),
        (
            "json",
            r#"{"flemma": {"tools": ["+secret"]}}"#,
            all_and("secret"),
        ),
        (
            "lua",
            "flemma.opt.tools = {\"bash\", \"secret\"}",
            vec!["bash".to_owned(), "secret".to_owned()],
        ),
        ("lua", "flemma.opt.tools = {}", Vec::new()),
        (
            "lua",
            "flemma.opt.tools:remove(\"*e*\")",
            vec!["bash".to_owned()],
        ),
        ("lua", "flemma.opt.tools:append(\"se*\")", all_and("secret")),
    ] {
        assert_eq!(tool_set(&registry, language, code), expected, "{code}");
    }
}

#[test]
fn a_runtime_set_starts_from_the_enabled_tools_too() {
    // `flemma --set 'tools=["!write"]'`
    let registry = registry();
    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools", json!(["!write"]))
        .unwrap();
    assert_eq!(offered(&registry, &mut config), all_but("write"));
    // The frontmatter goes on from there.
    config
        .apply_frontmatter("lua", "flemma.opt.tools:append(\"secret\")", 2)
        .unwrap();
    let mut expected = all_but("write");
    expected.push("secret".to_owned());
    expected.sort();
    assert_eq!(offered(&registry, &mut config), expected);
}

#[test]
fn the_defaults_follow_enabled_predicates_and_new_registrations() {
    let registry = registry();
    let gated = ToolDefinition::builder("gated", "On when max_concurrent is 1.")
        .unwrap()
        .enabled_when(|options| options.tools.max_concurrent == 1);
    registry.register(tool_fn(gated.build().unwrap(), |_, _| {
        ToolOutput::text("g")
    }));
    let mut config = Config::new();
    config
        .apply_frontmatter(
            "lua",
            "flemma.opt.tools.max_concurrent = 1\nflemma.opt.tools:remove(\"bash\")",
            2,
        )
        .unwrap();
    let mut expected = all_but("bash");
    expected.push("gated".to_owned());
    expected.sort();
    assert_eq!(offered(&registry, &mut config), expected);
    // A tool registered later is in the next evaluation's defaults.
    registry.register(tool("ls"));
    expected.push("ls".to_owned());
    expected.sort();
    assert_eq!(offered(&registry, &mut config), expected);
}

fn errors(registry: &ToolRegistry, code: &str) -> Vec<String> {
    let mut config = Config::new();
    config.apply_frontmatter("lua", code, 2).unwrap();
    match registry.evaluate(&mut config).unwrap().check() {
        Err(ConfigError::Finalize { errors }) => errors.iter().map(ToString::to_string).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn misspelled_names_are_errors_with_a_suggestion_when_one_is_close() {
    let registry = registry();
    assert_eq!(
        errors(
            &registry,
            "flemma.opt.tools = {\"bash\", \"reed\"}\nflemma.opt.tools:append(\"calculator\")"
        ),
        [
            "line 2: Unknown tool 'reed' -- did you mean 'read'?",
            "line 3: Unknown tool 'calculator'",
        ]
    );
    // A removal is checked too: a typo there is not a silent no-op.
    assert_eq!(
        errors(&registry, "\n\nflemma.opt.tools:remove(\"wirte\")"),
        ["line 4: Unknown tool 'wirte' -- did you mean 'write'?"]
    );
    assert_eq!(
        errors(&registry, "flemma.opt.tools = {\"nomatch.*\"}"),
        ["line 2: Glob pattern 'nomatch.*' matched no tools"]
    );
    assert_eq!(
        errors(&registry, "flemma.opt.tools = {\"$nope\", \"bash\"}"),
        ["line 2: Unknown preset '$nope' in tools"]
    );
}

#[test]
fn warnings_do_not_stop_the_evaluation() {
    let registry = registry();
    let mut config = Config::new();
    config
        .presets_mut()
        .insert(
            "$ci",
            Preset {
                auto_approve: Some(vec!["bash".into(), "deploy".into()]),
                ..Preset::default()
            },
        )
        .unwrap();
    config
        .apply_frontmatter(
            "lua",
            "flemma.opt.tools.auto_approve = {\"$ci\", \"$redonly\"}",
            2,
        )
        .unwrap();
    let evaluation = registry.evaluate(&mut config).unwrap();
    assert!(evaluation.check().is_ok());
    let warnings: Vec<String> = evaluation.warnings().map(ToString::to_string).collect();
    assert_eq!(
        warnings,
        [
            "line 2: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?",
            "Preset '$ci' references unknown tool 'deploy' in auto_approve",
        ]
    );
    assert!(evaluation.errors().next().is_none());
}

/// A source whose tools arrive when the test says so.
struct Gate {
    open: Arc<Notify>,
}

#[async_trait::async_trait]
impl ToolSource for Gate {
    fn name(&self) -> &'static str {
        "slack"
    }

    async fn resolve(
        &self,
        registrar: Registrar,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.open.notified().await;
        registrar.register(tool("slack.post"));
        registrar.register(tool("slack.read"));
        Ok(())
    }
}

#[tokio::test]
async fn a_glob_for_tools_still_loading_is_kept_then_expanded_and_checked_at_finalize() {
    let registry = registry();
    let open = Arc::new(Notify::new());
    registry
        .add_source(
            Gate {
                open: Arc::clone(&open),
            },
            Duration::from_secs(60),
        )
        .unwrap();
    let frontmatter = "flemma.opt.tools:append(\"slack.*\")\nflemma.opt.tools:append(\"jira.*\")";
    let mut config = Config::new();
    config.apply_frontmatter("lua", frontmatter, 2).unwrap();

    // First pass: the registry is loading; the globs are kept as written, nothing is
    // checked, and no tool answers them yet.
    let early = registry.evaluate(&mut config).unwrap();
    assert!(!early.checked);
    assert!(early.diagnostics.is_empty());
    let mut kept = all_but("");
    kept.extend(["slack.*".to_owned(), "jira.*".to_owned()]);
    assert_eq!(early.options.tools.list, kept);

    // Second pass, once the source is done: `slack.*` expands, `jira.*` is an error.
    open.notify_one();
    registry.ready().await;
    let late = registry.evaluate(&mut config).unwrap();
    assert!(late.checked);
    let mut expanded = all_but("");
    expanded.extend([
        "slack.post".to_owned(),
        "slack.read".to_owned(),
        "jira.*".to_owned(),
    ]);
    assert_eq!(late.options.tools.list, expanded);
    let Err(ConfigError::Finalize { errors }) = late.check() else {
        panic!("{late:?}")
    };
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].origin, Some(Origin::Frontmatter { line: 3 }));
    assert_eq!(errors[0].severity(), Severity::Error);
    assert_eq!(
        errors[0].to_string(),
        "line 3: Glob pattern 'jira.*' matched no tools"
    );
}

#[tokio::test]
async fn a_cycle_waits_for_the_source_then_offers_the_expanded_glob() {
    let registry = registry();
    let open = Arc::new(Notify::new());
    registry
        .add_source(
            Gate {
                open: Arc::clone(&open),
            },
            Duration::from_secs(60),
        )
        .unwrap();
    let text = "```lua\nflemma.opt.tools = {\"slack.*\"}\nflemma.opt.tools.auto_approve = {\"slack.*\"}\n```\n\
                @Assistant:\n**Tool Use:** `slack.post` (`toolu_01`)\n```json\n{}\n```\n";
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry.clone()).build();
    let before = executor.evaluate_options().await.unwrap();
    assert!(!before.checked);
    let cycle = tokio::spawn(async move { executor.cycle().await });
    open.notify_one();
    let report = cycle.await.unwrap().unwrap();
    assert_eq!(report.completed.len(), 1, "{}", conversation.text());
    assert!(
        conversation
            .text()
            .contains("**Tool Result:** `toolu_01`\n```\nslack.post\n```"),
        "{}",
        conversation.text()
    );
}

#[tokio::test]
async fn a_cycle_stops_on_a_misspelled_tool_and_writes_nothing() {
    let text = "```lua\nflemma.opt.tools = {\"bash\", \"reed\"}\n```\n\
                @Assistant:\n**Tool Use:** `bash` (`toolu_01`)\n```json\n{}\n```\n";
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry()).build();
    let error = executor.cycle().await.unwrap_err();
    let ExecutorError::Transcript(TranscriptError::Config(ConfigError::Finalize { errors })) =
        &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(errors[0].frontmatter_line(), Some(2));
    assert_eq!(
        chain(&error),
        "the options do not resolve: line 2: Unknown tool 'reed' -- did you mean 'read'?"
    );
    assert_eq!(conversation.text(), text);
    // The host sees the same before running anything.
    let evaluation = executor.evaluate_options().await.unwrap();
    assert_eq!(evaluation.errors().count(), 1);
}

#[tokio::test]
async fn a_cycle_emits_each_option_warning_once() {
    let text = "```lua\nflemma.opt.tools.auto_approve = {\"$redonly\"}\n```\n@You:\nhi\n";
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry()).build();
    let mut events = executor.subscribe();
    executor.cycle().await.unwrap();
    executor.cycle().await.unwrap();
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(text) = event {
            warnings.push(text);
        }
    }
    assert_eq!(
        warnings,
        ["line 2: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?"]
    );
}

/// A tool that counts its runs, available unless the options narrow the server `srv`.
fn narrowed_tool(runs: Arc<std::sync::atomic::AtomicUsize>) -> FnTool {
    let def = ToolDefinition::builder("srv.act", "Acts.")
        .unwrap()
        .available_when(|options| options.mcp.allows("srv", "act"));
    tool_fn(def.build().unwrap(), move |_, _| {
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ToolOutput::text("acted")
    })
}

#[tokio::test]
async fn an_unavailable_tool_is_never_offered_and_its_call_never_runs() {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let registry = registry();
    registry.register(narrowed_tool(Arc::clone(&runs)));
    // Offered by default and when the list names it, until a layer takes it away.
    assert!(tool_set(&registry, "json", "{}").contains(&"srv.act".to_owned()));
    let named =
        r#"{"flemma": {"tools": ["srv.act"], "mcp": {"servers": {"srv": {"enabled": false}}}}}"#;
    assert_eq!(tool_set(&registry, "json", named), Vec::<String>::new());
    let removed = r#"{"flemma": {"mcp": {"servers": {"srv": {"exclude": ["a*"]}}}}}"#;
    assert_eq!(tool_set(&registry, "json", removed), all_but(""));

    // Approved by the options, still refused: the executor answers without running it.
    let text = format!(
        "```json\n{}\n```\n@You:\nact\n\n@Assistant:\n**Tool Use:** `srv.act` (`toolu_01`)\n```json\n{{}}\n```\n",
        r#"{"flemma": {"tools": {"auto_approve": ["srv.act"]}, "mcp": {"servers": {"srv": {"enabled": false}}}}}"#
    );
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry).build();
    executor.cycle().await.unwrap();
    let after = conversation.text();
    assert!(
        after.contains("Tool 'srv.act' is not available in this conversation"),
        "{after}"
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0);
}
