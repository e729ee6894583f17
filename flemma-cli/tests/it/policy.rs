//! Lua frontmatter policies through the command: the seed's function form of
//! `tools.auto_approve` in `flemma cycle` (spec §6.3), `:set(...)` and a function owning the
//! policy against the sandbox resolver (spec §6.4), and `tools.modules`, which is refused.

use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::scratch::Scratch;
use crate::{flemma, scratch, text};

fn fixture(name: &str, test: &str) -> Scratch {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tools")
        .join(name);
    scratch(&format!("{test}-{name}"), &std::fs::read(source).unwrap())
}

/// The seed's "Configuring approval" function: `grep` approved and run, `rm -rf` denied (and
/// not run), any other `bash` left pending; the function is asked per call.
#[test]
fn cycle_asks_a_lua_function_policy_per_call() {
    let file = fixture("lua_policy.chat", "policy");
    let dir = file.parent().unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() { println!(\"hello\"); }\n",
    )
    .unwrap();
    let out = flemma(&["cycle", file.to_str().unwrap(), "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&report["placed"], &report["next"]),
        (
            &json!([
                {"id": "toolu_g", "tool": "grep", "status": "approved"},
                {"id": "toolu_rm", "tool": "bash", "status": "denied"},
                {"id": "toolu_ls", "tool": "bash", "status": "pending"},
            ]),
            &json!("await_approval")
        ),
        "{}",
        text(&out.stderr)
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains(
            "**Tool Result:** `toolu_g`\n```\nsrc/main.rs:1:fn main() { println!(\"hello\"); }\n\n[1 match]\n```\n"
        ),
        "{after}"
    );
    assert!(
        after.contains("**Tool Result:** `toolu_rm` (error)\n"),
        "{after}"
    );
    assert!(
        after.ends_with("**Tool Result:** `toolu_ls` (pending)\n```\n```\n"),
        "{after}"
    );
    assert!(
        dir.join("src/main.rs").is_file(),
        "the denied rm -rf did not run"
    );
}

/// `explain` with any executable standing in for bubblewrap, so that the sandbox resolver
/// would approve `bash` unless the frontmatter owns the policy.
fn explain_bash(chat: &str) -> serde_json::Value {
    let path = scratch("owned.chat", chat.as_bytes());
    let out = flemma(
        &[
            "approval",
            "explain",
            path.to_str().unwrap(),
            "--tool",
            "bash",
            "--input",
            r#"{"command":"ls"}"#,
            "--json",
            "--set",
            "sandbox.backends.bwrap.path=/bin/sh",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_function_or_set_takes_ownership_from_the_sandbox_resolver() {
    let json = explain_bash("```lua\nflemma.opt.tools.max_concurrent = 4\n```\n@You:\nhi\n");
    assert_eq!(
        json["resolver"], "urn:flemma:approval:sandbox",
        "the control"
    );
    for frontmatter in [
        // The seed's "Per-buffer approval" function form: `nil` for bash.
        "flemma.opt.tools.auto_approve = function(tool_name, input, ctx)\n  if tool_name == \"grep\" then return true end\n  return nil  -- pass to next resolver\nend",
        "flemma.opt.tools.auto_approve:set({\"grep\"})",
    ] {
        let json = explain_bash(&format!("```lua\n{frontmatter}\n```\n@You:\nhi\n"));
        assert_eq!(
            (&json["decision"], &json["resolver"], &json["trace"][2]),
            (
                &json!("require_approval"),
                &json!("default"),
                &json!({"resolver": "urn:flemma:approval:sandbox", "priority": 25, "result": "pass", "detail": "the frontmatter sets tools.auto_approve"})
            ),
            "{frontmatter}"
        );
    }
}

/// A function that fails asks for approval; `explain` says why.
#[test]
fn a_failing_function_policy_asks_and_explain_says_why() {
    let chat = scratch(
        "failing.chat",
        b"```lua\nflemma.opt.tools.auto_approve = function(tool_name, input)\n  return input.command:match(\"x\")\nend\n```\n@You:\nhi\n",
    );
    let out = flemma(
        &[
            "approval",
            "explain",
            chat.to_str().unwrap(),
            "--tool",
            "grep",
            "--set",
            "tools.require_approval=false",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(
            "grep: require_approval (decided by urn:flemma:approval:config)\n   150  urn:flemma:approval:bash-rules   pass\n   100  urn:flemma:approval:config       require_approval: the auto_approve function failed, so the call waits for approval: line 3: attempt to index a nil value (field 'command')\n"
        ),
        "{stdout}"
    );
}

#[test]
fn tools_modules_is_an_error_naming_the_rust_equivalent() {
    let chat = scratch(
        "modules.chat",
        b"```lua\nflemma.opt.tools.modules = {\"my_plugin.tools\"}\n```\n@You:\nhi\n",
    );
    let out = flemma(&["check", chat.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        format!(
            "{}:2: error: frontmatter: invalid option: option `tools.modules` is not supported \
             here: Lua tool modules cannot be loaded; register tools in Rust instead, through the \
             `Tool` trait: `ToolRegistry::register(tool)`, or \
             `ToolRegistry::register_module(ToolModule)` for tools with their approval resolver\n",
            chat.display()
        )
    );
    let toml = scratch(
        "modules.toml",
        b"[tools]\nmodules = [\"my_plugin.tools\"]\n",
    );
    let out = flemma(
        &["tools", "--config", toml.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("option `tools.modules` is not supported here"),
        "{}",
        text(&out.stderr)
    );
}
