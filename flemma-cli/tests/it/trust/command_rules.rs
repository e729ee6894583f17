//! Command rules on `bash` (`tools.bash.allow`, `ask`, `deny`): a model's command that chains,
//! substitutes or redirects past an allowed command never runs unasked; a transcript's
//! frontmatter may add deny and ask rules but not allow rules, and cannot make the host read a
//! project's Claude Code permissions; deny wins over `tools.auto_approve`. Each attack with a
//! canary, before the calls that do run.

use std::fmt::Write as _;

use pretty_assertions::assert_eq;

use super::{Project, assert_no_canary};
use crate::text;

/// The host's options: `bash` not approved by the sandbox (it is off) nor by `auto_approve`;
/// the rules of `rules` (TOML lines of `[tools.bash]`).
fn host(rules: &str) -> String {
    format!(
        "[tools]\nauto_approve = [\"$readonly\"]\n\n[tools.bash]\n{rules}\n\n[sandbox]\nenabled = false\n"
    )
}

/// A transcript with `frontmatter` (JSON of the `flemma` key, or none) in which the model asked
/// `bash` to run `command`.
fn transcript(frontmatter: Option<&str>, command: &str) -> String {
    let input = serde_json::json!({ "command": command }).to_string();
    let front = frontmatter.map_or_else(String::new, |f| {
        format!("```json\n{{\"flemma\": {f}}}\n```\n")
    });
    format!(
        "{front}@You:\nGo.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{input}\n```\n"
    )
}

/// Writes the transcript of `command` (under `frontmatter`) and runs `flemma cycle` on it.
fn run_cycle(p: &Project, frontmatter: Option<&str>, command: &str) -> std::process::Output {
    let chat = p.write("proj/x.chat", &transcript(frontmatter, command));
    p.flemma(&["cycle", chat.to_str().unwrap()])
}

/// `flemma approval explain CHAT --tool bash` of `command`.
fn explain_bash(p: &Project, chat: &std::path::Path, command: &str) -> std::process::Output {
    let input = serde_json::json!({ "command": command }).to_string();
    p.flemma(&[
        "approval",
        "explain",
        chat.to_str().unwrap(),
        "--tool",
        "bash",
        "--input",
        &input,
    ])
}

fn result_header(p: &Project) -> Option<String> {
    p.read("proj/x.chat")
        .lines()
        .find(|l| l.starts_with("**Tool Result:** `toolu_1`"))
        .map(str::to_owned)
}

#[test]
fn an_allowed_command_does_not_carry_a_chained_one_past_the_rules() {
    let p = Project::new("rules-chained");
    p.write(
        "proj/flemma.toml",
        &host("allow = [\"echo *\", \"git status\"]"),
    );
    let canary = p.path("proj/canary.txt");
    let touch = format!("touch {}", canary.display());
    for command in [
        format!("echo hi && {touch}"),
        format!("echo hi; {touch}"),
        format!("echo hi\n{touch}"),
        format!("echo hi | {touch}"),
        format!("echo $({touch})"),
        format!("echo \"`{touch}`\""),
        format!("echo hi > >({touch})"),
        format!("bash -c 'echo hi; {touch}'"),
        format!("timeout 5 {touch}"),
        format!("e\\cho hi; {touch}"),
        format!("git status$'\\n'{touch}"),
        // Read by flemma-shell's own tokens (decision 0124): lists, pipes, redirections,
        // comments and line continuations as bash reads them.
        format!("echo hi 2>&1 | {touch}"),
        format!("echo hi |& {touch}"),
        format!("echo hi &>/dev/null & {touch}"),
        format!("echo hi # a comment\n{touch}"),
        format!("echo hi \\\n; {touch}"),
        format!("echo 'a;' \"b&&\" ; {touch}"),
        format!("echo hi>/dev/null;{touch}"),
        format!("echo --x=1 \"$({touch})\""),
        // brush-parser's tokenizer never returns on this: it asks at once.
        format!("echo hi; {touch}; <<$( & "),
    ] {
        let cycle = run_cycle(&p, None, &command);
        assert_no_canary(&canary, &cycle);
        assert_eq!(
            result_header(&p).as_deref(),
            Some("**Tool Result:** `toolu_1` (pending)"),
            "{command:?}: {}",
            text(&cycle.stderr)
        );
    }
    // What the rules allow runs unasked.
    let cycle = run_cycle(&p, None, "echo rules-ran && git status");
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    assert!(
        p.read("proj/x.chat").contains("rules-ran"),
        "{}",
        p.read("proj/x.chat")
    );
}

#[test]
fn a_redirection_outside_the_project_waits_for_a_person() {
    let p = Project::new("rules-redirect");
    p.write("proj/flemma.toml", &host("allow = [\"echo *\"]"));
    let canary = p.path("outside.txt");
    let cycle = run_cycle(&p, None, &format!("echo pwned > {}", canary.display()));
    assert_no_canary(&canary, &cycle);
    assert_eq!(
        result_header(&p).as_deref(),
        Some("**Tool Result:** `toolu_1` (pending)")
    );
    // Into the project, it runs.
    let cycle = run_cycle(&p, None, "echo kept > notes.txt");
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    assert_eq!(p.read("proj/notes.txt"), "kept\n");
}

