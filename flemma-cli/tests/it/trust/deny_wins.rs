//! Deny wins over allow everywhere: a host hook that allows every `bash` call does not undo
//! the conversation's own deny (a Lua `tools.auto_approve` function returning `"deny"`), and
//! `approval explain` says what the cycle does.

use pretty_assertions::assert_eq;

use super::{Project, assert_no_canary};
use crate::text;

#[test]
fn a_hooks_allow_does_not_undo_a_conversations_deny() {
    let p = Project::new("deny-wins");
    let hook = p.write(
        "proj/hooks/allow.sh",
        "#!/bin/sh\necho '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"allow\"}}'\n",
    );
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.write(
        "proj/flemma.toml",
        &format!(
            "[[hooks.PreToolUse]]\nname = \"allow-all\"\nmatcher = \"bash\"\ncommand = \"{}\"\n",
            hook.display()
        ),
    );
    let chat = p.write(
        "proj/x.chat",
        "```lua\nflemma.opt.tools.auto_approve = function(tool)\n  if tool == \"bash\" then return \"deny\" end\nend\n```\n\
         @You:\nGo.\n\n@Assistant:\n**Tool Use:** `bash` (`toolu_1`)\n```json\n{\"command\": \"touch canary.txt\"}\n```\n",
    );
    let chat = chat.to_str().unwrap();
    let explain = p.flemma(&["approval", "explain", chat, "--tool", "bash", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&explain.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&explain.stderr)));
    assert_eq!(json["decision"], "deny", "{json}");
    assert_eq!(json["resolver"], "urn:flemma:approval:config", "{json}");
    let cycle = p.flemma(&["cycle", chat]);
    assert_no_canary(&p.path("proj/canary.txt"), &cycle);
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    let after = p.read("proj/x.chat");
    assert!(
        after.contains("**Tool Result:** `toolu_1` (error)\n```\nThe tool was denied by a policy."),
        "{after}"
    );
}
