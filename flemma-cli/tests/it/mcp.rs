//! MCP servers of `flemma.toml` in the CLI's commands, run for real:
//! `@modelcontextprotocol/server-everything` (pinned in `tests/mcp/package-lock.json`,
//! installed by `scripts/test` with `npm ci`).

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::Value;

use crate::scratch::Scratch;
use crate::{flemma, text};

/// The installed server-everything.
pub(crate) fn everything_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test, which installs the MCP test servers",
        bin.display()
    );
    bin
}

/// A directory of its own holding `flemma.toml` (server-everything as `everything`, only
/// `echo` and `get-sum`, a server that cannot start as `broken`, and `extra` appended to
/// the file) and `chat.chat` holding `chat`; returns the directory.
fn workspace(test: &str, chat: &str, extra: &str) -> Scratch {
    let dir = Scratch::new(format!("flemma-cli-test-{}-mcp-{test}", std::process::id()));
    let toml = format!(
        "[sandbox]\nenabled = false\n\n\
         [mcp.servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\ninclude = [\"echo\", \"get-sum\"]\n\n\
         [mcp.servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n\n{extra}",
        everything_bin().display().to_string()
    );
    std::fs::write(dir.join("flemma.toml"), toml).unwrap();
    std::fs::write(dir.join("chat.chat"), chat).unwrap();
    dir
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The output with the machine's paths replaced by placeholders.
fn normalized(output: &str) -> String {
    output.replace(
        &everything_bin().display().to_string(),
        "<mcp-server-everything>",
    )
}

/// The `everything.*` names of `flemma tools`' output.
fn everything_names(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|n| n.starts_with("everything."))
        .collect()
}

