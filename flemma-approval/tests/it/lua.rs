//! The chain on Lua frontmatter policies (feature `lua`): the seed's function form of
//! `tools.auto_approve` decided by the config resolver at priority 100 (spec §6.3), failing
//! closed, and the sandbox resolver standing back when the frontmatter owns the policy (spec
//! §6.4: a function or `:set(...)`).

use flemma_approval::{
    ApprovalContext, CONFIG_RESOLVER, Chain, Decision, SANDBOX_RESOLVER, ToolCall,
};
use flemma_config::Config;
use flemma_ids::{ToolName, ToolUseId};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// The seed's "Configuring approval" function, in a frontmatter.
const CONFIGURING_APPROVAL: &str = r#"flemma.opt.tools.auto_approve = function(tool_name, input, ctx)
  if tool_name == "grep" then return true end
  if tool_name == "bash" and input.command:match("rm %-rf") then return "deny" end
  return false  -- require approval
end"#;

/// The seed's "Per-buffer approval" function form.
const PER_BUFFER_APPROVAL: &str = r#"flemma.opt.tools.auto_approve = function(tool_name, input, ctx)
  if tool_name == "grep" then return true end
  return nil  -- pass to next resolver
end"#;

/// A conversation whose `bash` is sandbox-safe, with a sandbox backend available: the
/// sandbox resolver approves `bash` unless the frontmatter owns the policy.
struct Conversation {
    config: Config,
    options: flemma_config::Options,
}

impl Conversation {
    fn new(frontmatter: &str) -> Self {
        let mut config = Config::new();
        config.apply_frontmatter("lua", frontmatter, 2).unwrap();
        let options = config.options().unwrap();
        Self { config, options }
    }

    fn ctx(&self) -> ApprovalContext<'_> {
        ApprovalContext::new(&self.config, &self.options)
            .with_tools(&|tool: &ToolName| tool == "bash")
            .with_sandbox(&true)
    }
}

/// `(decision, deciding resolver, failures as "resolver: report")` of one call.
async fn decide(
    conversation: &Conversation,
    tool: &str,
    input: Value,
) -> (Decision, String, Vec<String>) {
    let chain = Chain::with_builtins();
    let name = ToolName::new(tool).unwrap();
    let id = ToolUseId::new("toolu_01").unwrap();
    let call = ToolCall {
        name: &name,
        input: &input,
        id: Some(&id),
    };
    let outcome = chain.decide(&call, &conversation.ctx()).await;
    (
        outcome.decision,
        outcome
            .resolver
            .map_or_else(|| "default".to_owned(), ToString::to_string),
        outcome
            .failures
            .iter()
            .map(|f| format!("{}: {}", f.resolver, f.error.report()))
            .collect(),
    )
}

#[tokio::test]
async fn the_config_resolver_asks_the_seed_function_per_call() {
    let conversation = Conversation::new(CONFIGURING_APPROVAL);
    let config = CONFIG_RESOLVER.to_owned();
    assert_eq!(
        decide(&conversation, "grep", json!({"pattern": "x"})).await,
        (Decision::Approve, config.clone(), vec![])
    );
    assert_eq!(
        decide(&conversation, "bash", json!({"command": "rm -rf /"})).await,
        (Decision::Deny { reason: None }, config.clone(), vec![])
    );
    // `false`: the config resolver asks, before the sandbox resolver could approve bash.
    assert_eq!(
        decide(&conversation, "bash", json!({"command": "ls"})).await,
        (Decision::RequireApproval, config.clone(), vec![])
    );
    // `read` is in the default `$standard`, which the function replaced.
    assert_eq!(
        decide(&conversation, "read", json!({"path": "a"})).await,
        (Decision::RequireApproval, config, vec![])
    );
}

