//! Per-tool option tables: keyed by the full tool name (dots and all), read through
//! `Options::tool_options`, checked against the registered tools by `finalize`; unknown paths
//! are errors with a did-you-mean.

use flemma_config::{Config, ConfigError, FinalizeIssue, Layer};
use flemma_ids::ToolName;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::names;

fn name(s: &str) -> ToolName {
    ToolName::new(s).unwrap()
}

#[test]
fn a_dotted_tool_name_is_one_table_and_does_not_collide_with_its_prefix() {
    let mut config = Config::new();
    config
        .load_toml_str(
            "[tools.\"mcp.fs.read\"]\ncwd = \"/srv\"\n\n[tools.mcp]\ntimeout = 5\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    // The same table written as a path, a nested JSON table and a Lua index.
    config
        .set(Layer::Runtime, "tools.\"mcp.fs.read\".depth", 2)
        .unwrap();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"tools": {"mcp.fs.read": {"hidden": true}}}}"#,
            2,
        )
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(
        json!(options.tool_options(&name("mcp.fs.read"))),
        json!({"cwd": "/srv", "depth": 2, "hidden": true})
    );
    assert_eq!(
        json!(options.tool_options(&name("mcp"))),
        json!({"timeout": 5})
    );
    assert_eq!(options.tool_options(&name("mcp.fs")), None);
    assert_eq!(
        config.scalar("tools.\"mcp.fs.read\".cwd").unwrap(),
        json!("/srv")
    );
    assert_eq!(config.scalar("tools.mcp.timeout").unwrap(), json!(5));
    // A key of a table nobody set reads as null, not as an error: the tool may define it.
    assert_eq!(config.scalar("tools.mcp.retries").unwrap(), json!(null));
    // The serialized view keys the tables by full name too.
    let tools = serde_json::to_value(&options).unwrap()["tools"].clone();
    assert_eq!(tools["mcp.fs.read"]["cwd"], "/srv");
    assert_eq!(tools["mcp"], json!({"timeout": 5}));
}

#[cfg(feature = "lua")]
#[test]
fn lua_indexes_a_dotted_tool_table_by_its_full_name() {
    let mut config = Config::new();
    config
        .apply_frontmatter("lua", "flemma.opt.tools[\"mcp.fs.read\"].cwd = \"/srv\"", 2)
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(
        json!(options.tool_options(&name("mcp.fs.read"))),
        json!({"cwd": "/srv"})
    );
    assert_eq!(options.tool_options(&name("mcp")), None);
}

#[test]
fn unknown_paths_are_errors_with_a_did_you_mean() {
    let config = Config::new();
    let unknown = |path: &str| match config.scalar(path) {
        Err(ConfigError::UnknownOption { path, suggestion }) => (path, suggestion),
        other => panic!("{path}: expected UnknownOption, got {other:?}"),
    };
    assert_eq!(
        unknown("tools.max_concurent"),
        (
            "tools.max_concurent".to_owned(),
            Some("tools.max_concurrent".to_owned())
        )
    );
    assert_eq!(
        unknown("sandbox.policy.netwrk"),
        (
            "sandbox.policy.netwrk".to_owned(),
            Some("sandbox.policy.network".to_owned())
        )
    );
    // Names of `tools.*` options and typed built-in tables are not tool tables.
    assert_eq!(
        unknown("tools.bash.shel").1.as_deref(),
        Some("tools.bash.shell")
    );
    assert_eq!(
        unknown("tools.autopilot.max_turn").1.as_deref(),
        Some("tools.autopilot.max_turns")
    );
    assert_eq!(
        unknown("tools.max_concurrent.x").1.as_deref(),
        Some("tools.max_concurrent")
    );
    // Not a tool name, or not a path at all.
    for path in [
        "tools.my tool.x",
        "tools.a__b.x",
        "tools..x",
        "tools.\"mcp.x",
        "",
    ] {
        unknown(path);
    }
    let mut config = Config::new();
    assert!(config.set(Layer::Setup, "tools.bash.shel", "zsh").is_err());
    assert!(config.layer_scalar(Layer::Setup, "tools.bsh").is_err());
}

#[test]
fn finalize_reports_tables_of_unregistered_tools() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools.calculatr.precision", 3)
        .unwrap();
    config
        .set(Layer::Frontmatter, "tools.\"mcp.fs.read\".cwd", "/srv")
        .unwrap();
    config
        .set(Layer::Frontmatter, "tools.calculatr.base", 10)
        .unwrap();
    let issues = config.finalize(&names(&["bash", "calculator", "mcp.fs.read"]));
    assert_eq!(
        issues,
        [FinalizeIssue::UnknownToolOptions {
            tool: "calculatr".into(),
            suggestion: Some("calculator".into()),
        }]
    );
    assert_eq!(
        issues[0].to_string(),
        "Options for unknown tool 'calculatr' in tools.calculatr -- did you mean 'calculator'?"
    );
}
