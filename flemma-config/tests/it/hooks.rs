//! A frontmatter's `hooks`: refused unless the host allows frontmatter hooks, then kept as
//! written (JSON and Lua), cleared with the layer, never from `--set`.

use flemma_config::{Config, ConfigError, Layer};
use pretty_assertions::assert_eq;
use serde_json::json;

const JSON: &str = "{\n  \"flemma\": {\n    \"hooks\": {\"PreToolUse\": [{\"matcher\": \"bash\", \"command\": \"exit 2\"}]}\n  }\n}";

#[test]
fn frontmatter_hooks_are_refused_by_default() {
    let mut config = Config::new();
    let err = config.apply_frontmatter("json", JSON, 2).unwrap_err();
    assert_eq!(err.line, 4);
    let text = crate::chain(&err);
    assert!(text.contains("cannot add hooks"), "{text}");
    assert!(
        text.contains("`[hooks] allow_frontmatter = true`"),
        "{text}"
    );
    assert!(config.frontmatter_hooks().is_none());
}

#[test]
fn allowed_frontmatter_hooks_are_kept_and_cleared_with_the_layer() {
    let mut config = Config::new();
    config
        .load_toml_str(
            "[hooks]\nallow_frontmatter = true\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    assert!(config.frontmatter_hooks_allowed());
    let generation = config.generation();
    config.apply_frontmatter("json", JSON, 2).unwrap();
    assert_ne!(config.generation(), generation);
    assert_eq!(
        config.frontmatter_hooks(),
        Some(&json!({"PreToolUse": [{"matcher": "bash", "command": "exit 2"}]}))
    );
    // A frontmatter without hooks evaluated next leaves none behind.
    config
        .apply_frontmatter("json", r#"{"flemma": {"model": "x"}}"#, 2)
        .unwrap();
    assert!(config.frontmatter_hooks().is_none());
    // Other layers still cannot add hooks.
    for layer in [Layer::Runtime, Layer::Setup] {
        let err = config
            .set(layer, "hooks.PreToolUse", json!([{"command": "true"}]))
            .unwrap_err();
        assert!(matches!(err, ConfigError::Unsupported { .. }), "{err:?}");
    }
}

#[test]
fn the_host_word_beats_the_options_files() {
    let mut config = Config::new();
    config
        .load_toml_str(
            "[hooks]\nallow_frontmatter = true\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    config.allow_frontmatter_hooks(false);
    assert!(config.apply_frontmatter("json", JSON, 2).is_err());
    let mut config = Config::new();
    config.allow_frontmatter_hooks(true);
    config.apply_frontmatter("json", JSON, 2).unwrap();
    assert!(config.frontmatter_hooks().is_some());
}

#[cfg(feature = "lua")]
#[test]
fn lua_frontmatter_writes_hooks_table_by_table() {
    let mut config = Config::new();
    config.allow_frontmatter_hooks(true);
    config
        .apply_frontmatter(
            "lua",
            "flemma.opt.hooks = { compat = \"claude\" }\n\
             flemma.opt.hooks.PreToolUse = { { matcher = \"Bash\", command = \"exit 0\" } }\n\
             flemma.opt.tools.max_concurrent = 2",
            2,
        )
        .unwrap();
    assert_eq!(
        config.frontmatter_hooks(),
        Some(&json!({
            "compat": "claude",
            "PreToolUse": [{"matcher": "Bash", "command": "exit 0"}]
        }))
    );
    assert_eq!(config.options().unwrap().tools.max_concurrent, 2);
}
