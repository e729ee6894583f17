//! The typed `Options` view: the spec defaults (§5.6, §7.10, §11.1, §12, §14.1) and that the
//! view follows the layers.

use flemma_config::{Backup, Config, CursorAfterResult, Layer};
use pretty_assertions::assert_eq;
use serde_json::json;

const EXCLUDES: [&str; 8] = [
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    "target",
    "dist",
    "build",
    "vendor",
];

#[test]
fn defaults_are_the_spec_defaults() {
    let options = Config::new().options().unwrap();
    assert_eq!(
        serde_json::to_value(&options).unwrap(),
        json!({
            "tools": {
                "list": [],
                "auto_approve": ["read", "write", "edit", "find", "grep", "ls", "flemma.*"],
                "require_approval": true,
                "auto_approve_sandboxed": true,
                "max_concurrent": 2,
                "default_timeout": 30,
                "show_spinner": true,
                "cursor_after_result": "result",
                "autopilot": {"enabled": true, "max_turns": 100, "resume_delay": 2000},
                "store": {
                    "path_format": "$chat",
                    "unnamed_path_format": "${TMPDIR:-/tmp}/flemma/unnamed/{{ flemma.pid }}/{{ bufnr }}/{{ source }}_{{ name }}_{{ id }}.txt",
                    "materialize": false,
                    "preview": {"lines": 10, "bytes": 2048},
                    "backup": "version"
                },
                "bash": {
                    "shell": "bash", "cwd": "urn:flemma:buffer:path", "env": {},
                    "allow": [], "ask": [], "deny": [], "claude_settings": false
                },
                "env": {
                    "inherit": "all",
                    "ignore_default_excludes": false,
                    "exclude": [],
                    "include_only": [],
                    "keep": [],
                    "set": {}
                },
                "grep": {"cwd": "urn:flemma:buffer:path", "exclude": EXCLUDES},
                "find": {"cwd": "urn:flemma:buffer:path", "exclude": EXCLUDES},
                "ls": {"cwd": "urn:flemma:buffer:path"}
            },
            "sandbox": {
                "enabled": true,
                "backend": "auto",
                "policy": {
                    "rw_paths": [
                        "urn:flemma:project", "urn:flemma:buffer:path", "urn:flemma:store", "/tmp",
                        "${TMPDIR:-/tmp}", "${XDG_CACHE_HOME:-~/.cache}",
                        "${XDG_DATA_HOME:-~/.local/share}"
                    ],
                    "network": true,
                    "allow_privileged": false,
                    "protect_conversation": true
                },
                "backends": {"bwrap": {"path": "bwrap", "extra_args": []}}
            },
            "editing": {"compact_headers": true},
            "http": {
                "connect_timeout": null,
                "first_byte_timeout": null,
                "idle_timeout": null,
                "max_retries": null
            },
            "budget": {
                "run": {"max_tokens": null, "max_cost": null},
                "conversation": {"max_tokens": null, "max_cost": null}
            },
            "compaction": {"enabled": true, "threshold": 0.8, "keep_turns": 2},
            "telemetry": {"capture_content": false},
            "templates": {"file_access": "project", "allowed_roots": []},
            "provider": null,
            "model": null,
            "thinking": null,
            "max_tokens": null,
            "temperature": null,
            "cache_retention": null,
            "parameters": {},
            "anthropic": {},
            "openai": {},
            "vertex": {},
            "moonshot": {},
            "mcp": {"servers": {}}
        })
    );
    assert!(!options.tools.list_is_explicit);
    assert_eq!(
        options.tools.store.backup,
        Backup::Strategy("version".into())
    );
    assert!(options.tools.tables.is_empty());
}

#[test]
fn executor_keys_take_their_values_and_shorthands() {
    let mut config = Config::new();
    config
        .load_toml_str(
            "[tools]\nautopilot = false\nshow_spinner = false\ncursor_after_result = \"next\"\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(
        options.tools.autopilot,
        serde_json::from_value(json!({"enabled": false, "max_turns": 100, "resume_delay": 2000}))
            .unwrap()
    );
    assert!(!options.tools.show_spinner);
    assert_eq!(options.tools.cursor_after_result, CursorAfterResult::Next);

    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"tools": {"autopilot": {"max_turns": 5, "resume_delay": 0}, "cursor_after_result": "stay"}}}"#,
            2,
        )
        .unwrap();
    let options = config.options().unwrap();
    assert!(
        !options.tools.autopilot.enabled,
        "the setup's shorthand still holds"
    );
    assert_eq!(options.tools.autopilot.max_turns, 5);
    assert_eq!(options.tools.autopilot.resume_delay, 0);
    assert_eq!(options.tools.cursor_after_result, CursorAfterResult::Stay);
    config
        .set(Layer::Frontmatter, "tools.autopilot", true)
        .unwrap();
    assert!(config.options().unwrap().tools.autopilot.enabled);

    let err = config
        .set(Layer::Runtime, "tools.cursor_after_result", "end")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"option `tools.cursor_after_result` expects one of "result", "stay", "next", got "end""#
    );
}

