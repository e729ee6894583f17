//! Per-tool option tables: keyed by the full tool name (dots and all), read through
//! `Options::tool_options`, checked against the registered tools by `finalize`; unknown paths
//! are errors with a did-you-mean.

use flemma_config::{Config, ConfigError, FinalizeIssue, Layer};
use flemma_ids::{Severity, ToolName};
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

/// A name in `tools.auto_approve` that matches no tool approves nothing: a warning with the
/// name meant (the same typo in `tools` is an error), wherever it was written.
#[test]
fn an_auto_approve_name_that_matches_no_tool_is_a_warning_with_a_did_you_mean() {
    let registered = [name("bash"), name("read"), name("write")];
    let mut config = Config::new();
    config
        .load_toml_str(
            "[tools]\nauto_approve = [\"$readonly\", \"reed\"]\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    config
        .apply_frontmatter(
            "json",
            "{\n  \"flemma\": {\n    \"tools\": {\"auto_approve\": [\"wirte\", \"mcp.*\", \"bash\"]}\n  }\n}",
            2,
        )
        .unwrap();
    let found = config.diagnostics(&registered);
    let texts: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "flemma.toml:2: 'reed' in tools.auto_approve matches no tool: it approves nothing -- did you mean 'read'?",
            "line 4: 'wirte' in tools.auto_approve matches no tool: it approves nothing -- did you mean 'write'?",
            "line 4: 'mcp.*' in tools.auto_approve matches no tool: it approves nothing",
        ]
    );
    assert!(found.iter().all(|d| d.severity() == Severity::Warning));
}

/// A JSON frontmatter without a `"flemma"` key sets template variables only: a key that
/// names an option is a warning that says where options go.
#[test]
fn a_json_frontmatter_whose_options_miss_the_flemma_key_is_a_warning() {
    let mut config = Config::new();
    let variables = config
        .apply_frontmatter(
            "json",
            "{\n  \"name\": \"Ada\",\n  \"tools\": [\"bash\"]\n}",
            2,
        )
        .unwrap();
    assert_eq!(variables["tools"], json!(["bash"]));
    let found = config.diagnostics(&[name("bash")]);
    let texts: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "line 4: \"tools\" is a template variable here, not an option: a JSON frontmatter's options go under its \"flemma\" key ({\"flemma\": {\"tools\": …}})"
        ]
    );
    assert_eq!(found[0].severity(), Severity::Warning);
    // Variables alone, or options under "flemma", are fine; a new frontmatter forgets it.
    for code in [
        "{\"name\": \"Ada\"}",
        "{\"flemma\": {\"tools\": [\"bash\"]}, \"name\": \"Ada\"}",
    ] {
        config.apply_frontmatter("json", code, 2).unwrap();
        assert_eq!(config.diagnostics(&[name("bash")]), []);
    }
}
