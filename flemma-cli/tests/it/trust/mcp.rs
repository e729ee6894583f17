//! Item 7: an MCP server gets neither the provider keys nor other credentials, its own
//! annotations approve nothing unless the host trusts the server, and it cannot take
//! flemma's namespace. Run with `@modelcontextprotocol/server-everything`, whose `get-env`
//! (annotated read-only) returns its whole environment.

use pretty_assertions::assert_eq;

use super::Project;
use crate::mcp::everything_bin;
use crate::text;

const SECRETS: [(&str, &str); 3] = [
    ("ANTHROPIC_API_KEY", "sk-ant-canary-1"),
    ("DEPLOY_KEY", "deploy-canary-2"),
    ("DATABASE_URL", "postgres://app:pw-canary-3@db/app"),
];

fn toml(extra: &str) -> String {
    format!(
        "[mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\ninclude = [\"get-env\"]\n{extra}",
        everything_bin().display().to_string()
    )
}

const CHAT: &str = "@You:\nWhat is set?\n\n@Assistant:\n**Tool Use:** `everything.get-env` (`toolu_1`)\n```json\n{}\n```\n";

#[test]
fn a_server_reads_no_credentials_and_its_read_only_hint_approves_nothing() {
    let p = Project::new("mcp-env");
    p.write("proj/flemma.toml", &toml(""));
    let chat = p.write("proj/x.chat", CHAT);
    let chat = chat.to_str().unwrap();
    // Untrusted: `readOnlyHint` does not approve the call (it would under `$standard`).
    let cycle = p.flemma_with(&["cycle", chat], &SECRETS);
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    let after = p.read("proj/x.chat");
    assert!(
        after.contains("**Tool Result:** `toolu_1` (pending)"),
        "{after}"
    );
    // A person approves it: the server's environment holds none of the credentials.
    let approve = p.flemma_with(&["approve", chat, "toolu_1"], &SECRETS);
    assert_eq!(approve.status.code(), Some(0), "{}", text(&approve.stderr));
    let cycle = p.flemma_with(&["cycle", chat], &SECRETS);
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    let after = p.read("proj/x.chat");
    assert!(after.contains("\"PATH\""), "get-env did not run: {after}");
    for (name, value) in SECRETS {
        assert!(!after.contains(value), "{name} reached the server: {after}");
    }
}

#[test]
fn a_trusted_servers_hint_approves_and_a_key_passes_only_by_name() {
    let p = Project::new("mcp-trusted");
    p.write(
        "proj/flemma.toml",
        &toml("trusted = true\nenv = { DEPLOY_KEY = \"${DEPLOY_KEY}\" }\n"),
    );
    let chat = p.write("proj/x.chat", CHAT);
    let cycle = p.flemma_with(&["cycle", chat.to_str().unwrap()], &SECRETS);
    assert_eq!(cycle.status.code(), Some(0), "{}", text(&cycle.stderr));
    let after = p.read("proj/x.chat");
    assert!(after.contains("\"PATH\""), "get-env did not run: {after}");
    assert!(after.contains("deploy-canary-2"), "{after}");
    assert!(!after.contains("sk-ant-canary-1"), "{after}");
}

#[test]
fn a_server_cannot_be_named_into_flemmas_namespace() {
    let p = Project::new("mcp-reserved");
    p.write(
        "proj/flemma.toml",
        &toml("").replace("[mcp.servers.everything]", "[mcp.servers.flemma]"),
    );
    let chat = p.write("proj/x.chat", "@You:\nHi.\n");
    let check = p.flemma(&["tools", chat.to_str().unwrap()]);
    assert_ne!(check.status.code(), Some(0), "{}", text(&check.stdout));
    assert!(
        text(&check.stderr).contains("MCP server name \"flemma\" is reserved"),
        "{}",
        text(&check.stderr)
    );
}
