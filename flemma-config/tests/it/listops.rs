//! Spec §5.3: op-prefix list syntax, the four pinned examples, and the parse rules.

use flemma_config::{Config, ConfigError, Layer, ListOp, Preset, parse_list};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{config_with_small_standard, strings};

fn none(_: &str) -> Option<Vec<String>> {
    None
}

#[test]
fn remove_item_on_a_lower_layer_list() {
    // `{"!bash"}` on `{bash, grep, read}` → `{grep, read}`.
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["bash", "grep", "read"]))
        .unwrap();
    config
        .set(Layer::Frontmatter, "tools", json!(["!bash"]))
        .unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["grep", "read"]));
    assert_eq!(list.source, "S+F");
}

#[test]
fn bare_preset_and_remove_in_one_write() {
    // `{"bash", "$standard", "!edit"}` with `$standard = {read, write, edit}` → `{bash, read, write}`.
    let mut config = config_with_small_standard();
    config
        .set(
            Layer::Runtime,
            "tools",
            json!(["bash", "$standard", "!edit"]),
        )
        .unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["bash", "read", "write"]));
    assert_eq!(list.source, "R");

    // The same write on `tools.auto_approve` spreads the preset's `auto_approve` field.
    config
        .set(
            Layer::Frontmatter,
            "tools.auto_approve",
            json!(["bash", "$standard", "!edit"]),
        )
        .unwrap();
    assert_eq!(
        config.list("tools.auto_approve").items,
        strings(&["bash", "read", "write"])
    );
}

#[test]
fn prepending_a_preset_reverses_it_onto_the_front() {
    // prepend `$standard` onto `{bash}` → `{edit, write, read, bash}`.
    let mut config = config_with_small_standard();
    config.set(Layer::Setup, "tools", json!(["bash"])).unwrap();
    config
        .prepend(Layer::Runtime, "tools", "$standard")
        .unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["edit", "write", "read", "bash"]));
    assert_eq!(list.source, "S+R");
}

#[test]
fn removing_a_preset_removes_each_of_its_items() {
    // remove `$standard` from `{read, write, edit, bash}` → `{bash}`.
    let mut config = config_with_small_standard();
    config
        .set(
            Layer::Setup,
            "tools",
            json!(["read", "write", "edit", "bash"]),
        )
        .unwrap();
    config
        .remove(Layer::Frontmatter, "tools", "$standard")
        .unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["bash"]));
    assert_eq!(list.source, "S+F");
}

#[test]
fn appending_a_preset_appends_each_item_in_order() {
    let mut config = config_with_small_standard();
    config
        .set(Layer::Setup, "tools", json!(["write", "bash"]))
        .unwrap();
    config.append(Layer::Runtime, "tools", "$standard").unwrap();
    assert_eq!(
        config.list("tools").items,
        strings(&["bash", "read", "write", "edit"])
    );
}

#[test]
fn written_operators_apply_in_declaration_order_after_the_set() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["a", "b", "c"]))
        .unwrap();
    // Only operators: no set, applied onto the lower layer in order.
    config
        .set(Layer::Runtime, "tools", json!(["+d", "^a", "!b", "+c"]))
        .unwrap();
    assert_eq!(config.list("tools").items, strings(&["a", "d", "c"]));
    assert_eq!(config.list("tools").source, "S+R");

    // One bare value: the set replaces the list first, the operators follow, wherever written.
    config
        .set(Layer::Frontmatter, "tools", json!(["+x", "y", "^z"]))
        .unwrap();
    assert_eq!(config.list("tools").items, strings(&["z", "y", "x"]));
    assert_eq!(config.list("tools").source, "F");
}

#[test]
fn empty_list_sets_to_empty() {
    let mut config = Config::new();
    config.set(Layer::Setup, "tools", json!(["bash"])).unwrap();
    config.set(Layer::Frontmatter, "tools", json!([])).unwrap();
    let list = config.list("tools");
    assert!(list.items.is_empty());
    assert_eq!(list.source, "F");
    assert!(list.is_explicit());
}

