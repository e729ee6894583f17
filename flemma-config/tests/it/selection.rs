//! Spec §5.1-§5.6: a conversation's tool list starts from the DEFAULTS layer's enabled tools;
//! the names it gives are checked, each diagnostic with where it was written.

use flemma_config::{Config, Layer, OptionDiagnostic, Origin};
#[cfg(feature = "lua")]
use flemma_config::{FinalizeIssue, Preset};
use flemma_ids::Severity;
use flemma_ids::ToolName;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{names, strings};

const ENABLED: [&str; 7] = ["bash", "edit", "find", "grep", "ls", "read", "write"];

fn registered() -> Vec<ToolName> {
    let mut all = names(&ENABLED);
    all.extend(names(&[
        "flemma.jobs.status",
        "secret",
        "slack.post",
        "slack.read",
    ]));
    all
}

/// A config whose DEFAULTS layer holds the enabled tools, as the registry sets it.
fn with_defaults() -> Config {
    let mut config = Config::new();
    config.set_tool_defaults(names(&ENABLED));
    config
}

fn without(name: &str) -> Vec<String> {
    ENABLED
        .iter()
        .filter(|n| **n != name)
        .map(|n| (*n).to_owned())
        .collect()
}

fn texts(found: &[OptionDiagnostic]) -> Vec<String> {
    found.iter().map(ToString::to_string).collect()
}

#[test]
fn without_a_layer_above_the_defaults_every_enabled_tool_is_the_list() {
    let config = with_defaults();
    let list = config.list_with_tools("tools", &registered());
    assert_eq!(list.items, strings(&ENABLED));
    assert_eq!(list.source, "D");
    assert!(!list.is_explicit());
    // Removing what is not there is no contribution (spec §5.2).
    let mut config = with_defaults();
    config
        .remove(Layer::Frontmatter, "tools", "secret")
        .unwrap();
    assert_eq!(config.list("tools").source, "D");
}

#[cfg(feature = "lua")] // the frontmatter is Lua
#[test]
fn remove_and_minus_take_from_the_defaults() {
    for code in [
        "flemma.opt.tools:remove(\"write\")",
        "flemma.opt.tools = flemma.opt.tools - \"write\"",
    ] {
        let mut config = with_defaults();
        config.apply_frontmatter("lua", code, 2).unwrap();
        let options = config.options_with_tools(&registered()).unwrap();
        assert_eq!(options.tools.list, without("write"), "{code}");
        assert!(options.tools.list_is_explicit, "{code}");
        assert_eq!(config.list("tools").source, "D+F", "{code}");
    }
}

#[cfg(feature = "lua")] // the frontmatter is Lua
#[test]
fn append_and_plus_add_to_the_defaults() {
    for (code, added) in [
        ("flemma.opt.tools:append(\"secret\")", "secret"),
        ("flemma.opt.tools = flemma.opt.tools + \"secret\"", "secret"),
        // Appending a default moves it to the end; the set is the same.
        ("flemma.opt.tools:append(\"grep\")", "grep"),
        ("flemma.opt.tools = flemma.opt.tools + \"read\"", "read"),
    ] {
        let mut config = with_defaults();
        config.apply_frontmatter("lua", code, 2).unwrap();
        let mut expected = without(added);
        expected.push(added.to_owned());
        assert_eq!(config.list("tools").items, expected, "{code}");
        assert_eq!(config.list("tools").source, "D+F", "{code}");
    }
}