/// `flemma mcp list CHAT --json` with `config`, which must succeed.
fn mcp_list_json(chat: &Path, config: &Path) -> Value {
    let out = flemma(
        &["mcp", "list", arg(chat), "--config", arg(config), "--json"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each tool of a listed server, and whether the conversation offers it.
fn offered(server: &Value) -> Vec<(&str, bool)> {
    server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["offered"].as_bool().unwrap()))
        .collect()
}

const CHAT: &str = "```lua\nflemma.opt.tools:remove(\"everything.get-sum\")\n```\n@You:\nhi\n";

#[test]
fn mcp_list_shows_each_server_its_state_and_its_tools_as_the_conversation_offers_them() {
    let dir = workspace("list", CHAT, "");
    let config = dir.join("flemma.toml");
    let chat = dir.join("chat.chat");
    let out = flemma(&["mcp", "list", arg(&chat), "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    insta::assert_snapshot!(normalized(&text(&out.stdout)));
    // The failed server is a warning on stderr too.
    assert!(
        text(&out.stderr).contains("MCP server 'broken'"),
        "{}",
        text(&out.stderr)
    );

    let listed = mcp_list_json(&chat, &config);
    let everything = &listed[1];
    assert_eq!(everything["name"], "everything");
    assert_eq!(everything["state"], "running");
    let offered = offered(everything);
    assert_eq!(
        offered,
        [("everything.echo", true), ("everything.get-sum", false)]
    );
    assert_eq!(listed[0]["name"], "broken");
    assert_eq!(listed[0]["state"], "failed");
    assert!(
        listed[0]["error"]
            .as_str()
            .unwrap()
            .contains("could not start")
    );
}

#[test]
fn the_servers_tools_are_in_the_tool_set_and_names_the_options_may_give() {
    let dir = workspace("tools", CHAT, "");
    let config = dir.join("flemma.toml");
    let out = flemma(&["tools", "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let names = everything_names(&text(&out.stdout));
    assert_eq!(names, ["everything.echo", "everything.get-sum"]);

    // `request` offers the conversation's tool set as a run would, the server's included.
    let chat = dir.join("chat.chat");
    let out = flemma(
        &[
            "request",
            arg(&chat),
            "--provider",
            "anthropic",
            "--config",
            arg(&config),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    let wire: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("everything"))
        .collect();
    assert_eq!(wire, ["everything__echo"]);

    // `check` knows them: removing one is no misspelled name; a name the server does not
    // have is.
    let out = flemma(&["check", arg(&chat), "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    std::fs::write(
        &chat,
        "```lua\nflemma.opt.tools:append(\"everything.no-such-tool\")\n```\n@You:\nhi\n",
    )
    .unwrap();
    let out = flemma(&["check", arg(&chat), "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("everything.no-such-tool"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_run_over_the_scripted_provider_calls_an_mcp_tool_end_to_end() {
    let dir = workspace(
        "run",
        "@You:\nEcho something through the server.\n",
        "[tools]\nauto_approve = [\"everything.echo\"]\n",
    );
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [
            {"text": "Calling the server.", "tool_uses": [{"name": "everything.echo", "input": {"message": "hello over MCP"}}]},
            {"text": "The server echoed it."}
        ]}"#,
    )
    .unwrap();
    let chat = dir.join("chat.chat");
    let out = flemma(
        &[
            "run",
            arg(&chat),
            "--provider",
            "scripted",
            "--script",
            arg(&script),
            "--config",
            arg(&dir.join("flemma.toml")),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(&chat).unwrap();
    assert!(after.contains("**Tool Use:** `everything.echo`"), "{after}");
    let result = after.find("**Tool Result:**").expect("a tool result");
    assert!(after[result..].contains("Echo: hello over MCP"), "{after}");
    assert!(
        after[result..].contains("@Assistant:\nThe server echoed it.\n"),
        "{after}"
    );
}

#[test]
fn a_configuration_flemma_mcp_cannot_read_is_a_usage_error_naming_the_file() {
    let dir = workspace(
        "bad-config",
        CHAT,
        "[mcp.servers.nocommand]\nargs = [\"x\"]\n",
    );
    let config = dir.join("flemma.toml");
    let out = flemma(&["tools", "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("flemma.toml") && stderr.contains("MCP server 'nocommand'"),
        "{stderr}"
    );
}

/// The installed server-filesystem.
fn filesystem_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/node_modules/.bin/mcp-server-filesystem");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test",
        bin.display()
    );
    bin
}

#[test]
fn the_servers_hints_decide_in_the_chain_and_show_in_approval_explain() {
    let dir = workspace(
        "hints",
        "@You:\nhi\n\n@Assistant:\n\
         **Tool Use:** `everything.echo` (`toolu_echo`)\n```json\n{\"message\":\"read-only\"}\n```\n\
         **Tool Use:** `fs.write_file` (`toolu_write`)\n```json\n{\"path\":\"PATH\",\"content\":\"x\"}\n```\n",
        "",
    );
    let dir = dir.canonicalize().unwrap();
    let written = dir.join("written.txt");
    let chat = dir.join("chat.chat");
    let text_of_chat = std::fs::read_to_string(&chat)
        .unwrap()
        .replace("PATH", arg(&written));
    std::fs::write(&chat, text_of_chat).unwrap();
    // The host trusts server-everything's annotations (issue 34: untrusted, they approve
    // nothing).
    let mut toml = std::fs::read_to_string(dir.join("flemma.toml"))
        .unwrap()
        .replace(
            "include = [\"echo\", \"get-sum\"]\n",
            "include = [\"echo\", \"get-sum\"]\ntrusted = true\n",
        );
    let fs = format!(
        "[mcp.servers.fs]\ncommand = {:?}\nargs = [{:?}]\n\n[tools]\nauto_approve = [\"$standard\", \"fs.*\"]\n",
        filesystem_bin().display().to_string(),
        dir.display().to_string()
    );
    toml.push_str(&fs);
    let config = dir.join("flemma.toml");
    std::fs::write(&config, toml).unwrap();

    // echo says readOnlyHint: the default preset approves it; write_file says
    // destructiveHint: `fs.*` does not approve it.
    let explain = |tool: &str| {
        let out = flemma(
            &[
                "approval",
                "explain",
                arg(&chat),
                "--tool",
                tool,
                "--config",
                arg(&config),
                "--json",
            ],
            None,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let echo = explain("everything.echo");
    assert_eq!(echo["decision"], "approve", "{echo}");
    assert_eq!(
        echo["resolver"], "urn:flemma:approval:mcp-read-only",
        "{echo}"
    );
    let write = explain("fs.write_file");
    assert_eq!(write["decision"], "require_approval", "{write}");
    assert_eq!(
        write["resolver"], "urn:flemma:approval:mcp-destructive",
        "{write}"
    );
    let out = flemma(
        &[
            "approval",
            "explain",
            arg(&chat),
            "--tool",
            "fs.write_file",
            "--config",
            arg(&config),
        ],
        None,
    );
    assert!(
        text(&out.stdout).contains("destructiveHint: true"),
        "{}",
        text(&out.stdout)
    );

    // A cycle runs echo and leaves write_file pending: nothing is written.
    let out = flemma(&["cycle", arg(&chat), "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(&chat).unwrap();
    assert!(after.contains("Echo: read-only"), "{after}");
    assert!(
        after.contains("**Tool Result:** `toolu_write` (pending)"),
        "{after}"
    );
    assert!(!written.exists());
}

#[test]
fn a_frontmatter_narrows_the_configured_servers_and_cannot_define_one() {
    let narrowing = "```lua\nflemma.opt.mcp.servers.everything.exclude:append(\"get-sum\")\n```\n@You:\nhi\n\n@Assistant:\n\
         **Tool Use:** `everything.get-sum` (`toolu_sum`)\n```json\n{\"a\": 1, \"b\": 2}\n```\n";
    let dir = workspace(
        "narrow",
        narrowing,
        "[tools]\nauto_approve = [\"everything.*\"]\n",
    );
    let config = dir.join("flemma.toml");
    let chat = dir.join("chat.chat");
    let out = flemma(&["tools", arg(&chat), "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let names = everything_names(&text(&out.stdout));
    assert_eq!(names, ["everything.echo"]);
    let listed = mcp_list_json(&chat, &config);
    let offered = offered(&listed[1]);
    assert_eq!(
        offered,
        [("everything.echo", true), ("everything.get-sum", false)]
    );
    // `auto_approve` matches it, the narrowing denies it first, and the call never runs.
    let out = flemma(
        &[
            "approval",
            "explain",
            arg(&chat),
            "--tool",
            "everything.get-sum",
            "--config",
            arg(&config),
            "--json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let explained: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(explained["decision"], "deny", "{explained}");
    assert_eq!(
        explained["resolver"], "urn:flemma:approval:mcp-narrowed",
        "{explained}"
    );
    let out = flemma(&["cycle", arg(&chat), "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(&chat).unwrap();
    let result = after
        .find("**Tool Result:** `toolu_sum`")
        .expect("a result");
    assert!(
        after[result..].contains("The tool was denied by a policy."),
        "{after}"
    );
    assert!(!after[result..].contains("The sum of"), "{after}");
}

#[test]
fn a_frontmatter_cannot_define_a_server_or_narrow_one_that_is_not_configured() {
    let dir = workspace("define", CHAT, "");
    let config = dir.join("flemma.toml");
    let chat = dir.join("chat.chat");
    // Defining a server, or changing how one starts, is an error; nothing starts.
    let marker = dir.join("started");
    for code in [
        format!(
            "flemma.opt.mcp.servers.evil.command = \"touch\"\nflemma.opt.mcp.servers.evil.args = {{\"{}\"}}",
            marker.display()
        ),
        format!(
            "flemma.opt.mcp.servers.everything.args = {{\"{}\"}}",
            marker.display()
        ),
    ] {
        std::fs::write(&chat, format!("```lua\n{code}\n```\n@You:\nhi\n")).unwrap();
        for command in ["check", "cycle"] {
            let out = flemma(&[command, arg(&chat), "--config", arg(&config)], None);
            let output = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert_ne!(out.status.code(), Some(0), "{command}: {output}");
            assert!(
                output.contains("cannot define an MCP server or change how one starts"),
                "{command}: {output}"
            );
        }
    }
    assert!(
        !marker.exists(),
        "a process the frontmatter named was started"
    );

    // A misspelled server would leave the one meant unnarrowed: an error with a suggestion.
    std::fs::write(
        &chat,
        "```json\n{\"flemma\": {\"mcp\": {\"servers\": {\"everthing\": {\"enabled\": false}}}}}\n```\n@You:\nhi\n",
    )
    .unwrap();
    let out = flemma(&["check", arg(&chat), "--config", arg(&config)], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("Unknown MCP server 'everthing'")
            && text(&out.stdout).contains("did you mean 'everything'?"),
        "{}",
        text(&out.stdout)
    );
}
