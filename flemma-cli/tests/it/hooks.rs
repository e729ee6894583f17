//! Command hooks in the CLI: `flemma approval explain` shows a hook's decision and reason,
//! `flemma cycle` runs the hooks of `flemma.toml`, and a frontmatter cannot add hooks.

use std::path::PathBuf;

use pretty_assertions::assert_eq;

use crate::scratch::Scratch;
use crate::{flemma, scratch, text};

fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../flemma-runtime/tests/it/hooks")
        .join(name)
        .display()
        .to_string()
}

fn deny_rm_toml(name: &str) -> Scratch {
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

/// agent-pd's logs in `audit`: per session id, its events in file order, the longest first.
fn agent_pd_logs(audit: &std::path::Path) -> Vec<(String, Vec<serde_json::Value>)> {
    let mut logs: Vec<(String, Vec<serde_json::Value>)> = std::fs::read_dir(audit)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .map(|path| {
            let events = std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect();
            let id = path.file_stem().unwrap().to_str().unwrap().to_owned();
            (id, events)
        })
        .collect();
    logs.sort_by_key(|(_, events)| std::cmp::Reverse(events.len()));
    logs
}

/// Runs agent-pd's `pd` command on its logs in `audit`, as a user would after the session.
fn pd(venv: &std::path::Path, audit: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(venv.join("pd"))
        .args(args)
        .arg("--audit-dir")
        .arg(audit)
        .env("HOME", audit.parent().unwrap())
        .env_remove("PD_AUDIT_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// A Claude Code hook published as a Python package, unchanged: agent-pd 0.2.0 (pinned in
/// `tests/mcp/requirements.txt`, installed into `tests/mcp/.venv` by `scripts/test`) appends
/// every event it is given to `<audit dir>/<session_id>.jsonl`, hash-chained per session, and
/// its `pd` command lists and verifies those sessions. Configured as its `pd install-hook`
/// writes it into Claude Code's settings (nested form, no matcher, `--audit-dir` baked into
/// the command, so no environment variable has to reach the hook), it sees one session per
/// conversation: the same on the next run of it, another for another conversation.
#[test]
fn a_published_claude_code_hook_keeps_one_log_per_conversation() {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/.venv/bin");
    assert!(
        venv.join("pd").exists(),
        "{} is missing: run scripts/test, which installs tests/mcp/requirements.txt (agent-pd)",
        venv.join("pd").display()
    );
    let toml = scratch("hooks-agent-pd.toml", b"");
    let dir = toml.parent().unwrap().join("hooks-agent-pd");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let audit = dir.join("audit");
    std::fs::write(
        &toml,
        format!(
            "[hooks]\ncompat = \"claude\"\n\n[[hooks.PostToolUse]]\nhooks = [{{ type = \"command\", command = \"{} -m agent_pd.hook --audit-dir {}\" }}]\n",
            venv.join("python").display(),
            audit.display()
        ),
    )
    .unwrap();
    // One script per run: explicit call ids, so the second run of a conversation does not
    // repeat the first's.
    let script = |name: &str, id: &str| {
        let path = dir.join(name);
        let turns = serde_json::json!({"turns": [
            {"tool_uses": [{"name": "ls", "id": id, "input": {"path": "."}}]},
            {"text": "Done."}
        ]});
        std::fs::write(&path, turns.to_string()).unwrap();
        path
    };
    let first = script("first.json", "toolu_ls_first");
    let again = script("again.json", "toolu_ls_again");
    let run = |chat: &std::path::Path, script: &std::path::Path| {
        let out = flemma(
            &[
                "run",
                chat.to_str().unwrap(),
                "--provider",
                "scripted",
                "--script",
                script.to_str().unwrap(),
                "--config",
                toml.to_str().unwrap(),
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        // A hook that failed would be a warning `hook 'NAME' …`.
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("hook '"), "{stderr}");
    };
    let start = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"+ls\"]}}}\n```\n@You:\nWhat is here?\n";
    let a = dir.join("a.chat");
    let b = dir.join("b.chat");
    std::fs::write(&a, start).unwrap();
    std::fs::write(&b, start).unwrap();
    run(&a, &first);
    run(&b, &first);
    let mut more = std::fs::read_to_string(&a).unwrap();
    more.push_str("And now?\n");
    std::fs::write(&a, more).unwrap();
    run(&a, &again);

    // Its logs: one per conversation, a's with both runs' calls, chained on (seq 1, 2).
    let logs = agent_pd_logs(&audit);
    let seen: Vec<Vec<String>> = logs
        .iter()
        .map(|(id, events)| {
            events
                .iter()
                .map(|event| {
                    assert_eq!(event["session_id"].as_str(), Some(id.as_str()));
                    let transcript = PathBuf::from(event["transcript_path"].as_str().unwrap());
                    format!(
                        "{} {} {} {}",
                        event["event"].as_str().unwrap(),
                        event["tool_name"].as_str().unwrap(),
                        transcript.file_name().unwrap().to_str().unwrap(),
                        event["seq"]
                    )
                })
                .collect()
        })
        .collect();
    assert_eq!(
        seen,
        [
            vec!["PostToolUse LS a.chat 1", "PostToolUse LS a.chat 2"],
            vec!["PostToolUse LS b.chat 1"]
        ]
    );
    for (id, _) in &logs {
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
    }

    pd_sees_the_sessions(&venv, &audit, &logs);
}

/// agent-pd's own commands on its logs: `pd list` shows each session once, `pd verify --all`
/// finds each session's chain whole (a later run of a conversation continued its chain).
fn pd_sees_the_sessions(
    venv: &std::path::Path,
    audit: &std::path::Path,
    logs: &[(String, Vec<serde_json::Value>)],
) {
    let projects = audit.parent().unwrap().join("projects");
    let listed = pd(
        venv,
        audit,
        &["list", "--projects-dir", projects.to_str().unwrap()],
    );
    let mut listed: Vec<&str> = listed
        .lines()
        .map(|line| line.split_whitespace().next().unwrap())
        .collect();
    listed.sort_unstable();
    let mut ids: Vec<&str> = logs.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(listed, ids);
    let mut expected: Vec<String> = logs
        .iter()
        .map(|(id, events)| format!("{id}: ✓ chain intact — {} event(s) verified", events.len()))
        .collect();
    expected.sort();
    let verified = pd(venv, audit, &["verify", "--all"]);
    assert_eq!(verified.lines().collect::<Vec<_>>(), expected);
}
