//! Command hooks in the CLI: `flemma approval explain` shows a hook's decision and reason,
//! `flemma cycle` runs the hooks of `flemma.toml`, and a frontmatter cannot add hooks.

use std::path::PathBuf;

use pretty_assertions::assert_eq;

use crate::{flemma, scratch, text};

fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../flemma-tools/tests/it/hooks")
        .join(name)
        .display()
        .to_string()
}

fn deny_rm_toml(name: &str) -> PathBuf {
    let toml = format!(
        "[[hooks.PreToolUse]]\nname = \"no-rm\"\nmatcher = \"bash\"\ncommand = \"{}\"\n",
        script("deny_rm.sh")
    );
    scratch(name, toml.as_bytes())
}

#[test]
fn approval_explain_shows_a_hooks_decision_and_reason() {
    let chat = scratch("hooks-explain.chat", b"@You:\nhi\n");
    let toml = deny_rm_toml("hooks-explain.toml");
    let explain = |command: &str, json: bool| {
        let input = serde_json::json!({ "command": command }).to_string();
        let mut args = vec![
            "approval",
            "explain",
            chat.to_str().unwrap(),
            "--tool",
            "bash",
            "--input",
            &input,
            "--config",
            toml.to_str().unwrap(),
            "--set",
            "sandbox.enabled=false",
        ];
        if json {
            args.push("--json");
        }
        let out = flemma(&args, None);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let json: serde_json::Value = serde_json::from_str(&explain("rm -rf /tmp/x", true)).unwrap();
    assert_eq!(json["decision"], "deny");
    assert_eq!(json["resolver"], "urn:flemma:approval:hooks");
    assert_eq!(
        json["trace"][0]["detail"],
        "hook `no-rm`: Blocked: recursive deletes are not allowed (rm -rf /tmp/x)"
    );
    let shown = explain("rm -rf /tmp/x", false);
    assert!(
        shown.starts_with(
            "bash: deny (decided by urn:flemma:approval:hooks)\n  \
             reason: Hook `no-rm`: Blocked: recursive deletes are not allowed (rm -rf /tmp/x)\n   \
             200  urn:flemma:approval:hooks        deny: hook `no-rm`: Blocked"
        ),
        "{shown}"
    );
    // No opinion: the chain goes on to the options.
    let json: serde_json::Value = serde_json::from_str(&explain("ls", true)).unwrap();
    assert_eq!(json["decision"], "require_approval");
    assert_eq!(json["trace"][0]["resolver"], "urn:flemma:approval:hooks");
    assert_eq!(json["trace"][0]["result"], "pass");
}

#[test]
fn cycle_runs_the_hooks_of_flemma_toml() {
    let toml = deny_rm_toml("hooks-cycle.toml");
    let chat = "```json\n{\"flemma\": {\"tools\": {\"require_approval\": false}}}\n```\n\
         @You:\nClean up.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_rm`)\n```json\n{\"label\": \"clean\", \"command\": \"rm -rf ./build\"}\n```\n";
    let file = scratch("hooks-cycle.chat", chat.as_bytes());
    let out = flemma(
        &[
            "cycle",
            file.to_str().unwrap(),
            "--config",
            toml.to_str().unwrap(),
            "--set",
            "sandbox.enabled=false",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains("**Tool Result:** `toolu_rm` (error)\n```\nThe tool was denied by a policy. Hook `no-rm`: Blocked: recursive deletes are not allowed (rm -rf ./build)\n```"),
        "{after}"
    );
}

#[test]
fn a_frontmatter_cannot_add_hooks() {
    let marker = scratch("hooks-fm.marker", b"");
    std::fs::remove_file(&marker).unwrap();
    // The frontmatter tries to add a hook that would create the marker file.
    let chat = format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"require_approval\": false}}, \"hooks\": {{\"PreToolUse\": [{{\"command\": \"touch {}\"}}]}}}}}}\n```\n\
         @You:\nHi.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{{\"label\": \"hi\", \"command\": \"echo hi\"}}\n```\n",
        marker.display()
    );
    let file = scratch("hooks-fm.chat", chat.as_bytes());
    let out = flemma(
        &[
            "cycle",
            file.to_str().unwrap(),
            "--set",
            "sandbox.enabled=false",
        ],
        None,
    );
    assert!(!marker.exists(), "a frontmatter hook ran");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("option `hooks` is not supported here: a conversation or a layer of options cannot add hooks"),
        "{stderr}"
    );
    // Nothing ran: the call has no result.
    assert!(
        !std::fs::read_to_string(&file)
            .unwrap()
            .contains("**Tool Result:**")
    );
}

