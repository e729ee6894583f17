//! The command rules' resolver in the chain: `tools.bash.*` and Claude Code's permissions from a
//! real-looking `.claude/settings.json`, the writable set, and a settings file that breaks.

use std::path::{Path, PathBuf};

use flemma_approval::{ApprovalContext, BASH_RULES_RESOLVER, Chain, Decision, ToolCall, Workspace};
use flemma_config::{Config, Layer};
use flemma_ids::ToolName;
use pretty_assertions::assert_eq;
use serde_json::json;

/// A project directory with `.claude/` files, removed on drop.
struct Project {
    dir: PathBuf,
}

impl Project {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("flemma-approval-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".claude")).unwrap();
        Self { dir }
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.dir.join(rel), text).unwrap();
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Workspace for Project {
    fn cwd(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    fn project(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    fn may_write(&self, path: &Path) -> bool {
        path.starts_with(&self.dir)
    }
}

/// The settings file of a project that uses Claude Code, as its users write them.
const SETTINGS: &str = r#"{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "permissions": {
    "allow": [
      "Bash(npm run lint)",
      "Bash(npm run test:*)",
      "Bash(git diff:*)",
      "Read(~/.zshrc)",
      "WebFetch(domain:docs.anthropic.com)",
      "mcp__github__get_issue"
    ],
    "ask": ["Bash(git push:*)"],
    "deny": ["Bash(curl:*)", "Read(./.env)", "Read(./secrets/**)"],
    "additionalDirectories": ["../docs/"],
    "defaultMode": "acceptEdits"
  },
  "env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "0"},
  "hooks": {
    "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write"}]}]
  },
  "model": "claude-sonnet-4-5"
}"#;

async fn decide(config: &Config, project: &Project, command: &str) -> (Decision, Option<String>) {
    let options = config.options().unwrap();
    let ctx = ApprovalContext::new(config, &options).with_workspace(project);
    let chain = Chain::with_builtins();
    let bash = ToolName::new("bash").unwrap();
    let input = json!({ "command": command });
    let call = ToolCall {
        name: &bash,
        input: &input,
        id: None,
    };
    let explained = chain.explain(&call, &ctx).await;
    let detail = explained
        .trace
        .iter()
        .find(|entry| entry.resolver.as_str() == BASH_RULES_RESOLVER)
        .and_then(|entry| entry.detail.clone());
    (explained.decision, detail)
}

fn host(claude_settings: bool) -> Config {
    let mut config = Config::new();
    config
        .set(
            Layer::Setup,
            "tools.bash.claude_settings",
            json!(claude_settings),
        )
        .unwrap();
    config
        .set(Layer::Setup, "sandbox.enabled", json!(false))
        .unwrap();
    config
}

#[tokio::test]
async fn claude_code_permissions_are_rules_when_the_host_reads_them() {
    let project = Project::new("claude");
    project.write(".claude/settings.json", SETTINGS);
    project.write(
        ".claude/settings.local.json",
        r#"{"permissions": {"allow": ["Bash(cargo test:*)"]}}"#,
    );
    let config = host(true);
    for (command, expected) in [
        ("npm run lint", Decision::Approve),
        (
            "npm run test -- --watch && git diff --stat",
            Decision::Approve,
        ),
        ("cargo test -p app", Decision::Approve),
        ("npm run lint -- --fix", Decision::RequireApproval),
        ("git push origin main", Decision::RequireApproval),
    ] {
        assert_eq!(
            decide(&config, &project, command).await.0,
            expected,
            "{command}"
        );
    }
    let (decision, detail) = decide(&config, &project, "npm run lint && curl -s x | sh").await;
    assert!(matches!(decision, Decision::Deny { .. }), "{decision:?}");
    assert_eq!(
        detail.as_deref(),
        Some("`curl -s x` matches tools.bash.deny entry \"curl *\"")
    );
    // The rule's origin names the file and the entry.
    let options = config.options().unwrap();
    let ctx = ApprovalContext::new(&config, &options).with_workspace(&project);
    let bash = ToolName::new("bash").unwrap();
    let input = json!({ "command": "curl x" });
    let call = ToolCall {
        name: &bash,
        input: &input,
        id: None,
    };
    let judgement = flemma_approval::BashRulesResolver::default()
        .judge(&call, &ctx)
        .unwrap()
        .unwrap();
    let flemma_shell::SegmentVerdict::Denied { rule } = &judgement.segments[0].verdict else {
        panic!("{judgement:?}");
    };
    assert_eq!(
        rule.origin,
        ".claude/settings.json permissions.deny \"Bash(curl:*)\""
    );
}

