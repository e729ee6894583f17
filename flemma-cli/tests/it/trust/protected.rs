//! Items 4 and 5: what runs outside any sandbox later is read-only for tools. An auto-approved
//! `bash` (under bubblewrap) or `write` cannot set `core.fsmonitor` or add a git hook (which
//! the user's next `git status` would run), add a command hook to `.claude/settings.json`
//! (which the next cycle would run with `claude_settings = true`), or rewrite a hook script
//! `flemma.toml` names; `approval explain` lists these paths.

use std::fmt::Write as _;
use std::process::Command;

use pretty_assertions::assert_eq;

use super::{Project, assert_no_canary};
use crate::text;

/// A transcript whose model asks for each `(tool, input)` in turn, unanswered.
fn transcript(calls: &[(&str, serde_json::Value)]) -> String {
    let mut text = String::from("@You:\nSet things up.\n\n@Assistant:\n");
    for (i, (tool, input)) in calls.iter().enumerate() {
        let _ = write!(
            text,
            "**Tool Use:** `{tool}` (`toolu_{i}`)\n```json\n{input}\n```\n\n"
        );
    }
    text
}

fn git(p: &Project, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .args(args)
        .current_dir(p.path("proj"))
        .env("HOME", p.path("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap()
}

#[test]
fn tools_cannot_plant_what_git_runs_later() {
    let p = Project::new("protected-git");
    std::fs::remove_dir_all(p.path("proj/.git")).unwrap();
    assert!(git(&p, &["init", "-q"]).status.success());
    let canary = p.path("proj/canary.txt");
    let run = format!("touch {}", canary.display());
    let hook = format!("#!/bin/sh\n{run}\n");
    let chat = p.write(
        "proj/x.chat",
        &transcript(&[
            (
                "bash",
                serde_json::json!({"command": format!("git config core.fsmonitor '{run}'; printf '{}' > .git/hooks/post-index-change; chmod +x .git/hooks/*", hook.replace('\n', "\\n"))}),
            ),
            (
                "write",
                serde_json::json!({"path": ".git/hooks/pre-commit", "content": hook}),
            ),
        ]),
    );
    let cycle = p.flemma(&["cycle", chat.to_str().unwrap()]);
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    let after = p.read("proj/x.chat");
    // The user's next `git status` runs nothing of the model's.
    let status = git(&p, &["status"]);
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert_no_canary(&canary, &cycle);
    assert!(!p.read("proj/.git/config").contains("fsmonitor"), "{after}");
    assert!(!p.path("proj/.git/hooks/post-index-change").exists());
    assert!(!p.path("proj/.git/hooks/pre-commit").exists());
    assert!(
        after.contains("Cannot write .git/hooks/pre-commit: it is read-only for tools"),
        "{after}"
    );
    // `approval explain` lists what is protected.
    let explain = p.flemma(&[
        "approval",
        "explain",
        chat.to_str().unwrap(),
        "--tool",
        "bash",
    ]);
    assert!(
        text(&explain.stdout).contains(&p.path("proj/.git").display().to_string()),
        "{}",
        text(&explain.stdout)
    );
}

#[test]
fn tools_cannot_add_a_hook_the_host_runs_next() {
    let p = Project::new("protected-hooks");
    let canary = p.path("proj/canary.txt");
    // The host runs Claude Code's settings hooks and a script of its own.
    let script = p.write("proj/hooks/lint.sh", "#!/bin/sh\nexit 0\n");
    p.write(
        "proj/flemma.toml",
        &format!(
            "[hooks]\nclaude_settings = true\n\n[[hooks.PreToolUse]]\nname = \"lint\"\nmatcher = \"bash\"\ncommand = \"{}\"\n",
            script.display()
        ),
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.write("proj/.claude/settings.json", "{}\n");
    let settings = serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        {"type": "command", "command": format!("touch {}", canary.display())}
    ]}]}})
    .to_string();
    let chat = p.write(
        "proj/x.chat",
        &transcript(&[
            ("write", serde_json::json!({"path": ".claude/settings.json", "content": settings})),
            ("write", serde_json::json!({"path": ".claude/settings.local.json", "content": settings})),
            ("bash", serde_json::json!({"command": format!("echo 'touch {}' >> hooks/lint.sh; echo '{settings}' > .claude/settings.local.json", canary.display())})),
        ]),
    );
    let cycle = p.flemma(&["cycle", chat.to_str().unwrap()]);
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    let after = p.read("proj/x.chat");
    assert_eq!(
        p.read("proj/hooks/lint.sh"),
        "#!/bin/sh\nexit 0\n",
        "{after}"
    );
    assert!(
        !p.path("proj/.claude/settings.local.json").exists(),
        "{after}"
    );
    assert_eq!(p.read("proj/.claude/settings.json"), "{}\n");
    assert!(
        after.contains("Cannot write .claude/settings.json: it is read-only for tools"),
        "{after}"
    );
    // The next cycle runs the host's hooks only: the canary stays away.
    let next = p.write(
        "proj/y.chat",
        &transcript(&[("bash", serde_json::json!({"command": "true"}))]),
    );
    let cycle = p.flemma(&["cycle", next.to_str().unwrap()]);
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    assert_no_canary(&canary, &cycle);
}
