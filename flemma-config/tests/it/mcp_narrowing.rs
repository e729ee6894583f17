//! A conversation narrows the MCP servers of the options files (`mcp.servers.<name>.*`) and
//! can never define one: the fields that start a server are refused outside `flemma.toml`.

use std::time::Duration;

use flemma_config::{Config, ConfigError, FinalizeIssue, Layer, Origin};
use flemma_ids::Severity;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::chain;

const SETUP: &str = r#"
[mcp.servers.fs]
command = "mcp-fs"
exclude = ["delete_*"]

[mcp.servers.web]
url = "http://127.0.0.1:9/mcp"
enabled = false
"#;

fn configured() -> Config {
    let mut config = Config::new();
    config.load_toml_str(SETUP, "flemma.toml".as_ref()).unwrap();
    config
}

#[test]
fn json_frontmatter_narrows_a_server_by_enabled_include_exclude_and_timeout() {
    let mut config = configured();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"mcp": {"servers": {"fs": {"include": ["read_*", "list_*"], "exclude": ["list_secrets"], "tool_timeout": 2.5}}}}}"#,
            2,
        )
        .unwrap();
    let mcp = config.options().unwrap().mcp;
    assert!(mcp.allows("fs", "read_file"));
    assert!(mcp.allows("fs", "list_directory"));
    assert!(!mcp.allows("fs", "write_file"), "not included");
    assert!(!mcp.allows("fs", "list_secrets"), "excluded");
    assert_eq!(mcp.tool_timeout("fs"), Some(Duration::from_millis(2500)));
    assert!(!mcp.disables("fs"));
    assert_eq!(config.diagnostics(&[]), []);
    // The section the servers start from is the options file's, untouched.
    assert_eq!(
        config.section("mcp").unwrap()["servers"]["fs"],
        json!({"command": "mcp-fs", "exclude": ["delete_*"]})
    );
}

#[test]
fn a_frontmatter_cannot_define_a_server_or_change_how_one_starts() {
    for field in [
        r#""command": "sh""#,
        r#""args": ["-c", "id"]"#,
        r#""env": {"PATH": "/tmp"}"#,
        r#""cwd": "/""#,
        r#""url": "http://127.0.0.1:1/""#,
        r#""headers": {"X": "y"}"#,
        r#""startup_timeout": 100"#,
    ] {
        for server in ["fs", "evil"] {
            let mut config = configured();
            let code =
                format!(r#"{{"flemma": {{"mcp": {{"servers": {{"{server}": {{{field}}}}}}}}}}}"#);
            let error = config.apply_frontmatter("json", &code, 2).unwrap_err();
            let text = chain(&error);
            assert!(
                text.contains("cannot define an MCP server or change how one starts"),
                "{code}: {text}"
            );
            assert_eq!(config.options().unwrap().mcp.servers.len(), 0, "{code}");
        }
    }
    // Nor can any other layer: `--set` is the runtime layer.
    let mut config = configured();
    let error = config
        .set(Layer::Runtime, "mcp.servers.fs.command", "sh")
        .unwrap_err();
    assert!(
        matches!(error, ConfigError::Unsupported { .. }),
        "{error:?}"
    );
}

#[test]
fn unknown_fields_and_wrong_values_are_errors_with_a_suggestion() {
    let mut config = configured();
    let error = config
        .set(Layer::Frontmatter, "mcp.servers.fs.exclud", json!(["x"]))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown option `mcp.servers.fs.exclud` -- did you mean `mcp.servers.fs.exclude`?"
    );
    for bad in [json!(0), json!(-1), json!(1e300), json!("5")] {
        let error = config
            .set(
                Layer::Frontmatter,
                "mcp.servers.fs.tool_timeout",
                bad.clone(),
            )
            .unwrap_err();
        assert!(
            matches!(error, ConfigError::Type { .. }),
            "{bad}: {error:?}"
        );
    }
    assert!(
        config
            .set(Layer::Frontmatter, "mcp.servers.fs.enabled", "no")
            .is_err()
    );
    assert!(config.set(Layer::Frontmatter, "mcp.other", true).is_err());
    assert!(
        config
            .set(Layer::Frontmatter, "mcp.servers.fs", false)
            .is_err()
    );
}

#[test]
fn a_narrowed_server_the_options_files_do_not_configure_stops_the_conversation() {
    let mut config = configured();
    config
        .apply_frontmatter(
            "json",
            "{\n  \"flemma\": {\n    \"mcp\": {\"servers\": {\"fss\": {\"enabled\": false}}}\n  }\n}",
            2,
        )
        .unwrap();
    let found = config.diagnostics(&[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].issue,
        FinalizeIssue::UnknownMcpServer {
            name: "fss".into(),
            suggestion: Some("fs".into())
        }
    );
    assert_eq!(found[0].severity(), Severity::Error);
    assert_eq!(found[0].origin, Some(Origin::Frontmatter { line: 4 }));
    assert_eq!(
        found[0].to_string(),
        "line 4: Unknown MCP server 'fss' in mcp.servers.fss (only the servers of the options files can be narrowed) -- did you mean 'fs'?"
    );
    // Without an `[mcp]` section the host configures its servers in code: nothing to check.
    let mut bare = Config::new();
    bare.apply_frontmatter(
        "json",
        r#"{"flemma": {"mcp": {"servers": {"fss": {"enabled": false}}}}}"#,
        2,
    )
    .unwrap();
    assert_eq!(bare.diagnostics(&[]), []);
}

#[test]
fn enabling_a_server_the_options_files_disable_is_a_warning_and_changes_nothing() {
    let mut config = configured();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"mcp": {"servers": {"web": {"enabled": true}, "fs": {"enabled": true}}}}}"#,
            2,
        )
        .unwrap();
    let found = config.diagnostics(&[]);
    let texts: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            "line 2: MCP server 'web' is disabled in the options files; `enabled = true` cannot start it"
        ]
    );
    assert_eq!(found[0].severity(), Severity::Warning);
    let mcp = config.options().unwrap().mcp;
    assert!(mcp.allows("fs", "read_file"));
}

#[cfg(feature = "lua")]
#[test]
fn lua_frontmatter_narrows_with_assignments_and_list_operations() {
    let mut config = configured();
    config
        .apply_frontmatter(
            "lua",
            "flemma.opt.mcp.servers.web.enabled = false\n\
             flemma.opt.mcp.servers.fs.exclude:append(\"write_*\")\n\
             flemma.opt.mcp.servers.fs.exclude:append(\"move_*\")\n\
             flemma.opt.mcp.servers.fs.tool_timeout = 3",
            2,
        )
        .unwrap();
    let mcp = config.options().unwrap().mcp;
    assert!(mcp.disables("web"));
    assert!(!mcp.allows("fs", "write_file"));
    assert!(!mcp.allows("fs", "move_file"));
    assert!(mcp.allows("fs", "read_file"));
    assert_eq!(mcp.tool_timeout("fs"), Some(Duration::from_secs(3)));
    assert_eq!(config.diagnostics(&[]), []);

    let error = config
        .apply_frontmatter("lua", "flemma.opt.mcp.servers.fs.command = \"sh\"", 2)
        .unwrap_err();
    assert!(
        chain(&error).contains("cannot define an MCP server"),
        "{}",
        chain(&error)
    );
    assert!(config.options().unwrap().mcp.servers.is_empty());
}
