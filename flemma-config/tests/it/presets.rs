//! Spec §5.6 / §5.3: built-in and user presets, names, missing fields, unknown references.

use flemma_config::{Config, ConfigError, FinalizeIssue, Layer, Preset, Presets};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{chain, names, strings};

fn preset_issues(issues: &[FinalizeIssue]) -> Vec<String> {
    issues
        .iter()
        .filter(|i| matches!(i, FinalizeIssue::UnknownPreset { .. }))
        .map(ToString::to_string)
        .collect()
}

#[test]
fn built_in_presets() {
    let presets = Presets::default();
    assert_eq!(
        presets.get("$standard").unwrap().auto_approve,
        Some(strings(&[
            "read", "write", "edit", "find", "grep", "ls", "flemma.*"
        ]))
    );
    assert_eq!(
        presets.get("$readonly").unwrap().auto_approve,
        Some(strings(&["read", "find", "grep", "ls"]))
    );
    assert_eq!(
        presets.names().collect::<Vec<_>>(),
        ["$readonly", "$standard"]
    );
    assert_eq!(Config::new().presets(), &presets);
}

#[test]
fn the_default_auto_approve_is_standard() {
    let config = Config::new();
    let list = config.list("tools.auto_approve");
    assert_eq!(
        list.items,
        strings(&["read", "write", "edit", "find", "grep", "ls", "flemma.*"])
    );
    assert_eq!(list.source, "D");
}

#[test]
fn user_presets_override_built_ins_everywhere_they_are_referenced() {
    let mut config = Config::new();
    config
        .set(
            Layer::Setup,
            "tools.auto_approve",
            json!(["$readonly", "+bash"]),
        )
        .unwrap();
    config
        .presets_mut()
        .insert(
            "$readonly",
            Preset {
                auto_approve: Some(strings(&["read"])),
                ..Preset::default()
            },
        )
        .unwrap();
    config
        .presets_mut()
        .insert(
            "$standard",
            Preset {
                auto_approve: Some(strings(&["ls"])),
                ..Preset::default()
            },
        )
        .unwrap();
    // References resolve on read, so a preset registered after the write still applies.
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["read", "bash"])
    );
    config.clear_layer(Layer::Setup);
    // The default `{"$standard"}` follows the override.
    assert_eq!(config.list("tools.auto_approve").items, strings(&["ls"]));
}

#[test]
fn invalid_preset_names_are_rejected() {
    let mut presets = Presets::default();
    for bad in ["$Upper", "std", "$", "$1x", ""] {
        let err = presets.insert(bad, Preset::default()).unwrap_err();
        assert!(
            matches!(&err, ConfigError::InvalidPreset { name, .. } if name == bad),
            "{bad}: {err:?}"
        );
        assert!(presets.get(bad).is_none());
    }
    presets.insert("$ci", Preset::default()).unwrap();
    assert!(presets.get("$ci").is_some());
}

#[test]
fn a_preset_lacking_the_field_contributes_nothing() {
    // `$readonly` has no `tools` field.
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["bash", "$readonly"]))
        .unwrap();
    assert_eq!(config.list("tools").items, strings(&["bash"]));

    config
        .append(Layer::Frontmatter, "tools", "$readonly")
        .unwrap();
    config
        .remove(Layer::Frontmatter, "tools", "$readonly")
        .unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["bash"]));
    assert_eq!(list.source, "S");
    assert!(config.finalize(&names(&["bash"])).is_empty());
}

#[test]
fn unknown_presets_stay_verbatim_and_finalize_suggests() {
    let mut config = Config::new();
    config
        .set(
            Layer::Setup,
            "tools.auto_approve",
            json!(["$standrd", "bash"]),
        )
        .unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["$standrd", "bash"])
    );
    config
        .set(Layer::Runtime, "tools", json!(["$zzzzzzzzz"]))
        .unwrap();
    assert_eq!(config.list("tools").items, strings(&["$zzzzzzzzz"]));

    let issues = config.finalize(&names(&["bash"]));
    assert!(issues.contains(&FinalizeIssue::UnknownPreset {
        path: "tools.auto_approve".into(),
        name: "$standrd".into(),
        suggestion: Some("$standard".into()),
    }));
    assert_eq!(
        preset_issues(&issues),
        [
            "Unknown preset '$zzzzzzzzz' in tools",
            "Unknown preset '$standrd' in tools.auto_approve -- did you mean '$standard'?",
        ]
    );
    // A preset reference is not also reported as an unknown tool.
    assert!(
        !issues
            .iter()
            .any(|i| matches!(i, FinalizeIssue::UnknownTool { name, .. } if name.starts_with('$'))),
        "{issues:?}"
    );

    // Registering the preset later resolves the deferred reference.
    config
        .presets_mut()
        .insert(
            "$zzzzzzzzz",
            Preset {
                tools: Some(strings(&["bash"])),
                ..Preset::default()
            },
        )
        .unwrap();
    assert_eq!(config.list("tools").items, strings(&["bash"]));
    assert_eq!(
        preset_issues(&config.finalize(&names(&["bash"]))),
        ["Unknown preset '$standrd' in tools.auto_approve -- did you mean '$standard'?"]
    );
}

