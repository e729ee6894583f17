//! Spec §5.2 / §6.4: intent queries on the op logs (`layer_has_set`, `layer_has_op`), which the
//! sandbox resolver uses instead of the resolved list.

use flemma_config::{Config, Layer, OpKind, Preset};
use serde_json::json;

use crate::strings;

#[test]
fn a_list_set_is_a_set_and_an_operator_list_is_not() {
    let mut config = Config::new();
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    // The defaults layer writes the default list.
    assert!(config.layer_has_set(Layer::Defaults, "tools.auto_approve"));

    config
        .set(Layer::Frontmatter, "tools", json!(["!bash"]))
        .unwrap();
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools"));
    assert!(config.layer_has_op(Layer::Frontmatter, OpKind::Remove, "tools", Some("bash")));
    assert!(!config.layer_has_op(Layer::Frontmatter, OpKind::Remove, "tools", Some("grep")));
    assert!(!config.layer_has_op(Layer::Frontmatter, OpKind::Set, "tools", None));

    config
        .set(Layer::Frontmatter, "tools.auto_approve", json!(["read"]))
        .unwrap();
    assert!(config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Set,
        "tools.auto_approve",
        Some("read")
    ));
    assert!(!config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Set,
        "tools.auto_approve",
        Some("bash")
    ));
    // Other layers are not affected.
    assert!(!config.layer_has_set(Layer::Setup, "tools.auto_approve"));
    assert!(!config.layer_has_set(Layer::Runtime, "tools"));
}

#[test]
fn a_remove_that_removes_nothing_is_still_an_intent() {
    let mut config = Config::new();
    config
        .remove(Layer::Frontmatter, "tools.auto_approve", "bash")
        .unwrap();
    // Nothing was removed from the resolved list …
    assert_eq!(config.list("tools.auto_approve").source, "D");
    // … but the conversation said it.
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Remove,
        "tools.auto_approve",
        Some("bash")
    ));
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Remove,
        "tools.auto_approve",
        None
    ));
    assert!(!config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Append,
        "tools.auto_approve",
        None
    ));
}

#[test]
fn a_remove_through_a_preset_reference_removes_each_item() {
    let mut config = Config::new();
    config
        .remove(Layer::Frontmatter, "tools.auto_approve", "$readonly")
        .unwrap();
    for name in ["read", "find", "grep", "ls"] {
        assert!(
            config.layer_has_op(
                Layer::Frontmatter,
                OpKind::Remove,
                "tools.auto_approve",
                Some(name)
            ),
            "{name}"
        );
    }
    assert!(!config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Remove,
        "tools.auto_approve",
        Some("write")
    ));
    assert!(!config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Remove,
        "tools.auto_approve",
        Some("$readonly")
    ));
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["write", "edit", "flemma.*"])
    );

    // A preset whose field is a remove: writing `["$nobash"]` is a remove of `bash`, not a set.
    let mut config = Config::new();
    config
        .presets_mut()
        .insert(
            "$nobash",
            Preset {
                auto_approve: Some(strings(&["!bash"])),
                ..Preset::default()
            },
        )
        .unwrap();
    config
        .set(Layer::Frontmatter, "tools.auto_approve", json!(["$nobash"]))
        .unwrap();
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Remove,
        "tools.auto_approve",
        Some("bash")
    ));
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
}

#[test]
fn a_set_through_a_preset_reference_holds_the_expanded_items() {
    let mut config = Config::new();
    config
        .set(
            Layer::Frontmatter,
            "tools.auto_approve",
            json!(["$readonly"]),
        )
        .unwrap();
    assert!(config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    assert!(config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Set,
        "tools.auto_approve",
        Some("grep")
    ));
    assert!(!config.layer_has_op(
        Layer::Frontmatter,
        OpKind::Set,
        "tools.auto_approve",
        Some("write")
    ));
}

#[test]
fn intent_queries_follow_aliases() {
    let mut config = Config::new();
    config
        .append(Layer::Runtime, "tools.approve", "bash")
        .unwrap();
    assert!(config.layer_has_op(
        Layer::Runtime,
        OpKind::Append,
        "tools.auto_approve",
        Some("bash")
    ));
    assert!(config.layer_has_op(
        Layer::Runtime,
        OpKind::Append,
        "tools.approve",
        Some("bash")
    ));
    config
        .set(Layer::Setup, "tools.list", json!(["bash"]))
        .unwrap();
    assert!(config.layer_has_set(Layer::Setup, "tools"));
}

#[test]
fn scalar_sets_are_sets_of_their_layer_only() {
    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools.max_concurrent", 4)
        .unwrap();
    assert!(config.layer_has_set(Layer::Runtime, "tools.max_concurrent"));
    assert!(!config.layer_has_set(Layer::Setup, "tools.max_concurrent"));
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools.max_concurrent"));

    config.set(Layer::Frontmatter, "sandbox", false).unwrap();
    assert!(config.layer_has_set(Layer::Frontmatter, "sandbox.enabled"));
}
