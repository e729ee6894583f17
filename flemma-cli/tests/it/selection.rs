//! Spec §5.1-§5.6 through the command: the tool set starts from every enabled tool, and
//! misspelled names, globs matching nothing and unknown presets are reported with their
//! places by `check`, and stop `tools`, `request`, `cycle` and `run`.

use std::path::Path;

use pretty_assertions::assert_eq;

use crate::scratch::Scratch;
use crate::{flemma, scratch, text};

const ALL: [&str; 8] = [
    "bash",
    "edit",
    "find",
    "flemma.jobs.status",
    "grep",
    "ls",
    "read",
    "write",
];

fn chat(test: &str, frontmatter: &str) -> Scratch {
    scratch(
        &format!("selection-{test}.chat"),
        format!("{frontmatter}@You:\nhi\n").as_bytes(),
    )
}

fn lua(code: &str) -> String {
    format!("```lua\n{code}\n```\n")
}

/// `flemma tools FILE --json`'s names, with the extra arguments.
fn tool_names(file: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["tools", file.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = flemma(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    list.iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn all_but(name: &str) -> Vec<String> {
    ALL.iter()
        .filter(|n| **n != name)
        .map(|n| (*n).to_owned())
        .collect()
}

#[test]
fn list_operations_start_from_every_enabled_tool() {
    for (test, frontmatter, expected) in [
        ("none", String::new(), all_but("")),
        (
            "remove",
            lua("flemma.opt.tools:remove(\"write\")"),
            all_but("write"),
        ),
        (
            "minus",
            lua("flemma.opt.tools = flemma.opt.tools - \"write\""),
            all_but("write"),
        ),
        (
            "append",
            lua("flemma.opt.tools:append(\"grep\")"),
            all_but(""),
        ),
        (
            "plus",
            lua("flemma.opt.tools = flemma.opt.tools + \"read\""),
            all_but(""),
        ),
        (
            "json-remove",
            "```json\n{\"flemma\": {\"tools\": [\"!write\", \"+read\"]}}\n```\n".to_owned(),
            all_but("write"),
        ),
        (
            "glob",
            lua("flemma.opt.tools:remove(\"flemma.*\")\nflemma.opt.tools:remove(\"*e*\")"),
            vec!["bash".to_owned(), "find".to_owned(), "ls".to_owned()],
        ),
        (
            "set",
            lua("flemma.opt.tools = {\"read\", \"bash\"}"),
            vec!["bash".to_owned(), "read".to_owned()],
        ),
        ("empty", lua("flemma.opt.tools = {}"), Vec::new()),
    ] {
        let file = chat(test, &frontmatter);
        assert_eq!(tool_names(&file, &[]), expected, "{frontmatter}");
    }
    // `--set` is an operation on the defaults too.
    let file = chat("set-flag", "");
    assert_eq!(
        tool_names(&file, &["--set", r#"tools=["!write"]"#]),
        all_but("write")
    );
    assert_eq!(
        tool_names(&file, &["--set", r#"tools=["!write", "!flemma.*"]"#]),
        ["bash", "edit", "find", "grep", "ls", "read"]
    );
}

#[test]
fn request_offers_the_same_tool_set() {
    let file = chat("request", &lua("flemma.opt.tools:remove(\"write\")"));
    let out = flemma(
        &["request", file.to_str().unwrap(), "--provider", "anthropic"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "bash",
            "edit",
            "find",
            "flemma__jobs__status",
            "grep",
            "ls",
            "read"
        ]
    );
}

/// A transcript with one of each frontmatter mistake, and an options file with a preset that
/// names an unknown tool.
fn mistakes() -> (Scratch, Scratch) {
    let file = chat(
        "mistakes",
        &lua("flemma.opt.tools = {\"bash\", \"reed\"}\n\
              flemma.opt.tools:append(\"calculator\")\n\
              flemma.opt.tools:append(\"nomatch.*\")\n\
              flemma.opt.tools:remove(\"$nope\")\n\
              flemma.opt.tools.auto_approve = {\"$redonly\", \"$ci\"}"),
    );
    let toml = scratch(
        "selection-mistakes.toml",
        b"[tools]\nmax_concurrent = 2\n\n[presets.\"$ci\"]\nauto_approve = [\"bash\", \"deploy\"]\n",
    );
    (file, toml)
}

#[test]
fn check_reports_each_mistake_with_its_line() {
    let (file, toml) = mistakes();
    let name = file.display();
    let out = flemma(
        &[
            "check",
            file.to_str().unwrap(),
            "--config",
            toml.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        format!(
            "{name}:2: error: frontmatter: Unknown tool 'reed' -- did you mean 'read'?\n\
             {name}:3: error: frontmatter: Unknown tool 'calculator'\n\
             {name}:4: error: frontmatter: Glob pattern 'nomatch.*' matched no tools\n\
             {name}:5: error: frontmatter: Unknown preset '$nope' in tools\n\
             {name}:6: warning: frontmatter: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?\n\
             {}:4: warning: options: Preset '$ci' references unknown tool 'deploy' in auto_approve\n",
            toml.display()
        )
    );
    assert_eq!(text(&out.stderr), "");

    let out = flemma(&["check", file.to_str().unwrap(), "--json"], None);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["diagnostics"][0],
        serde_json::json!({
            "kind": "frontmatter",
            "severity": "error",
            "message": "Unknown tool 'reed' -- did you mean 'read'?",
            "line": 2,
        })
    );
    // Without the options file `$ci` is an unknown preset too.
    assert_eq!(json["diagnostics"].as_array().unwrap().len(), 6);
}

#[test]
fn check_places_json_keys_options_files_and_set() {
    let file = chat(
        "json-check",
        "```json\n{\n  \"flemma\": {\n    \"tools\": [\"!write\", \"+wirte\"]\n  }\n}\n```\n",
    );
    let toml = scratch(
        "selection-list.toml",
        b"# tools\n[tools]\nlist = [\"$readonly\", \"bsh\"]\n",
    );
    let out = flemma(
        &[
            "check",
            file.to_str().unwrap(),
            "--config",
            toml.to_str().unwrap(),
            "--set",
            r#"tools=["+x.*"]"#,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        format!(
            "{}:3: error: options: Unknown tool 'bsh' -- did you mean 'bash'?\n\
             --set: error: options: Glob pattern 'x.*' matched no tools\n\
             {}:4: error: frontmatter: Unknown tool 'wirte' -- did you mean 'write'?\n",
            toml.display(),
            file.display()
        )
    );
    let out = flemma(
        &[
            "check",
            file.to_str().unwrap(),
            "--json",
            "--set",
            r#"tools=["+x.*"]"#,
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["diagnostics"][0],
        serde_json::json!({
            "kind": "options",
            "severity": "error",
            "message": "Glob pattern 'x.*' matched no tools",
            "line": null,
            "place": "--set",
        })
    );
}

/// The errors as every command that would use the tool set prints them.
fn stopped(file: &Path) -> String {
    let name = file.display();
    format!(
        "flemma: {name}:2: Unknown tool 'reed' -- did you mean 'read'?\n\
         flemma: {name}:3: Unknown tool 'calculator'\n\
         flemma: {name}:4: Glob pattern 'nomatch.*' matched no tools\n\
         flemma: {name}:5: Unknown preset '$nope' in tools\n"
    )
}

#[test]
fn tools_request_cycle_and_run_stop_on_the_errors_and_show_the_warnings() {
    let (file, toml) = mistakes();
    let path = file.to_str().unwrap();
    let config = toml.to_str().unwrap();
    let before = std::fs::read_to_string(&file).unwrap();
    let warnings = format!(
        "{path}:6: warning: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?\n\
         {config}:4: warning: Preset '$ci' references unknown tool 'deploy' in auto_approve\n"
    );
    for args in [
        vec!["tools", path, "--config", config],
        vec![
            "request",
            path,
            "--provider",
            "anthropic",
            "--config",
            config,
        ],
    ] {
        let out = flemma(&args, None);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&out.stdout), "", "{args:?}");
        assert_eq!(
            text(&out.stderr),
            format!("{warnings}{}", stopped(&file)),
            "{args:?}"
        );
    }
    let out = flemma(&["cycle", path, "--config", config], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), stopped(&file));

    let script = scratch("selection.script.json", br#"[{"text": "Hello."}]"#);
    let out = flemma(
        &[
            "run",
            path,
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
            "--config",
            config,
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    assert!(
        text(&out.stderr).ends_with(&stopped(&file)),
        "{}",
        text(&out.stderr)
    );
    // Nothing was written: no placeholder, no response.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

#[test]
fn warnings_alone_stop_nothing() {
    let file = chat(
        "warnings",
        &lua("flemma.opt.tools.auto_approve = {\"$redonly\"}\nflemma.opt.tools:remove(\"write\")"),
    );
    let path = file.to_str().unwrap();
    let warning = format!(
        "{path}:2: warning: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?\n"
    );
    let out = flemma(&["tools", path], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr), warning);
    assert!(!text(&out.stdout).contains("write  "));
    let out = flemma(&["request", path, "--provider", "openai"], None);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stderr), warning);
    let out = flemma(&["cycle", path], None);
    assert_eq!(
        (out.status.code(), text(&out.stdout), text(&out.stderr)),
        (
            Some(0),
            "next: send\n".to_owned(),
            "warning: line 2: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?\n"
                .to_owned()
        )
    );
    let out = flemma(&["cycle", path, "--json"], None);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["warnings"],
        serde_json::json!([
            "line 2: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?"
        ])
    );
    let script = scratch("warnings.script.json", br#"[{"text": "Hello."}]"#);
    let out = flemma(
        &[
            "run",
            path,
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(
            "warning: line 2: Unknown preset '$redonly' in tools.auto_approve -- did you mean '$readonly'?\n"
        ),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout), "Hello.\n");
}