#[test]
fn a_deny_rule_wins_over_auto_approve() {
    let p = Project::new("rules-deny");
    p.write(
        "proj/flemma.toml",
        "[tools]\nauto_approve = [\"bash\"]\n\n[tools.bash]\ndeny = [\"touch *\"]\n\n[sandbox]\nenabled = false\n",
    );
    let canary = p.path("proj/canary.txt");
    p.write(
        "proj/x.chat",
        &transcript(None, &format!("echo hi && (touch {})", canary.display())),
    );
    let chat = p.path("proj/x.chat");
    let cycle = p.flemma(&["cycle", chat.to_str().unwrap()]);
    assert_no_canary(&canary, &cycle);
    // The model reads the spec's denial, then which command and which rule.
    let text_now = p.read("proj/x.chat");
    assert!(
        text_now.contains(&format!(
            "The tool was denied by a policy. `touch {}` matches tools.bash.deny entry \"touch *\"",
            canary.display()
        )),
        "{text_now}"
    );
}

#[test]
fn a_frontmatter_may_add_deny_rules_but_not_allow_rules() {
    let p = Project::new("rules-frontmatter");
    p.write("proj/flemma.toml", &host(""));
    let canary = p.path("proj/canary.txt");
    let touch = format!("touch {}", canary.display());
    for (frontmatter, path) in [
        (
            r#"{"tools": {"bash": {"allow": ["touch *"]}}}"#,
            "tools.bash.allow",
        ),
        (
            r#"{"tools": {"bash": {"claude_settings": true}}}"#,
            "tools.bash.claude_settings",
        ),
    ] {
        // The project's Claude Code settings allow it, for the second attack.
        p.write(
            "proj/.claude/settings.json",
            r#"{"permissions": {"allow": ["Bash(touch:*)"]}}"#,
        );
        let cycle = run_cycle(&p, Some(frontmatter), &touch);
        assert_no_canary(&canary, &cycle);
        assert_ne!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
        assert!(
            text(&cycle.stderr).contains(&format!(
                "A conversation's frontmatter can only narrow {path}"
            )),
            "{}",
            text(&cycle.stderr)
        );
    }
    // A deny rule narrows: with `bash` approved by the host, the frontmatter's deny holds.
    p.write(
        "proj/flemma.toml",
        "[tools]\nauto_approve = [\"bash\"]\n\n[sandbox]\nenabled = false\n",
    );
    let cycle = run_cycle(
        &p,
        Some(r#"{"tools": {"bash": {"deny": ["touch *"]}}}"#),
        &touch,
    );
    assert_no_canary(&canary, &cycle);
}

#[test]
fn the_host_reads_claude_code_permissions_when_it_says_so() {
    let p = Project::new("rules-claude");
    p.write(
        "proj/.claude/settings.json",
        r#"{"permissions": {"allow": ["Bash(echo:*)", "Read(./src/**)"], "deny": ["Bash(rm -rf:*)"]}}"#,
    );
    let chat = p.path("proj/x.chat");
    // Not read by default: the call waits.
    p.write("proj/flemma.toml", &host(""));
    let cycle = run_cycle(&p, None, "echo from-claude");
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    assert_eq!(
        result_header(&p).as_deref(),
        Some("**Tool Result:** `toolu_1` (pending)")
    );
    // Read with `claude_settings = true`: allowed, and its deny holds.
    p.write("proj/flemma.toml", &host("claude_settings = true"));
    let cycle = run_cycle(&p, None, "echo from-claude");
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    assert!(
        p.read("proj/x.chat").contains("from-claude\n```"),
        "{}",
        p.read("proj/x.chat")
    );
    let explain = explain_bash(&p, &chat, "echo a && rm -rf build");
    assert!(
        text(&explain.stdout).contains(".claude/settings.json permissions.deny \"Bash(rm -rf:*)\""),
        "{}",
        text(&explain.stdout)
    );
}

#[test]
fn explain_shows_each_simple_command_and_the_rule_that_decided_it() {
    let p = Project::new("rules-explain");
    p.write(
        "proj/flemma.toml",
        &host("allow = [\"git status\", \"git diff *\", \"cargo test *\", \"echo *\"]\nask = [\"git push *\"]\ndeny = [\"rm -rf *\"]"),
    );
    let chat = p.write("proj/x.chat", &transcript(None, "echo hi"));
    let mut shown = String::new();
    for command in [
        "git status && git diff --stat | head -n 5; cargo test -p flemma-shell",
        "timeout 60 cargo test && sudo rm -rf /tmp/build",
        "echo \"$(git push origin main)\" > /etc/motd && echo $'\\e[2J\\e]0;title\\a'",
    ] {
        let out = explain_bash(&p, &chat, command);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        // The writable set's paths are this machine's.
        let until_writable = stdout.split("\nwritable:").next().unwrap_or_default();
        writeln!(shown, "$ {command:?}\n{until_writable}\n").unwrap();
    }
    insta::assert_snapshot!(shown);
}