#[test]
fn a_bare_string_is_a_one_element_list() {
    // Spec §18.14.
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools.auto_approve", json!("bash"))
        .unwrap();
    assert_eq!(config.list("tools.auto_approve").items, strings(&["bash"]));
    config
        .set(Layer::Runtime, "tools.auto_approve", json!("!bash"))
        .unwrap();
    assert!(config.list("tools.auto_approve").items.is_empty());
}

#[test]
fn short_items_upper_case_refs_and_lone_sigils_are_bare_values() {
    let mut config = Config::new();
    config
        .set(
            Layer::Setup,
            "tools",
            json!(["+", "!", "^", "$", "$Upper", "$1x"]),
        )
        .unwrap();
    assert_eq!(
        config.list("tools").items,
        strings(&["+", "!", "^", "$", "$Upper", "$1x"])
    );
}

#[test]
fn non_string_items_are_a_type_error() {
    let mut config = Config::new();
    let err = config
        .set(Layer::Setup, "tools", json!(["bash", 3]))
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::Type { path, .. } if path == "tools"),
        "{err:?}"
    );
    assert_eq!(config.list("tools").source, "D", "nothing was written");
}

#[test]
fn composed_operators_are_errors_naming_the_item() {
    for bad in ["+^x", "!$std", "!+x", "^$ro"] {
        let mut config = Config::new();
        let err = config
            .set(Layer::Setup, "tools.auto_approve", json!(["read", bad]))
            .unwrap_err();
        match &err {
            ConfigError::InvalidListItem { path, item, .. } => {
                assert_eq!(path, "tools.auto_approve");
                assert_eq!(item, bad);
            }
            other => panic!("{bad}: expected InvalidListItem, got {other:?}"),
        }
        assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        // The failed write left nothing behind.
        assert_eq!(config.list("tools.auto_approve").source, "D");
        assert!(!config.layer_has_set(Layer::Setup, "tools.auto_approve"));
    }
}

#[test]
fn parse_list_follows_the_spec_rules() {
    // Only operators: no set.
    assert_eq!(
        parse_list("tools", &["!bash"], &none).unwrap(),
        [ListOp::Remove("bash".into())]
    );
    // No items at all: set to empty.
    assert_eq!(
        parse_list::<&str>("tools", &[], &none).unwrap(),
        [ListOp::Set(vec![])]
    );
    // Unknown references stay verbatim in the set.
    assert_eq!(
        parse_list("tools", &["$nope", "^a", "+b"], &none).unwrap(),
        [
            ListOp::Set(vec!["$nope".into()]),
            ListOp::Prepend("a".into()),
            ListOp::Append("b".into()),
        ]
    );
    // A reference resolving to operators contributes operators, not a set.
    let nobash = |name: &str| (name == "$nobash").then(|| strings(&["!bash", "+grep"]));
    assert_eq!(
        parse_list("tools", &["$nobash"], &nobash).unwrap(),
        [ListOp::Remove("bash".into()), ListOp::Append("grep".into())]
    );
    // A reference resolving to nothing: the write is `{}`, set to empty.
    let empty = |_: &str| Some(Vec::new());
    assert_eq!(
        parse_list("tools", &["$readonly"], &empty).unwrap(),
        [ListOp::Set(vec![])]
    );
}

#[test]
fn preset_whose_field_carries_operators() {
    let mut config = Config::new();
    config
        .presets_mut()
        .insert(
            "$nobash",
            Preset {
                tools: Some(strings(&["!bash"])),
                ..Preset::default()
            },
        )
        .unwrap();
    config
        .set(Layer::Setup, "tools", json!(["bash", "grep", "read"]))
        .unwrap();
    config
        .set(Layer::Frontmatter, "tools", json!(["$nobash"]))
        .unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["grep", "read"]));
    assert_eq!(list.source, "S+F");
    assert!(!config.layer_has_set(Layer::Frontmatter, "tools"));
}

#[test]
fn list_operations_on_a_scalar_are_rejected() {
    let mut config = Config::new();
    let err = config
        .append(Layer::Setup, "tools.max_concurrent", "3")
        .unwrap_err();
    assert!(matches!(err, ConfigError::NotAList { .. }), "{err:?}");
    let err = config
        .remove(Layer::Setup, "tools.max_concurent", "3")
        .unwrap_err();
    assert!(matches!(err, ConfigError::UnknownOption { .. }), "{err:?}");
}