#[test]
fn presets_may_reference_presets() {
    let mut config = Config::new();
    config
        .presets_mut()
        .insert(
            "$mine",
            Preset {
                auto_approve: Some(strings(&["$readonly", "bash"])),
                ..Preset::default()
            },
        )
        .unwrap();
    config
        .set(Layer::Setup, "tools.auto_approve", json!(["$mine"]))
        .unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["read", "find", "grep", "ls", "bash"])
    );

    // The same spread inside an operation: each resolved item becomes its own operation.
    let mut config2 = config.clone();
    config2.clear_layer(Layer::Setup);
    config2
        .set(Layer::Setup, "tools.auto_approve", json!(["write"]))
        .unwrap();
    config2
        .append(Layer::Runtime, "tools.auto_approve", "$mine")
        .unwrap();
    assert_eq!(
        config2.list("tools.auto_approve").items,
        strings(&["write", "read", "find", "grep", "ls", "bash"])
    );
    config2
        .remove(Layer::Frontmatter, "tools.auto_approve", "$mine")
        .unwrap();
    assert_eq!(
        config2.list("tools.auto_approve").items,
        strings(&["write"])
    );
}

#[test]
fn self_referencing_presets_terminate() {
    let mut config = Config::new();
    config
        .presets_mut()
        .insert(
            "$loop",
            Preset {
                tools: Some(strings(&["$loop", "bash"])),
                ..Preset::default()
            },
        )
        .unwrap();
    config.set(Layer::Setup, "tools", json!(["$loop"])).unwrap();
    let items = config.list("tools").items;
    assert!(items.contains(&"bash".to_owned()), "{items:?}");
    config.append(Layer::Runtime, "tools", "$loop").unwrap();
    assert!(config.list("tools").items.contains(&"bash".to_owned()));
}

#[test]
fn finalize_warns_about_unknown_tools_named_by_presets() {
    let mut config = Config::new();
    config
        .presets_mut()
        .insert(
            "$ci",
            Preset {
                tools: Some(strings(&["bash", "+gerp", "mcp.*", "$readonly"])),
                auto_approve: Some(strings(&["!bsh", "read"])),
                ..Preset::default()
            },
        )
        .unwrap();
    let registered = names(&["bash", "read", "write", "edit", "find", "grep", "ls"]);
    let issues: Vec<String> = config
        .finalize(&registered)
        .iter()
        .filter(|i| matches!(i, FinalizeIssue::PresetUnknownTool { .. }))
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        issues,
        [
            "Preset '$ci' references unknown tool 'bsh' in auto_approve",
            "Preset '$ci' references unknown tool 'gerp' in tools",
        ]
    );
}

#[test]
fn presets_load_from_flemma_toml() {
    let mut config = Config::new();
    config
        .load_toml_str(
            "[tools]\nauto_approve = [\"$ci\"]\n\n[presets.\"$ci\"]\nauto_approve = [\"bash\", \"flemma.*\"]\nprovider = \"openai\"\nmodel = \"gpt-5\"\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["bash", "flemma.*"])
    );
    let ci = config.presets().get("$ci").unwrap();
    assert_eq!(ci.provider.as_deref(), Some("openai"));
    assert_eq!(ci.model.as_deref(), Some("gpt-5"));

    let err = Config::new()
        .load_toml_str(
            "[presets.\"$Bad\"]\nauto_approve = [\"bash\"]\n",
            "flemma.toml".as_ref(),
        )
        .unwrap_err();
    assert_eq!(
        chain(&err),
        "flemma.toml: invalid preset \"$Bad\": a preset name is `$` followed by a lowercase letter"
    );
    let err = Config::new()
        .load_toml_str(
            "[presets.\"$ci\"]\nauto_aprove = [\"bash\"]\n",
            "flemma.toml".as_ref(),
        )
        .unwrap_err();
    // The serde error is kept, typed, as the cause of the preset's error.
    let ConfigError::InFile { source, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(source.as_ref(), ConfigError::Decode { what, .. } if what == "preset \"$ci\""),
        "{err:?}"
    );
    assert!(
        chain(&err).starts_with(
            "flemma.toml: invalid preset \"$ci\": unknown field `auto_aprove`, expected one of "
        ),
        "{err}"
    );
}
