//! `flemma.toml` into the SETUP layer: a realistic file, syntax errors with line and column,
//! unknown keys, wrong types, invalid list items, aliases and shorthands.

use std::path::Path;

use flemma_config::{Backup, Config, ConfigError, Layer};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{chain, strings};

const FLEMMA_TOML: &str = r#"# flemma.toml of a Rust project
provider = "anthropic"
model = "claude-sonnet-4-5"
thinking = "high"

[parameters.anthropic]
cache_retention = "long"

[tools]
list = ["$dev", "bash", "read"]
auto_approve = ["$standard", "+bash", "!write"]
max_concurrent = 4
default_timeout = 60
require_approval = true
autopilot = { max_turns = 20 }

[tools.bash]
shell = "zsh"
env = { RUST_LOG = "debug", CARGO_TERM_COLOR = "never" }

[tools.store]
backup = false
preview.lines = 0

[tools.calculator]
precision = 12

[sandbox]
enabled = true
backend = "required"
policy.network = false
policy.rw_paths = ["+/var/cache/ci"]

[presets."$dev"]
tools = ["grep", "find"]
auto_approve = ["bash"]
"#;

fn load(text: &str) -> Result<Config, ConfigError> {
    let mut config = Config::new();
    config.load_toml_str(text, Path::new("/home/ada/project/flemma.toml"))?;
    Ok(config)
}

#[test]
fn a_realistic_file() {
    let config = load(FLEMMA_TOML).unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.provider.as_deref(), Some("anthropic"));
    assert_eq!(options.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(options.thinking, Some(json!("high")));
    assert_eq!(
        options.parameters["anthropic"],
        json!({"cache_retention": "long"})
    );

    assert_eq!(
        options.tools.list,
        strings(&["grep", "find", "bash", "read"])
    );
    assert!(options.tools.list_is_explicit);
    assert_eq!(
        options.tools.auto_approve,
        strings(&["read", "edit", "find", "grep", "ls", "flemma.*", "bash"])
    );
    assert_eq!(options.tools.max_concurrent, 4);
    assert_eq!(options.tools.default_timeout, 60);
    assert!(options.tools.require_approval);
    assert_eq!(options.tools.autopilot.max_turns, 20);
    assert!(options.tools.autopilot.enabled);
    assert_eq!(options.tools.autopilot.resume_delay, 2000);
    assert_eq!(options.tools.bash.shell, "zsh");
    assert_eq!(options.tools.bash.cwd, "urn:flemma:buffer:path");
    assert_eq!(
        options.tools.bash.env.iter().collect::<Vec<_>>(),
        [
            (&"CARGO_TERM_COLOR".to_owned(), &"never".to_owned()),
            (&"RUST_LOG".to_owned(), &"debug".to_owned()),
        ]
    );
    assert_eq!(options.tools.store.backup, Backup::Enabled(false));
    assert_eq!(options.tools.store.preview.lines, 0);
    assert_eq!(options.tools.store.preview.bytes, 2048);
    assert_eq!(
        json!(options.tool_options(&"calculator".parse().unwrap())),
        json!({"precision": 12})
    );

    assert!(options.sandbox.enabled);
    assert_eq!(options.sandbox.backend, "required");
    assert!(!options.sandbox.policy.network);
    assert_eq!(
        options.sandbox.policy.rw_paths.last().map(String::as_str),
        Some("/var/cache/ci")
    );
    assert_eq!(options.sandbox.policy.rw_paths.len(), 8);

    assert_eq!(config.list("tools").source, "S");
    assert_eq!(config.list("tools.auto_approve").source, "S");
    assert_eq!(config.list("sandbox.policy.rw_paths").source, "D+S");
    assert!(config.layer_has_set(Layer::Setup, "tools.max_concurrent"));
    assert!(!config.layer_has_set(Layer::Runtime, "tools.max_concurrent"));
    assert!(config.presets().get("$dev").is_some());
}

#[test]
fn load_toml_file_reads_the_file() {
    let scratch = tempfile::Builder::new()
        .prefix("flemma-config-it-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let path = dir.join("flemma.toml");
    std::fs::write(&path, FLEMMA_TOML).unwrap();
    let mut config = Config::new();
    config.load_toml_file(&path).unwrap();
    assert_eq!(config.options().unwrap().tools.max_concurrent, 4);

    let missing = dir.join("missing.toml");
    let err = Config::new().load_toml_file(&missing).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Io { path, .. } if *path == missing),
        "{err:?}"
    );
    // The path once, then the I/O error once.
    assert_eq!(
        chain(&err),
        format!(
            "cannot read {}: {}",
            missing.display(),
            std::fs::read(&missing).unwrap_err()
        )
    );
}

#[test]
fn a_syntax_error_reports_file_line_and_column() {
    let err = load("[tools]\nmax_concurrent = 4\nauto_approve = = [\"bash\"]\n").unwrap_err();
    let ConfigError::Toml { path, source } = &err else {
        panic!("expected a TOML error, got {err:?}");
    };
    assert_eq!(path, Path::new("/home/ada/project/flemma.toml"));
    assert_eq!((source.line(), source.column()), (3, 16));
    // The position is the context; the parser's message, once, is the cause.
    assert_eq!(err.to_string(), "/home/ada/project/flemma.toml:3:16");
    assert!(!source.message().is_empty() && !source.message().contains('\n'));
    assert_eq!(
        chain(&err),
        format!("/home/ada/project/flemma.toml:3:16: {}", source.message())
    );
}

