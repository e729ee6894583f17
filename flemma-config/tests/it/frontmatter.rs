//! JSON frontmatter (and the language dispatch): options under `"flemma"`, template variables,
//! the FRONTMATTER layer re-evaluated whole, errors pointing into the transcript.

use flemma_config::{Config, ConfigError, Layer, OpKind};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{chain, strings};

/// A frontmatter as it sits in a transcript: the fence on line 1, code from line 2.
const FIRST_LINE: u32 = 2;

#[test]
fn options_under_flemma_and_variables_returned() {
    let mut config = Config::new();
    let code = r#"{
  "name": "Ada",
  "flemma": {
    "tools": {"auto_approve": ["+bash", "!write"], "max_concurrent": 4},
    "thinking": "medium",
    "sandbox": false
  },
  "count": 3
}"#;
    let variables = config.apply_frontmatter("json", code, FIRST_LINE).unwrap();
    assert_eq!(
        serde_json::Value::Object(variables),
        json!({"name": "Ada", "count": 3})
    );
    // `"sandbox": false` widens: not taken unless the host lets frontmatters widen.
    assert!(config.options().unwrap().sandbox.enabled);
    config.allow_frontmatter_widening(true);
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 4);
    assert_eq!(options.thinking, Some(json!("medium")));
    assert!(!options.sandbox.enabled);
    assert_eq!(
        options.tools.auto_approve,
        strings(&["read", "edit", "find", "grep", "ls", "flemma.*", "bash"])
    );
    assert_eq!(config.list("tools.auto_approve").source, "D+F");
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Remove,
        "tools.auto_approve",
        Some("write")
    ));
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    assert!(config.layer_has_set(Layer::Frontmatter, "tools.max_concurrent"));
}

#[test]
fn a_list_of_removes_is_not_a_set() {
    let mut config = Config::new();
    config
        .apply_frontmatter("json", r#"{"flemma": {"tools": ["!bash"]}}"#, FIRST_LINE)
        .unwrap();
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools"));
    assert!(config.layer_has_op(Layer::Frontmatter, OpKind::Remove, "tools", Some("bash")));
}

#[test]
fn dotted_keys_and_a_frontmatter_without_options() {
    let mut config = Config::new();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"tools.auto_approve": ["read"], "tools.autopilot": false}}"#,
            FIRST_LINE,
        )
        .unwrap();
    assert_eq!(config.list("tools.auto_approve").items, strings(&["read"]));
    assert!(!config.options().unwrap().tools.autopilot.enabled);

    let variables = config
        .apply_frontmatter("json", r#"{"topic": "tests"}"#, FIRST_LINE)
        .unwrap();
    assert_eq!(variables["topic"], "tests");
    assert_eq!(config.options().unwrap(), Config::new().options().unwrap());
}

#[test]
fn re_applying_replaces_the_frontmatter_layer_only() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools.default_timeout", 60)
        .unwrap();
    config.append(Layer::Runtime, "tools", "bash").unwrap();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"tools": {"max_concurrent": 4, "list": ["+read"]}}}"#,
            FIRST_LINE,
        )
        .unwrap();
    assert_eq!(config.options().unwrap().tools.max_concurrent, 4);
    assert_eq!(config.list("tools").items, strings(&["bash", "read"]));

    config
        .apply_frontmatter("json", r#"{"flemma": {"thinking": "low"}}"#, FIRST_LINE)
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 2);
    assert_eq!(options.thinking, Some(json!("low")));
    assert_eq!(options.tools.default_timeout, 60);
    assert_eq!(config.list("tools").items, strings(&["bash"]));
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.max_concurrent"));
}

