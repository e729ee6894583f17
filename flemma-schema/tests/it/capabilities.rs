//! Capability tags (spec §4.6): the built-in tools declare them, the harness parameters follow
//! them, and their serde names are the spec's tags.

use flemma_schema::{Capabilities, Capability, HarnessParameters, builtin};
use pretty_assertions::assert_eq;
use serde_json::json;

#[test]
fn the_builtins_declare_the_spec_capabilities() {
    let declared: Vec<(&str, serde_json::Value)> = builtin::all()
        .iter()
        .filter(|b| !b.capabilities.is_empty())
        .map(|b| (b.name, serde_json::to_value(b.capabilities).unwrap()))
        .collect();
    assert_eq!(
        declared,
        [
            ("bash", json!(["auto_approves_if_sandboxed"])),
            (
                "flemma.jobs.status",
                json!(["disables_background", "disables_save_to"])
            ),
            ("read", json!(["emits_template"])),
        ]
    );
    let template_tools: Vec<&str> = builtin::with_capability(Capability::EmitsTemplate)
        .map(|b| b.name)
        .collect();
    assert_eq!(template_tools, ["read"]);
    assert!(!builtin::has_capability("nope", Capability::EmitsTemplate));
    assert_eq!(builtin::all(), builtin::builtins());
}

#[test]
fn harness_parameters_follow_the_capabilities() {
    let jobs = Capabilities::of(&[Capability::DisablesBackground, Capability::DisablesSaveTo]);
    let cases = [
        (true, Capabilities::NONE, (true, true)),
        (false, Capabilities::NONE, (false, true)),
        (
            true,
            Capabilities::NONE.with(Capability::DisablesBackground),
            (false, true),
        ),
        (
            true,
            Capabilities::NONE.with(Capability::DisablesSaveTo),
            (true, false),
        ),
        (true, jobs, (false, false)),
        (
            true,
            Capabilities::of(&[Capability::EmitsTemplate]),
            (true, true),
        ),
    ];
    for (is_async, capabilities, (background, save_to)) in cases {
        assert_eq!(
            HarnessParameters::from_capabilities(is_async, capabilities),
            HarnessParameters {
                background,
                save_to
            },
            "{is_async} {capabilities:?}"
        );
    }
}

#[test]
fn capability_sets_read_and_write_the_spec_tags() {
    let all: Capabilities = Capability::ALL.into_iter().collect();
    let tags = json!([
        "auto_approves_if_sandboxed",
        "emits_template",
        "disables_background",
        "disables_save_to"
    ]);
    assert_eq!(serde_json::to_value(all).unwrap(), tags);
    assert_eq!(serde_json::from_value::<Capabilities>(tags).unwrap(), all);
    assert_eq!(
        Capability::ALL.map(Capability::as_str).to_vec(),
        [
            "auto_approves_if_sandboxed",
            "emits_template",
            "disables_background",
            "disables_save_to"
        ]
    );
    assert!(
        serde_json::from_value::<Capabilities>(json!(["can_auto_approve_if_sandboxed"])).is_err()
    );
    assert_eq!(
        format!("{:?}", Capabilities::of(&[Capability::EmitsTemplate])),
        "{EmitsTemplate}"
    );
}