#[test]
fn a_host_that_allows_frontmatter_hooks_runs_and_explains_them() {
    let toml = scratch(
        "hooks-fm-allowed.toml",
        b"[hooks]\nallow_frontmatter = true\n",
    );
    let chat = format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"require_approval\": false}}, \"hooks\": {{\"PreToolUse\": [{{\"name\": \"no-rm\", \"matcher\": \"bash\", \"command\": \"{}\"}}]}}}}}}\n```\n\
         @You:\nHi.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{{\"label\": \"rm\", \"command\": \"rm -rf /nonexistent/flemma-hooks\"}}\n```\n",
        script("deny_rm.sh")
    );
    let file = scratch("hooks-fm-allowed.chat", chat.as_bytes());
    let input = serde_json::json!({ "command": "rm -rf /x" }).to_string();
    let out = flemma(
        &[
            "approval",
            "explain",
            file.to_str().unwrap(),
            "--tool",
            "bash",
            "--input",
            &input,
            "--config",
            toml.to_str().unwrap(),
            "--set",
            "sandbox.enabled=false",
            "--json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(json["decision"], "deny");
    assert_eq!(
        json["trace"][0]["detail"],
        "hook `frontmatter:no-rm`: Blocked: recursive deletes are not allowed (rm -rf /x)"
    );
    let out = flemma(
        &[
            "cycle",
            file.to_str().unwrap(),
            "--config",
            toml.to_str().unwrap(),
            "--set",
            "sandbox.enabled=false",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.contains(
            "The tool was denied by a policy. Hook `frontmatter:no-rm`: Blocked: recursive deletes are not allowed (rm -rf /nonexistent/flemma-hooks)"
        ),
        "{written}"
    );
}

/// A hook script that keys its state by `session_id`, as Claude Code's do, sees one id per
/// conversation: the same on the next run of it, another for another conversation (the
/// CLI gave every conversation `1`, and the two conversations' state mixed).
#[test]
fn a_hook_keyed_by_session_id_sees_one_session_per_conversation() {
    let toml = scratch("hooks-sessions.toml", b"");
    let dir = toml.parent().unwrap().to_owned();
    let _ = std::fs::remove_dir_all(dir.join("sessions"));
    std::fs::write(
        &toml,
        format!(
            "[[hooks.UserPromptSubmit]]\nname = \"sessions\"\ncommand = \"{}\"\n",
            script("session_state.py")
        ),
    )
    .unwrap();
    let script_file = dir.join("script.json");
    std::fs::write(&script_file, br#"[{"text": "Hello."}]"#).unwrap();
    let run = |chat: &std::path::Path| {
        let out = flemma(
            &[
                "run",
                chat.to_str().unwrap(),
                "--provider",
                "scripted",
                "--script",
                script_file.to_str().unwrap(),
                "--config",
                toml.to_str().unwrap(),
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    };
    let a = dir.join("a.chat");
    let b = dir.join("b.chat");
    std::fs::write(&a, "@You:\nHi.\n").unwrap();
    std::fs::write(&b, "@You:\nHi.\n").unwrap();
    run(&a);
    run(&b);
    // The user answers in a; the next run is the same conversation.
    let mut again = std::fs::read_to_string(&a).unwrap();
    again.push_str("Once more.\n");
    std::fs::write(&a, again).unwrap();
    run(&a);
    let mut logs: Vec<(String, String)> = std::fs::read_dir(dir.join("sessions"))
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            (std::fs::read_to_string(&path).unwrap(), name)
        })
        .collect();
    logs.sort();
    let texts: Vec<&str> = logs.iter().map(|(log, _)| log.as_str()).collect();
    assert_eq!(
        texts,
        [
            "UserPromptSubmit a.chat\nUserPromptSubmit a.chat\n",
            "UserPromptSubmit b.chat\n"
        ]
    );
    // Session ids are UUIDs, as Claude Code's are.
    for (_, id) in &logs {
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
    }
}
