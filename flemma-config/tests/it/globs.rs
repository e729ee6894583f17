//! Spec §5.4: globs in the `tools` list, expanded against the registered tool names, and the
//! finalize pass reporting what stays unresolved.

use flemma_config::{Config, FinalizeIssue, Layer, glob_match};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{names, strings};

fn registry() -> Vec<flemma_ids::ToolName> {
    names(&[
        "read",
        "bash",
        "flemma.jobs.status",
        "write",
        "flemma.jobs.cancel",
        "mcp.fs.read",
        "edit",
    ])
}

fn messages(issues: &[FinalizeIssue]) -> Vec<String> {
    issues.iter().map(ToString::to_string).collect()
}

#[test]
fn glob_dialect() {
    assert!(glob_match("flemma.*", "flemma.jobs.status"));
    assert!(glob_match("*", "bash"));
    assert!(glob_match("*.read", "mcp.fs.read"));
    assert!(!glob_match("flemma.*", "xflemma.jobs"));
    assert!(!glob_match("bash", "bash2"));
    assert!(!glob_match("fl?mma.*", "flemma.jobs"));
}

#[test]
fn a_glob_expands_in_place_into_sorted_registered_names() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["bash", "flemma.*", "read"]))
        .unwrap();
    let list = config.list_with_tools("tools", &registry());
    assert_eq!(
        list.items,
        strings(&["bash", "flemma.jobs.cancel", "flemma.jobs.status", "read"])
    );
    assert_eq!(list.source, "S");
    // Without a registry the glob stays as written.
    assert_eq!(
        config.list("tools").items,
        strings(&["bash", "flemma.*", "read"])
    );
    let options = config.options_with_tools(&registry()).unwrap();
    assert_eq!(
        options.tools.list,
        strings(&["bash", "flemma.jobs.cancel", "flemma.jobs.status", "read"])
    );
    assert_eq!(
        config.options().unwrap().tools.list,
        strings(&["bash", "flemma.*", "read"])
    );
    assert!(config.finalize(&registry()).is_empty());
}

#[test]
fn globs_work_with_append_prepend_and_remove() {
    let mut config = Config::new();
    config.set(Layer::Setup, "tools", json!(["bash"])).unwrap();
    config.append(Layer::Runtime, "tools", "*.read").unwrap();
    assert_eq!(
        config.list_with_tools("tools", &registry()).items,
        strings(&["bash", "mcp.fs.read"])
    );
    config.prepend(Layer::Runtime, "tools", "flemma.*").unwrap();
    assert_eq!(
        config.list_with_tools("tools", &registry()).items,
        // Prepended one by one: the sorted expansion ends up reversed at the front.
        strings(&[
            "flemma.jobs.status",
            "flemma.jobs.cancel",
            "bash",
            "mcp.fs.read"
        ])
    );
    config
        .set(Layer::Frontmatter, "tools", json!(["!flemma.*", "+*ea*"]))
        .unwrap();
    let list = config.list_with_tools("tools", &registry());
    assert_eq!(list.items, strings(&["bash", "mcp.fs.read", "read"]));
    assert_eq!(list.source, "S+R+F");
}

#[test]
fn a_glob_matching_nothing_is_kept_and_reported() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["bash", "nothing.*"]))
        .unwrap();
    assert_eq!(
        config.list_with_tools("tools", &registry()).items,
        strings(&["bash", "nothing.*"])
    );
    assert_eq!(
        messages(&config.finalize(&registry())),
        ["Glob pattern 'nothing.*' matched no tools"]
    );
    assert_eq!(
        config.finalize(&registry()),
        [FinalizeIssue::GlobMatchedNothing {
            pattern: "nothing.*".into()
        }]
    );
}

#[test]
fn unknown_tools_are_reported_with_a_suggestion_when_close() {
    let mut config = Config::new();
    config
        .set(Layer::Setup, "tools", json!(["bsh", "read", "calculator"]))
        .unwrap();
    assert_eq!(
        messages(&config.finalize(&registry())),
        [
            "Unknown tool 'bsh' -- did you mean 'bash'?",
            "Unknown tool 'calculator'",
        ]
    );
}

#[test]
fn globs_in_auto_approve_are_not_expanded() {
    let mut config = Config::new();
    config
        .set(
            Layer::Setup,
            "tools.auto_approve",
            json!(["flemma.*", "nothing.*"]),
        )
        .unwrap();
    assert_eq!(
        config
            .list_with_tools("tools.auto_approve", &registry())
            .items,
        strings(&["flemma.*", "nothing.*"])
    );
    assert_eq!(
        config
            .options_with_tools(&registry())
            .unwrap()
            .tools
            .auto_approve,
        strings(&["flemma.*", "nothing.*"])
    );
    // An unmatched auto_approve glob approves nothing (spec §5.4), and is reported (issue
    // 35: the spec's "silently" left a typo unnoticed): a warning, nothing stops.
    assert_eq!(
        config.finalize(&registry()),
        [FinalizeIssue::AutoApproveMatchesNothing {
            name: "nothing.*".into(),
            suggestion: None
        }]
    );
}

#[test]
fn tools_named_by_the_defaults_layer_are_implicit() {
    // Spec §5.1: the defaults layer appends every registered, enabled tool.
    let mut config = Config::new();
    for name in ["bash", "read"] {
        config.append(Layer::Defaults, "tools", name).unwrap();
    }
    let options = config.options_with_tools(&registry()).unwrap();
    assert_eq!(options.tools.list, strings(&["bash", "read"]));
    assert!(!options.tools.list_is_explicit);
    config
        .append(Layer::Frontmatter, "tools", "flemma.*")
        .unwrap();
    let options = config.options_with_tools(&registry()).unwrap();
    assert_eq!(
        options.tools.list,
        strings(&["bash", "read", "flemma.jobs.cancel", "flemma.jobs.status"])
    );
    assert!(options.tools.list_is_explicit);
}