#[test]
fn syntax_error_columns_count_characters() {
    // The error is at `x`, after a string of multi-byte characters.
    let err = load("model = \"ééé\" x\n").unwrap_err();
    let ConfigError::Toml { source, .. } = &err else {
        panic!("expected a TOML error, got {err:?}");
    };
    assert_eq!((source.line(), source.column()), (1, 15), "{err}");
}

#[test]
fn an_unknown_key_suggests_the_closest_option() {
    let err = load("[tools]\nmax_concurent = 4\n").unwrap_err();
    assert_eq!(
        chain(&err),
        "/home/ada/project/flemma.toml: unknown option `tools.max_concurent` -- did you mean `tools.max_concurrent`?"
    );
    let ConfigError::InFile { source, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(matches!(
        source.as_ref(),
        ConfigError::UnknownOption { path, suggestion: Some(s) }
            if path == "tools.max_concurent" && s == "tools.max_concurrent"
    ));
    let err = load("[sandbox.policy]\nnetwrk = false\n").unwrap_err();
    assert_eq!(
        chain(&err),
        "/home/ada/project/flemma.toml: unknown option `sandbox.policy.netwrk` -- did you mean `sandbox.policy.network`?"
    );
}

#[test]
fn a_wrong_type_names_option_and_value() {
    let err = load("[tools]\nmax_concurrent = \"four\"\n").unwrap_err();
    assert_eq!(
        chain(&err),
        "/home/ada/project/flemma.toml: option `tools.max_concurrent` expects a non-negative integer, got \"four\""
    );
    let err = load("[tools.bash]\nenv = { DEPTH = 3 }\n").unwrap_err();
    assert!(
        chain(&err).contains("option `tools.bash.env` expects a table of strings"),
        "{err}"
    );
    let err = load("[tools]\nauto_approve = [\"read\", 3]\n").unwrap_err();
    assert!(
        chain(&err).contains("option `tools.auto_approve` expects a list of strings"),
        "{err}"
    );
}

#[test]
fn an_invalid_list_item_is_named() {
    let err = load("[tools]\nauto_approve = [\"read\", \"!+bash\"]\n").unwrap_err();
    assert!(
        chain(&err).starts_with(
            "/home/ada/project/flemma.toml: invalid list item \"!+bash\" for `tools.auto_approve`"
        ),
        "{err}"
    );
}

#[test]
fn a_failed_load_leaves_the_config_unchanged() {
    let mut config = Config::new();
    config
        .load_toml_str("[tools]\nmax_concurrent = 3\n", Path::new("a.toml"))
        .unwrap();
    let err = config
        .load_toml_str(
            "model = \"m\"\n[tools]\nmax_concurrent = 4\nbogus = 1\n\n[presets.\"$ci\"]\ntools = [\"bash\"]\n",
            Path::new("b.toml"),
        )
        .unwrap_err();
    assert!(
        chain(&err).starts_with("b.toml: unknown option `tools.bogus`"),
        "{err}"
    );
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 3);
    assert_eq!(options.model, None);
    assert!(config.presets().get("$ci").is_none());
}

#[test]
fn aliases_and_shorthands() {
    let config =
        load("sandbox = false\n\n[tools]\napprove = [\"bash\"]\nautopilot = false\n").unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.tools.auto_approve, strings(&["bash"]));
    assert!(!options.sandbox.enabled);
    assert!(!options.tools.autopilot.enabled);
    assert_eq!(options.tools.autopilot.max_turns, 100);

    // `tools = [...]` is the list when the file has no `[tools]` table.
    let config = load("tools = [\"bash\", \"read\"]\n").unwrap();
    assert_eq!(
        config.options().unwrap().tools.list,
        strings(&["bash", "read"])
    );

    // Dotted keys.
    let config =
        load("tools.autopilot.resume_delay = 500\nsandbox.policy.allow_privileged = true\n")
            .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.tools.autopilot.resume_delay, 500);
    assert!(options.sandbox.policy.allow_privileged);
}

#[test]
fn empty_tables_are_accepted() {
    // A header whose keys are all commented out is still a valid file.
    for text in [
        "[tools]\n# max_concurrent = 4\n",
        "[sandbox]\n\n[sandbox.policy]\n",
        "[tools.autopilot]\n[tools.bash.env]\n[tools.calculator]\n",
    ] {
        let config = load(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(
            config.options().unwrap(),
            Config::new().options().unwrap(),
            "{text}"
        );
        assert_eq!(config.list("tools").source, "D", "{text}");
    }
    // An empty table under an unknown name is still unknown.
    let err = load("[sandbx]\n").unwrap_err();
    assert!(chain(&err).contains("unknown option `sandbx`"), "{err}");
}

#[test]
fn the_mcp_section_is_kept_for_its_crate_and_merged_across_files() {
    let mut config = Config::new();
    config
        .load_toml_str(
            "model = \"m\"\n[mcp.servers.fs]\ncommand = \"mcp-fs\"\nargs = [\"/srv\"]\n[mcp.servers.web]\nurl = \"http://127.0.0.1:1/mcp\"\n",
            Path::new("a.toml"),
        )
        .unwrap();
    config
        .load_toml_str(
            "[mcp.servers.fs]\nargs = [\"/data\"]\nenabled = false\n",
            Path::new("b.toml"),
        )
        .unwrap();
    assert_eq!(
        config.section("mcp"),
        Some(&json!({"servers": {
            "fs": {"command": "mcp-fs", "args": ["/data"], "enabled": false},
            "web": {"url": "http://127.0.0.1:1/mcp"},
        }}))
    );
    assert_eq!(config.section_origin("mcp"), Some(Path::new("b.toml")));
    // Not an option: the options are untouched, and `mcp.*` is no option path.
    assert_eq!(config.options().unwrap().model.as_deref(), Some("m"));
    assert!(config.section("tools").is_none());
}