#[test]
fn json_operators_and_runtime_sets_start_from_the_defaults() {
    let mut config = with_defaults();
    config
        .apply_frontmatter("json", r#"{"flemma": {"tools": ["!write", "+secret"]}}"#, 2)
        .unwrap();
    let mut expected = without("write");
    expected.push("secret".to_owned());
    assert_eq!(config.list("tools").items, expected);

    // `flemma --set 'tools=["!write"]'`
    let mut config = with_defaults();
    config
        .set(Layer::Runtime, "tools", json!(["!write"]))
        .unwrap();
    let list = config.list("tools");
    assert_eq!(
        (list.items, list.source.as_str()),
        (without("write"), "D+R")
    );

    // A list of bare names replaces the defaults; an empty one means no tools.
    let mut config = with_defaults();
    config
        .set(Layer::Runtime, "tools", json!(["bash", "read"]))
        .unwrap();
    assert_eq!(config.list("tools").items, strings(&["bash", "read"]));
    config.set(Layer::Frontmatter, "tools", json!([])).unwrap();
    let list = config.list("tools");
    assert!(list.items.is_empty() && list.is_explicit());
}

#[test]
fn globs_remove_and_append_against_the_registered_names() {
    let mut config = with_defaults();
    config.remove(Layer::Frontmatter, "tools", "*e*").unwrap();
    config
        .append(Layer::Frontmatter, "tools", "slack.*")
        .unwrap();
    assert_eq!(
        config.list_with_tools("tools", &registered()).items,
        strings(&["bash", "find", "ls", "slack.post", "slack.read"])
    );
    assert!(config.diagnostics(&registered()).is_empty());
}

#[test]
fn the_defaults_are_replaced_not_added_to() {
    let mut config = with_defaults();
    config.set_tool_defaults(names(&["bash"]));
    config.set_tool_defaults(names(&["bash", "read"]));
    let list = config.list("tools");
    assert_eq!(
        (list.items, list.source.as_str()),
        (strings(&["bash", "read"]), "D")
    );
    // The other lists of the DEFAULTS layer stay.
    assert_eq!(config.list("tools.auto_approve").source, "D");
    assert!(
        config
            .list("tools.auto_approve")
            .items
            .contains(&"flemma.*".to_owned())
    );
}

#[cfg(feature = "lua")] // the frontmatter is Lua
#[test]
fn lua_diagnostics_carry_the_line_of_the_statement() {
    let mut config = with_defaults();
    let code = "-- tools\nflemma.opt.tools = {\"bash\", \"reed\"}\n\
                flemma.opt.tools:append(\"nomatch.*\")\n\
                flemma.opt.tools:remove(\"wirte\")\n\
                flemma.opt.tools:append(\"calculator\")\n";
    config.apply_frontmatter("lua", code, 2).unwrap();
    let found = config.diagnostics(&registered());
    assert_eq!(
        texts(&found),
        [
            "line 3: Unknown tool 'reed' -- did you mean 'read'?",
            "line 4: Glob pattern 'nomatch.*' matched no tools",
            "line 5: Unknown tool 'wirte' -- did you mean 'write'?",
            "line 6: Unknown tool 'calculator'",
        ]
    );
    assert!(found.iter().all(|d| d.severity() == Severity::Error));
    assert_eq!(found[0].origin, Some(Origin::Frontmatter { line: 3 }));
    assert_eq!(found[0].frontmatter_line(), Some(3));
    assert_eq!(
        found[0].issue,
        FinalizeIssue::UnknownTool {
            name: "reed".into(),
            suggestion: Some("read".into()),
        }
    );
    // The list itself keeps what it can: the unknown names are offered by no tool.
    assert_eq!(
        config.list_with_tools("tools", &registered()).items,
        strings(&["bash", "reed", "nomatch.*", "calculator"])
    );
}

#[test]
fn json_diagnostics_carry_the_line_of_the_key() {
    let code = "{\n  \"name\": \"Ada\",\n  \"flemma\": {\n    \"tools\": {\n      \"auto_approve\": [\"$redonly\"],\n      \"list\": [\"bash\", \"reed\"]\n    },\n    \"tools.calculatr.base\": 10\n  }\n}";
    let mut config = Config::new();
    config.set_tool_defaults(names(&["bash", "read"]));
    config.apply_frontmatter("json", code, 2).unwrap();
    let found = config.diagnostics(&names(&["bash", "read", "calculator"]));
    assert_eq!(
        texts(&found),
        [
            "line 7: Unknown tool 'reed' -- did you mean 'read'?",
            "line 6: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?",
            "line 9: Options for unknown tool 'calculatr' in tools.calculatr -- did you mean 'calculator'?",
        ]
    );
    let severities: Vec<Severity> = found.iter().map(OptionDiagnostic::severity).collect();
    assert_eq!(
        severities,
        [Severity::Error, Severity::Warning, Severity::Warning]
    );

    // A key the search cannot find falls back to the line of the `"flemma"` key.
    let mut config = with_defaults();
    config
        .apply_frontmatter("json", "{\n\"flemma\":\n{\"tools\"\n:\n[\"reed\"]}}", 2)
        .unwrap();
    assert_eq!(
        config.diagnostics(&registered())[0].origin,
        Some(Origin::Frontmatter { line: 3 })
    );
}

#[test]
fn toml_and_runtime_diagnostics_say_their_origin() {
    let mut config = with_defaults();
    config
        .load_toml_str(
            "# options\n[tools]\nmax_concurrent = 4\nlist = [\"bash\", \"bsh\"]\n",
            "flemma.toml".as_ref(),
        )
        .unwrap();
    config
        .set(Layer::Runtime, "tools", json!(["+x.*"]))
        .unwrap();
    let found = config.diagnostics(&registered());
    assert_eq!(
        found.iter().map(|d| d.origin.clone()).collect::<Vec<_>>(),
        [
            Some(Origin::File {
                path: "flemma.toml".into(),
                line: Some(4)
            }),
            Some(Origin::Layer(Layer::Runtime)),
        ]
    );
    assert_eq!(
        texts(&found),
        [
            "flemma.toml:4: Unknown tool 'bsh' -- did you mean 'bash'?",
            "Glob pattern 'x.*' matched no tools",
        ]
    );
    assert_eq!(
        found[0].origin.as_ref().map(Origin::layer),
        Some(Layer::Setup)
    );
    // Writes after the file are not placed in it.
    config.append(Layer::Setup, "tools", "zzz").unwrap();
    let zzz = config
        .diagnostics(&registered())
        .into_iter()
        .find(|d| d.to_string().starts_with("Unknown tool 'zzz'"))
        .unwrap();
    assert_eq!(zzz.origin, Some(Origin::Layer(Layer::Setup)));
}

#[cfg(feature = "lua")] // the frontmatter is Lua
#[test]
fn presets_in_tools_are_checked_after_expansion() {
    let mut config = with_defaults();
    config
        .presets_mut()
        .insert(
            "$ci",
            Preset {
                tools: Some(strings(&["bash", "reed"])),
                ..Preset::default()
            },
        )
        .unwrap();
    config
        .apply_frontmatter("lua", "flemma.opt.tools = {\"$ci\", \"$nope\"}", 2)
        .unwrap();
    let found = config.diagnostics(&registered());
    assert_eq!(
        texts(&found),
        [
            "line 2: Unknown tool 'reed' -- did you mean 'read'?",
            "line 2: Unknown preset '$nope' in tools",
            "Preset '$ci' references unknown tool 'reed' in tools",
        ]
    );
    let severities: Vec<Severity> = found.iter().map(OptionDiagnostic::severity).collect();
    assert_eq!(
        severities,
        [Severity::Error, Severity::Error, Severity::Warning]
    );
    assert_eq!(found[2].origin, None);
}

#[test]
fn a_failed_frontmatter_leaves_no_place_behind() {
    let mut config = with_defaults();
    assert!(
        config
            .apply_frontmatter(
                "lua",
                "flemma.opt.tools:append(\"reed\")\nflemma.opt.tools.max_concurent = 4",
                2
            )
            .is_err()
    );
    config.append(Layer::Frontmatter, "tools", "reed").unwrap();
    assert_eq!(
        config.diagnostics(&registered())[0].origin,
        Some(Origin::Layer(Layer::Frontmatter))
    );
}

#[test]
fn a_preset_from_a_file_is_placed_at_its_table() {
    let mut config = with_defaults();
    config
        .load_toml_str(
            "[tools]\nauto_approve = [\"$ci\"]\n\n[presets.\"$ci\"]\nauto_approve = [\"bash\", \"deploy\"]\n",
            "ci.toml".as_ref(),
        )
        .unwrap();
    let found = config.diagnostics(&registered());
    assert_eq!(
        texts(&found),
        ["ci.toml:4: Preset '$ci' references unknown tool 'deploy' in auto_approve"]
    );
    assert_eq!(found[0].severity(), Severity::Warning);
}

#[test]
fn a_huge_json_frontmatter_is_not_searched_for_key_lines() {
    // Each key would be looked for through the whole text: past 256 KiB the diagnostics point
    // at the `"flemma"` key.
    let padding = "x".repeat(300 << 10);
    let code = format!(
        "{{\n  \"pad\": \"{padding}\",\n  \"flemma\": {{\n    \"tools\": [\"reed\"]\n  }}\n}}"
    );
    let mut config = with_defaults();
    config.apply_frontmatter("json", &code, 2).unwrap();
    assert_eq!(
        config.diagnostics(&registered())[0].origin,
        Some(Origin::Frontmatter { line: 4 })
    );
    // A TOML file's lines come from its parser, whatever its size.
    let toml = format!("# {padding}\n\n[tools]\nlist = [\"reed\"]\n");
    let mut config = with_defaults();
    config.load_toml_str(&toml, "big.toml".as_ref()).unwrap();
    assert_eq!(
        config.diagnostics(&registered())[0].origin,
        Some(Origin::File {
            path: "big.toml".into(),
            line: Some(4)
        })
    );
}