#[tokio::test]
async fn nil_passes_and_the_sandbox_resolver_stands_back_for_a_function() {
    let conversation = Conversation::new(PER_BUFFER_APPROVAL);
    assert_eq!(
        decide(&conversation, "grep", json!({})).await,
        (Decision::Approve, CONFIG_RESOLVER.to_owned(), vec![])
    );
    // Without the frontmatter the sandbox resolver approves bash (the control)...
    let plain = Conversation::new("flemma.opt.tools.max_concurrent = 4");
    assert_eq!(
        decide(&plain, "bash", json!({"command": "ls"})).await,
        (Decision::Approve, SANDBOX_RESOLVER.to_owned(), vec![])
    );
    // ... with the function, which passed, the conversation owns the policy: nobody approves.
    assert_eq!(
        decide(&conversation, "bash", json!({"command": "ls"})).await,
        (Decision::RequireApproval, "default".to_owned(), vec![])
    );
    let chain = Chain::with_builtins();
    let name = ToolName::new("bash").unwrap();
    let input = json!({"command": "ls"});
    let call = ToolCall {
        name: &name,
        input: &input,
        id: None,
    };
    let explained = chain.explain(&call, &conversation.ctx()).await;
    assert_eq!(
        serde_json::to_value(&explained).unwrap()["trace"],
        json!([
            {"resolver": "urn:flemma:approval:bash-rules", "priority": 150, "result": "pass", "detail": "no tools.bash.allow, ask or deny rules"},
            {"resolver": CONFIG_RESOLVER, "priority": 100, "result": "pass"},
            {"resolver": SANDBOX_RESOLVER, "priority": 25, "result": "pass", "detail": "the frontmatter sets tools.auto_approve"},
            {"resolver": "urn:flemma:approval:catch-all", "priority": 0, "result": "pass"}
        ])
    );
}

#[tokio::test]
async fn set_takes_ownership_of_the_policy_like_a_function() {
    let conversation = Conversation::new("flemma.opt.tools.auto_approve:set({\"read\"})");
    assert_eq!(
        decide(&conversation, "read", json!({})).await.0,
        Decision::Approve
    );
    assert_eq!(
        decide(&conversation, "bash", json!({"command": "ls"})).await,
        (Decision::RequireApproval, "default".to_owned(), vec![])
    );
    // An append is not a set: the sandbox resolver still approves bash.
    let conversation = Conversation::new("flemma.opt.tools.auto_approve:append(\"deploy\")");
    assert_eq!(
        decide(&conversation, "bash", json!({"command": "ls"}))
            .await
            .1,
        SANDBOX_RESOLVER
    );
}

#[tokio::test]
async fn a_failing_function_asks_and_is_reported() {
    // The seed's function on a bash call without `command` raises an error at line 4.
    let conversation = Conversation::new(CONFIGURING_APPROVAL);
    assert_eq!(
        decide(&conversation, "bash", json!({})).await,
        (
            Decision::RequireApproval,
            CONFIG_RESOLVER.to_owned(),
            vec![format!(
                "{CONFIG_RESOLVER}: the auto_approve function failed, so the call waits for \
                 approval: line 4: attempt to index a nil value (field 'command')"
            )]
        )
    );
    for (body, error) in [
        (
            "while true do end",
            "line 3: the auto_approve function ran too long",
        ),
        (
            "return \"approve\"",
            "the auto_approve function returned invalid result: \"approve\" (expected true, \
             false, \"deny\" or nil)",
        ),
    ] {
        let conversation = Conversation::new(&format!(
            "flemma.opt.tools.auto_approve = function()\n  {body}\nend"
        ));
        // Never an approval, and not a pass either (the catch-all would approve with
        // `tools.require_approval = false`).
        assert_eq!(
            decide(&conversation, "grep", json!({})).await,
            (
                Decision::RequireApproval,
                CONFIG_RESOLVER.to_owned(),
                vec![format!(
                    "{CONFIG_RESOLVER}: the auto_approve function failed, so the call waits for \
                     approval: {error}"
                )]
            ),
            "{body}"
        );
    }
    let conversation = Conversation::new(
        "flemma.opt.tools.require_approval = false\n\
         flemma.opt.tools.auto_approve = function() error(\"down\") end",
    );
    assert_eq!(
        decide(&conversation, "grep", json!({})).await.0,
        Decision::RequireApproval
    );
}
