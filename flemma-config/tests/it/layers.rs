//! Spec §5.2: replaying the four layers — ownership by `set`, moves by append/prepend,
//! removes, source indicators, scalars.

use flemma_config::{Config, Layer};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::strings;

const STANDARD: [&str; 7] = ["read", "write", "edit", "find", "grep", "ls", "flemma.*"];

#[test]
fn layer_letters() {
    let letters: String = [
        Layer::Defaults,
        Layer::Setup,
        Layer::Runtime,
        Layer::Frontmatter,
    ]
    .iter()
    .map(|l| l.letter())
    .collect();
    assert_eq!(letters, "DSRF");
    assert!(Layer::Defaults < Layer::Setup);
    assert!(Layer::Runtime < Layer::Frontmatter);
}

#[test]
fn contributions_accumulate_and_set_takes_ownership() {
    let mut config = Config::new();
    let list = config.list("tools.auto_approve");
    assert_eq!(list.items, strings(&STANDARD));
    assert_eq!(list.source, "D");
    assert!(!list.is_explicit());

    config
        .append(Layer::Frontmatter, "tools.auto_approve", "bash")
        .unwrap();
    assert_eq!(config.list("tools.auto_approve").source, "D+F");

    config
        .append(Layer::Setup, "tools.auto_approve", "mcp.*")
        .unwrap();
    let list = config.list("tools.auto_approve");
    let mut expected = strings(&STANDARD);
    expected.extend(strings(&["mcp.*", "bash"]));
    assert_eq!(list.items, expected);
    assert_eq!(list.source, "D+S+F");

    // A set in the runtime layer replaces everything below; the frontmatter append still applies.
    config
        .set(Layer::Runtime, "tools.auto_approve", json!(["read"]))
        .unwrap();
    let list = config.list("tools.auto_approve");
    assert_eq!(list.items, strings(&["read", "bash"]));
    assert_eq!(list.source, "R+F");

    // A set in the frontmatter owns the list alone.
    config
        .set(Layer::Frontmatter, "tools.auto_approve", json!(["grep"]))
        .unwrap();
    let list = config.list("tools.auto_approve");
    assert_eq!(list.items, strings(&["grep"]));
    assert_eq!(list.source, "F");
    assert!(list.is_explicit());
}

#[test]
fn layers_replay_in_precedence_order_not_write_order() {
    let mut config = Config::new();
    config.append(Layer::Frontmatter, "tools", "x").unwrap();
    config.set(Layer::Setup, "tools", json!(["a"])).unwrap();
    config.prepend(Layer::Runtime, "tools", "r").unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["r", "a", "x"]));
    assert_eq!(list.source, "S+R+F");
}

#[test]
fn append_and_prepend_move_existing_equal_items() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["a", "b", "c"]))
        .unwrap();
    config.append(Layer::Runtime, "tools", "a").unwrap();
    assert_eq!(config.list("tools").items, strings(&["b", "c", "a"]));
    config.prepend(Layer::Runtime, "tools", "c").unwrap();
    assert_eq!(config.list("tools").items, strings(&["c", "b", "a"]));
    config.append(Layer::Frontmatter, "tools", "a").unwrap();
    assert_eq!(config.list("tools").items, strings(&["c", "b", "a"]));
    assert_eq!(config.list("tools").source, "S+R+F");
}

#[test]
fn remove_deletes_the_first_equal_item_only() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["a", "b", "a"]))
        .unwrap();
    config.remove(Layer::Runtime, "tools", "a").unwrap();
    assert_eq!(config.list("tools").items, strings(&["b", "a"]));
}

#[test]
fn removing_an_absent_item_is_a_no_op_and_no_contribution() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["a", "b"]))
        .unwrap();
    config.remove(Layer::Frontmatter, "tools", "zzz").unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["a", "b"]));
    assert_eq!(list.source, "S");

    // On the defaults alone, the list stays implicit.
    let mut config = Config::new();
    config.append(Layer::Defaults, "tools", "bash").unwrap();
    config.remove(Layer::Frontmatter, "tools", "grep").unwrap();
    let list = config.list("tools");
    assert_eq!(list.items, strings(&["bash"]));
    assert_eq!(list.source, "D");
    assert!(!list.is_explicit());

    // A remove that does remove is a contribution.
    config.remove(Layer::Frontmatter, "tools", "bash").unwrap();
    let list = config.list("tools");
    assert!(list.items.is_empty());
    assert_eq!(list.source, "D+F");
    assert!(list.is_explicit());
}

#[test]
fn is_explicit_for_the_tool_list() {
    let mut config = Config::new();
    config.append(Layer::Defaults, "tools", "bash").unwrap();
    config.append(Layer::Defaults, "tools", "read").unwrap();
    assert!(!config.list("tools").is_explicit());
    assert!(!config.options().unwrap().tools.list_is_explicit);

    config.append(Layer::Setup, "tools", "calculator").unwrap();
    assert!(config.list("tools").is_explicit());
    assert!(config.options().unwrap().tools.list_is_explicit);

    // An explicitly empty list means no tools.
    let mut config = Config::new();
    config.append(Layer::Defaults, "tools", "bash").unwrap();
    config.set(Layer::Frontmatter, "tools", json!([])).unwrap();
    let options = config.options().unwrap();
    assert!(options.tools.list.is_empty());
    assert!(options.tools.list_is_explicit);
}