#[test]
fn an_error_leaves_the_frontmatter_layer_empty() {
    let mut config = Config::new();
    config
        .apply_frontmatter("json", r#"{"flemma": {"tools": {"max_concurrent": 4}}}"#, 2)
        .unwrap();
    // The first key is valid and written before the second fails; nothing of it stays.
    let err = config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"tools": {"default_timeout": 5, "max_concurrent": "x"}}}"#,
            2,
        )
        .unwrap_err();
    assert!(chain(&err).contains("tools.max_concurrent"), "{err}");
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 2);
    assert_eq!(options.tools.default_timeout, 30);
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.default_timeout"));

    config
        .apply_frontmatter("json", r#"{"flemma": {"thinking": "low"}}"#, 2)
        .unwrap();
    config
        .apply_frontmatter("json", "{ not json", 2)
        .unwrap_err();
    assert_eq!(config.options().unwrap().thinking, None);
}

#[test]
fn invalid_json_reports_the_transcript_line() {
    let mut config = Config::new();
    let code = "{\n  \"name\": \"Ada\",\n  \"flemma\": {,}\n}";
    let err = config
        .apply_frontmatter("json", code, FIRST_LINE)
        .unwrap_err();
    assert_eq!(err.line, 4, "{err}");
    // The parser's error is the cause, typed, and printed once after the message.
    let cause = std::error::Error::source(&err)
        .and_then(|e| e.downcast_ref::<serde_json::Error>())
        .unwrap();
    assert_eq!(err.to_string(), "line 4: invalid JSON frontmatter");
    assert_eq!(
        chain(&err),
        format!("line 4: invalid JSON frontmatter: {cause}")
    );
}

#[test]
fn option_errors_report_the_line_of_the_offending_key() {
    let mut config = Config::new();
    let code = r#"{
  "name": "Ada",
  "flemma": {
    "thinking": "medium",
    "tools": {
      "max_concurent": 4
    }
  }
}"#;
    let err = config
        .apply_frontmatter("json", code, FIRST_LINE)
        .unwrap_err();
    // The message is the context; the option error, typed, is the cause.
    assert_eq!(
        (err.line, chain(&err)),
        (
            7,
            "line 7: invalid option: unknown option `tools.max_concurent` -- did you mean `tools.max_concurrent`?"
                .to_owned()
        )
    );
    assert!(
        matches!(
            std::error::Error::source(&err).and_then(|e| e.downcast_ref::<ConfigError>()),
            Some(ConfigError::UnknownOption { path, .. }) if path == "tools.max_concurent"
        ),
        "{err:?}"
    );

    let code = "{\n  \"flemma\": {\n    \"tools\": {\n      \"auto_approve\": [\"^$standard\"]\n    }\n  }\n}";
    let err = config.apply_frontmatter("json", code, 10).unwrap_err();
    assert_eq!(err.line, 13, "{err}");
    assert!(chain(&err).contains("\"^$standard\""), "{err}");
}

#[test]
fn the_shape_of_the_frontmatter_is_checked() {
    let mut config = Config::new();
    let err = config
        .apply_frontmatter("json", "[1, 2]", FIRST_LINE)
        .unwrap_err();
    assert_eq!(err.line, FIRST_LINE);
    assert_eq!(err.message, "JSON frontmatter must be an object");
    let err = config
        .apply_frontmatter("json", "{\n  \"flemma\": [\"bash\"]\n}", FIRST_LINE)
        .unwrap_err();
    assert_eq!(err.line, 3);
    assert!(chain(&err).contains("\"flemma\""), "{err}");
}

#[test]
fn unsupported_languages_point_at_the_fence() {
    let mut config = Config::new();
    let err = config
        .apply_frontmatter("yaml", "tools: [bash]", FIRST_LINE)
        .unwrap_err();
    assert_eq!(err.line, 1);
    assert!(chain(&err).contains("yaml"), "{err}");
}