/// `tools.modules` (spec §4.2: Lua module paths to load) cannot be honoured: every way of
/// writing it is an error naming the Rust-side equivalent, never a silent no-op.
#[test]
fn tools_modules_is_refused_with_the_rust_equivalent() {
    const MESSAGE: &str = "option `tools.modules` is not supported here: Lua tool modules \
        cannot be loaded; register tools in Rust instead, through the `Tool` trait: \
        `ToolRegistry::register(tool)`, or `ToolRegistry::register_module(ToolModule)` for \
        tools with their approval resolver";
    let mut config = Config::new();
    let err = config
        .load_toml_str(
            "[tools]\nmodules = [\"my.tools\"]\n",
            "flemma.toml".as_ref(),
        )
        .unwrap_err();
    assert_eq!(crate::chain(&err), format!("flemma.toml: {MESSAGE}"));
    for write in [
        config.set(Layer::Setup, "tools.modules", json!(["my.tools"])),
        config.set(Layer::Setup, "tools", json!({"modules": []})),
        config.append(Layer::Runtime, "tools.modules", "my.tools"),
    ] {
        let err = write.unwrap_err();
        assert!(
            matches!(err, flemma_config::ConfigError::Unsupported { .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), MESSAGE);
    }
    let err = config
        .apply_frontmatter(
            "json",
            "{\n  \"flemma\": {\n    \"tools\": {\"modules\": [\"my.tools\"]}\n  }\n}",
            2,
        )
        .unwrap_err();
    assert_eq!(
        (err.line, crate::chain(&err)),
        (4, format!("line 4: invalid option: {MESSAGE}"))
    );
    // Not a tool table either.
    assert!(config.set(Layer::Setup, "tools.modules.x", 1).is_err());
    assert_eq!(config.options().unwrap(), Config::new().options().unwrap());
}

#[test]
fn the_view_follows_every_layer() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "model", "claude-sonnet-4-5")
        .unwrap();
    config.set(Layer::Setup, "max_tokens", 4096).unwrap();
    config
        .set(Layer::Runtime, "model", "claude-opus-4-1")
        .unwrap();
    config
        .set(Layer::Setup, "parameters.openai.reasoning_effort", "high")
        .unwrap();
    config
        .set(Layer::Frontmatter, "parameters.openai.verbosity", "low")
        .unwrap();
    config.set(Layer::Frontmatter, "thinking", 4096).unwrap();
    config
        .set(Layer::Frontmatter, "tools.store.backup", false)
        .unwrap();
    config
        .remove(Layer::Frontmatter, "tools.grep.exclude", "vendor")
        .unwrap();
    config
        .set(Layer::Runtime, "tools.calculator.precision", 3)
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.model.as_deref(), Some("claude-opus-4-1"));
    assert_eq!(options.max_tokens, Some(4096));
    assert_eq!(options.thinking, Some(json!(4096)));
    assert_eq!(
        serde_json::Value::Object(options.parameters.clone()),
        json!({"openai": {"reasoning_effort": "high", "verbosity": "low"}})
    );
    assert_eq!(options.tools.store.backup, Backup::Enabled(false));
    assert_eq!(options.tools.grep.exclude, EXCLUDES[..7]);
    assert_eq!(options.tools.find.exclude, EXCLUDES);
    assert_eq!(
        json!(options.tool_options(&calculator())),
        json!({"precision": 3})
    );

    config.clear_layer(Layer::Runtime);
    let options = config.options().unwrap();
    assert_eq!(options.model.as_deref(), Some("claude-sonnet-4-5"));
    assert!(options.tools.tables.is_empty());
}

#[test]
fn a_null_write_falls_back_to_the_layer_below() {
    let mut config = Config::new();
    config.set(Layer::Setup, "model", "m1").unwrap();
    config
        .set(Layer::Frontmatter, "model", serde_json::Value::Null)
        .unwrap();
    assert_eq!(config.options().unwrap().model.as_deref(), Some("m1"));
}

fn calculator() -> flemma_ids::ToolName {
    flemma_ids::ToolName::new("calculator").unwrap()
}

#[test]
fn tools_env_and_templates_take_typed_values() {
    use flemma_config::{EnvPolicy, FileAccessMode, Inherit};
    let mut config = Config::new();
    config
        .load_toml_str(
            "[tools.env]\ninherit = \"core\"\nkeep = [\"GITHUB_TOKEN\"]\nset = { CI = \"1\" }\n\
             [templates]\nfile_access = \"any\"\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    config
        .append(Layer::Runtime, "tools.env.keep", "MY_TOKEN")
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(
        options.tools.env,
        EnvPolicy::default()
            .inherit(Inherit::Core)
            .keep(["GITHUB_TOKEN", "MY_TOKEN"])
            .set("CI", "1")
    );
    assert_eq!(options.templates.file_access, FileAccessMode::Any);
    let error = config
        .set(Layer::Runtime, "templates.file_access", "everything")
        .unwrap_err();
    assert!(error.to_string().contains("\"project\""), "{error}");
}