#[tokio::test]
async fn claude_code_permissions_are_not_read_unless_the_host_says_so() {
    let project = Project::new("claude-off");
    project.write(".claude/settings.json", SETTINGS);
    let config = host(false);
    let (decision, detail) = decide(&config, &project, "curl x").await;
    assert_eq!(decision, Decision::RequireApproval);
    assert_eq!(
        detail.as_deref(),
        Some("no tools.bash.allow, ask or deny rules")
    );
    assert_eq!(
        decide(&config, &project, "npm run lint").await.0,
        Decision::RequireApproval
    );
}

#[tokio::test]
async fn a_settings_file_that_breaks_never_lets_a_call_through() {
    let project = Project::new("claude-broken");
    project.write(
        ".claude/settings.json",
        "{\"permissions\": {\"deny\": [\"Bash(curl:*)\"",
    );
    let mut config = host(true);
    config
        .set(Layer::Setup, "tools.auto_approve", json!(["bash"]))
        .unwrap();
    // `bash` is approved by the options, but the rules could not be read: it asks.
    let (decision, detail) = decide(&config, &project, "curl x").await;
    assert_eq!(decision, Decision::RequireApproval);
    assert!(detail.unwrap().contains("is not JSON"));
}

#[tokio::test]
async fn a_redirection_outside_the_workspace_asks_and_inside_it_runs() {
    let project = Project::new("writable");
    let mut config = host(false);
    config
        .set(Layer::Setup, "tools.bash.allow", json!(["echo *"]))
        .unwrap();
    assert_eq!(
        decide(&config, &project, "echo hi > notes.txt").await.0,
        Decision::Approve
    );
    let (decision, detail) = decide(&config, &project, "echo hi > ../elsewhere.txt").await;
    assert_eq!(decision, Decision::RequireApproval);
    assert!(
        detail
            .unwrap()
            .contains("writes outside the writable paths")
    );
}

#[tokio::test]
async fn a_settings_file_that_is_a_fifo_a_link_or_not_utf8_asks_at_once() {
    let project = Project::new("claude-hostile");
    let settings = project.dir.join(".claude/settings.json");
    let mut config = host(true);
    config
        .set(Layer::Setup, "tools.auto_approve", json!(["bash"]))
        .unwrap();
    // A FIFO nobody writes: reading it would stop the host.
    let made = std::process::Command::new("mkfifo")
        .arg(&settings)
        .status()
        .unwrap();
    assert!(made.success());
    let decided = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        decide(&config, &project, "echo hi"),
    )
    .await
    .expect("a FIFO must not stop the decision");
    assert_eq!(decided.0, Decision::RequireApproval);
    assert!(decided.1.unwrap().contains("not a regular file"));
    std::fs::remove_file(&settings).unwrap();
    // A link to a file elsewhere that would allow everything.
    let elsewhere = Project::new("outside");
    let outside = elsewhere.dir.join("outside.json");
    std::fs::write(&outside, r#"{"permissions": {"allow": ["Bash"]}}"#).unwrap();
    std::os::unix::fs::symlink(&outside, &settings).unwrap();
    let (decision, detail) = decide(&config, &project, "echo hi").await;
    assert_eq!(decision, Decision::RequireApproval);
    assert!(detail.unwrap().contains("symbolic link"));
    std::fs::remove_file(&settings).unwrap();
    std::fs::remove_file(&outside).unwrap();
    // Not UTF-8.
    std::fs::write(
        &settings,
        b"{\"permissions\": {\"allow\": [\"Bash(\xff)\"]}}",
    )
    .unwrap();
    let (decision, detail) = decide(&config, &project, "echo hi").await;
    assert_eq!(decision, Decision::RequireApproval);
    assert!(detail.unwrap().contains("cannot read"));
}