#[test]
fn scalars_take_the_highest_layer_and_the_last_write_in_it() {
    let mut config = Config::new();
    assert_eq!(config.scalar("tools.max_concurrent").unwrap(), json!(2));
    config.set(Layer::Setup, "tools.max_concurrent", 3).unwrap();
    config
        .set(Layer::Runtime, "tools.max_concurrent", 5)
        .unwrap();
    // A later write to a lower layer does not beat a higher one.
    config.set(Layer::Setup, "tools.max_concurrent", 7).unwrap();
    assert_eq!(config.scalar("tools.max_concurrent").unwrap(), json!(5));
    config
        .set(Layer::Frontmatter, "tools.max_concurrent", 8)
        .unwrap();
    config
        .set(Layer::Frontmatter, "tools.max_concurrent", 9)
        .unwrap();
    assert_eq!(config.scalar("tools.max_concurrent").unwrap(), json!(9));
    assert_eq!(config.options().unwrap().tools.max_concurrent, 9);

    config.clear_layer(Layer::Frontmatter);
    assert_eq!(config.scalar("tools.max_concurrent").unwrap(), json!(5));
    config.clear_layer(Layer::Runtime);
    assert_eq!(config.scalar("tools.max_concurrent").unwrap(), json!(7));
}

#[test]
fn a_runtime_sandbox_setting_beats_the_frontmatter() {
    // Spec §14.1: runtime override beats frontmatter beats global config, for
    // `sandbox.enabled` only.
    // The spec's layering, with a host that lets frontmatters widen the sandbox (issue 34:
    // by default a frontmatter's `false` is not taken; see below).
    for (runtime, frontmatter) in [(false, true), (true, false)] {
        let mut config = Config::new();
        config.allow_frontmatter_widening(true);
        config.set(Layer::Setup, "sandbox", !runtime).unwrap();
        config
            .set(Layer::Runtime, "sandbox.enabled", runtime)
            .unwrap();
        config
            .set(
                Layer::Frontmatter,
                "sandbox",
                json!({ "enabled": frontmatter }),
            )
            .unwrap();
        assert_eq!(config.scalar("sandbox.enabled").unwrap(), json!(runtime));
        assert_eq!(config.options().unwrap().sandbox.enabled, runtime);
        config.clear_layer(Layer::Runtime);
        assert_eq!(config.options().unwrap().sandbox.enabled, frontmatter);
        config.clear_layer(Layer::Frontmatter);
        assert_eq!(config.options().unwrap().sandbox.enabled, !runtime);
    }
    // By default a frontmatter only narrows: its `false` under a host's `true` is not taken.
    let mut config = Config::new();
    config
        .set(Layer::Frontmatter, "sandbox", json!({ "enabled": false }))
        .unwrap();
    assert!(config.options().unwrap().sandbox.enabled);
    // Other options keep the frontmatter on top.
    let mut config = Config::new();
    config.allow_frontmatter_widening(true);
    config
        .set(Layer::Runtime, "sandbox.backend", "bwrap")
        .unwrap();
    config
        .set(Layer::Frontmatter, "sandbox.backend", "required")
        .unwrap();
    assert_eq!(config.options().unwrap().sandbox.backend, "required");
}

#[test]
fn tables_set_each_key() {
    let mut config = Config::new();
    config
        .set(
            Layer::Setup,
            "tools",
            json!({"max_concurrent": 4, "list": ["bash"], "autopilot": {"max_turns": 5}}),
        )
        .unwrap();
    let options = config.options().unwrap();
    assert_eq!(options.tools.max_concurrent, 4);
    assert_eq!(options.tools.list, strings(&["bash"]));
    assert_eq!(options.tools.autopilot.max_turns, 5);
    assert!(options.tools.autopilot.enabled);
}

#[test]
fn unknown_options_and_wrong_types_are_rejected() {
    let mut config = Config::new();
    let err = config
        .set(Layer::Runtime, "tools.max_concurent", 3)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown option `tools.max_concurent` -- did you mean `tools.max_concurrent`?"
    );
    let err = config
        .set(Layer::Runtime, "tools.max_concurrent", -1)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "option `tools.max_concurrent` expects a non-negative integer, got -1"
    );
    let err = config
        .set(Layer::Runtime, "sandbox.enabled", "yes")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "option `sandbox.enabled` expects a boolean, got \"yes\""
    );
    assert!(!config.layer_has_set(Layer::Runtime, "tools.max_concurrent"));
    assert!(!config.layer_has_set(Layer::Runtime, "sandbox.enabled"));
}

#[test]
fn generation_advances_on_every_change() {
    let mut config = Config::new();
    let g0 = config.generation();
    config.append(Layer::Runtime, "tools", "bash").unwrap();
    let g1 = config.generation();
    assert!(g1 > g0);
    config.clear_layer(Layer::Runtime);
    assert!(config.generation() > g1);
}