#[cfg(not(feature = "lua"))]
#[test]
fn lua_needs_the_feature() {
    let mut config = Config::new();
    config
        .apply_frontmatter("json", r#"{"flemma": {"thinking": "low"}}"#, FIRST_LINE)
        .unwrap();
    let err = config
        .apply_frontmatter("lua", "flemma.opt.tools.max_concurrent = 4", FIRST_LINE)
        .unwrap_err();
    assert_eq!(err.line, FIRST_LINE);
    assert!(chain(&err).contains("`lua` feature"), "{err}");
    assert_eq!(config.options().unwrap().thinking, None);
}

/// The attack: a transcript someone sent raises or removes the host's budget to spend more.
/// The host's limit stays; lowering it, or setting one where the host has none, is taken.
#[test]
fn a_frontmatter_may_lower_a_budget_never_raise_or_remove_it() {
    let mut config = Config::new();
    config
        .load_toml_str(
            "[budget.run]\nmax_cost = 1.0\n[budget.conversation]\nmax_tokens = 100000\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"budget": {"run": {"max_cost": 100}, "conversation": {"max_tokens": null}}}}"#,
            FIRST_LINE,
        )
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.budget.run.max_cost, Some(1.0));
    assert_eq!(options.budget.conversation.max_tokens, Some(100_000));
    let diagnostics = format!("{:?}", config.diagnostics(&[]));
    assert!(diagnostics.contains("budget.run.max_cost"), "{diagnostics}");
    let mut config = Config::new();
    config
        .load_toml_str("[budget.run]\nmax_cost = 1.0\n", "flemma.toml".as_ref())
        .unwrap();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"budget": {"run": {"max_cost": 0.25, "max_tokens": 5000}}}}"#,
            FIRST_LINE,
        )
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.budget.run.max_cost, Some(0.25));
    assert_eq!(options.budget.run.max_tokens, Some(5000));
    assert!(
        config.diagnostics(&[]).is_empty(),
        "{:?}",
        config.diagnostics(&[])
    );
}

/// The attack: a transcript someone sent turns compaction on where the host turned it off (a
/// model's summary would stand for the user's messages). It stays off; turning it off where
/// the host has it on is taken.
#[test]
fn a_frontmatter_may_turn_compaction_off_never_on() {
    let mut config = Config::new();
    config
        .load_toml_str("[compaction]\nenabled = false\n", "flemma.toml".as_ref())
        .unwrap();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"compaction": {"enabled": true, "threshold": 0.1}}}"#,
            FIRST_LINE,
        )
        .unwrap();
    let options = config.options().unwrap();
    assert!(!options.compaction.enabled);
    let diagnostics = format!("{:?}", config.diagnostics(&[]));
    assert!(diagnostics.contains("compaction.enabled"), "{diagnostics}");
    let mut config = Config::new();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"compaction": {"enabled": false}}}"#,
            FIRST_LINE,
        )
        .unwrap();
    assert!(!config.options().unwrap().compaction.enabled);
    assert!(config.diagnostics(&[]).is_empty());
}

/// The attack: a transcript someone sent turns the content capture on, so that its host's
/// tracing backend would receive the conversation and the tools' results. It stays off (the
/// frontmatter's write is an error); turning it off where the host has it on is taken.
#[test]
fn a_frontmatter_may_turn_the_content_capture_off_never_on() {
    let mut config = Config::new();
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"telemetry": {"capture_content": true}}}"#,
            FIRST_LINE,
        )
        .unwrap();
    assert!(!config.options().unwrap().telemetry.capture_content);
    let diagnostics = format!("{:?}", config.diagnostics(&[]));
    assert!(
        diagnostics.contains("telemetry.capture_content"),
        "{diagnostics}"
    );
    let mut config = Config::new();
    config
        .load_toml_str(
            "[telemetry]\ncapture_content = true\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    assert!(config.options().unwrap().telemetry.capture_content);
    config
        .apply_frontmatter(
            "json",
            r#"{"flemma": {"telemetry": {"capture_content": false}}}"#,
            FIRST_LINE,
        )
        .unwrap();
    assert!(!config.options().unwrap().telemetry.capture_content);
    assert!(config.diagnostics(&[]).is_empty());
}
