//! `flemma run`: the quickstart offline, approval stops, usage errors; plain output without a
//! terminal.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use crate::{flemma, scratch, text};

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

#[test]
fn the_quickstart_runs_offline_into_the_output_file_and_leaves_the_example_unchanged() {
    let chat = examples().join("quickstart.chat");
    let script = examples().join("quickstart.script.json");
    let before = std::fs::read_to_string(&chat).unwrap();
    let scratch = scratch("quickstart.chat", b"");
    let output = scratch.with_file_name("out/quickstart.chat");
    let out = flemma(
        &[
            "run",
            chat.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
        None,
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(std::fs::read_to_string(&chat).unwrap(), before);
    // No terminal: no escape codes, plain status lines.
    assert!(!stdout.contains('\x1b') && !stderr.contains('\x1b'));
    insta::assert_snapshot!("quickstart_status", stderr);
    assert!(
        stdout.starts_with("Let me look at the directory first.\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("`cargo run --example NAME`.\n"),
        "{stdout}"
    );

    let transcript = std::fs::read_to_string(&output).unwrap();
    let doc = flemma::ast::parse(&transcript);
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    // The tools ran for real, in the example's directory.
    assert!(
        transcript.contains("quickstart.script.json\n"),
        "{transcript}"
    );
    assert!(
        transcript.contains("let session = Session::builder(chat.clone(), tools, model).build();"),
        "{transcript}"
    );
    assert!(transcript.ends_with("`cargo run --example NAME`.\n\n@You:\n"));
    // The book's "Getting started" shows this transcript as what the command gives: it must be.
    assert_eq!(book_quickstart(), transcript);
}

/// The transcript the book's "Getting started" shows after the README's main command (the
/// block after "`target/quickstart.chat` afterwards").
fn book_quickstart() -> String {
    let page = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/getting-started.md"),
    )
    .unwrap();
    let after = page
        .split_once("`target/quickstart.chat` afterwards")
        .unwrap()
        .1;
    let block = after.split_once("````text\n").unwrap().1;
    block.split_once("````\n").unwrap().0.to_owned()
}

#[test]
fn a_call_that_needs_approval_stops_the_run_and_the_next_run_resumes() {
    let script = scratch(
        "approval.script.json",
        br#"[{"tool_uses": [{"name": "bash", "input": {"command": "printf hi > note.txt"}}]}, {"text": "Written."}]"#,
    );
    let chat = scratch("approval.chat", b"@You:\nList.\n");
    let run = |script: &Path| {
        flemma(
            &[
                "run",
                chat.to_str().unwrap(),
                "--provider",
                "scripted",
                "--script",
                script.to_str().unwrap(),
                "--approve",
                "ask",
                // Bubblewrap would let the sandbox resolver approve bash.
                "--set",
                "sandbox.enabled=false",
            ],
            None,
        )
    };
    // Without a terminal `ask` behaves like `none`: the call waits in the file.
    let out = run(&script);
    assert_eq!(out.status.code(), Some(3));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("pending: bash toolu_scripted_1_1"),
        "{stderr}"
    );
    assert!(stderr.ends_with("stopped: awaiting_approval\n"), "{stderr}");
    let waiting = std::fs::read_to_string(&chat).unwrap();
    assert!(
        waiting.contains("`toolu_scripted_1_1` (pending)"),
        "{waiting}"
    );
    // Approved in the transcript, the next run (a new process, the same script: the
    // the book's flow) executes it and sends; the script resumes after the turn the
    // conversation holds, so no call id repeats.
    let approve = flemma(
        &["approve", chat.to_str().unwrap(), "toolu_scripted_1_1"],
        None,
    );
    assert_eq!(approve.status.code(), Some(0));
    let out = run(&script);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Written.\n");
    assert_eq!(
        std::fs::read_to_string(chat.with_file_name("note.txt")).unwrap(),
        "hi"
    );
    let done = std::fs::read_to_string(&chat).unwrap();
    assert!(done.contains("```\n(no output)\n```"), "{done}");
    assert!(done.ends_with("@Assistant:\nWritten.\n\n@You:\n"), "{done}");
    assert_eq!(done.matches("**Tool Use:**").count(), 1, "{done}");
    let check = flemma(&["check", chat.to_str().unwrap()], None);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
}

/// Two calls with one id: results are matched by id, so the later call would never be
/// answered. `check` says so, as an error on the later call's line.
#[test]
fn check_reports_a_duplicate_tool_use_id() {
    let chat = scratch(
        "duplicate.chat",
        b"@You:\nList.\n\n@Assistant:\n**Tool Use:** `ls` (`toolu_1`)\n```json\n{\"path\": \".\"}\n```\n\n@You:\n**Tool Result:** `toolu_1`\n```\na.txt\n```\n\n@Assistant:\n**Tool Use:** `ls` (`toolu_1`)\n```json\n{\"path\": \"src\"}\n```\n",
    );
    let check = flemma(&["check", chat.to_str().unwrap()], None);
    assert_eq!(check.status.code(), Some(1));
    assert_eq!(
        text(&check.stdout),
        format!(
            "{}:17: error: tool_use: Duplicate tool use id `toolu_1` (first used on line 5): its result would answer the first call; give this call an id of its own\n",
            chat.display()
        )
    );
    // `run` says the same, runs nothing and stops idle without the "ends with the model's
    // answer" hint, which would be wrong here.
    let script = scratch("duplicate.script.json", br#"[{"text": "Never sent."}]"#);
    let out = run_scripted(&chat, &script, "5");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("Duplicate tool use id `toolu_1`") && stderr.ends_with("stopped: idle\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("nothing to do"), "{stderr}");
    assert!(
        !std::fs::read_to_string(&chat)
            .unwrap()
            .contains("Never sent.")
    );
}

#[test]
fn approve_all_runs_every_call() {
    let script = scratch(
        "all.script.json",
        br#"[{"tool_uses": [{"name": "bash", "input": {"command": "printf hi > note.txt"}}]}, {"text": "Written."}]"#,
    );
    let chat = scratch("all.chat", b"@You:\nList.\n");
    let out = flemma(
        &[
            "run",
            chat.to_str().unwrap(),
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
            "--approve",
            "all",
            "--max-turns",
            "3",
            "--set",
            "sandbox.enabled=false",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Written.\n");
    assert_eq!(
        std::fs::read_to_string(chat.with_file_name("note.txt")).unwrap(),
        "hi"
    );
}

#[test]
fn usage_errors_exit_2() {
    let chat = scratch("usage.chat", b"@You:\nHi.\n");
    let out = flemma(
        &["run", chat.to_str().unwrap(), "--provider", "scripted"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "flemma: --provider scripted needs --script PATH\n"
    );
    let out = flemma(
        &[
            "run",
            "/nonexistent/x.chat",
            "--provider",
            "scripted",
            "--script",
            "x.json",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("flemma: cannot read the script x.json"));
}

/// A real provider through `FLEMMA_BASE_URL` and the key from the environment: a local
/// server replays the recorded Anthropic streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_through_flemma_base_url_with_the_key_from_the_environment() {
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, Request, ResponseTemplate};

    let peer = |name: &str| std::fs::read(crate::peer_dir().join(name)).unwrap();
    let server = MockServer::start().await;
    for (recording, has_result) in [
        ("anthropic_tool_use_streaming.txt", false),
        ("anthropic_final_response_streaming.txt", true),
    ] {
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", "sk-from-env"))
            .and(move |request: &Request| {
                String::from_utf8_lossy(&request.body).contains("tool_result") == has_result
            })
            .respond_with(
                ResponseTemplate::new(200)
                    .insert_header("content-type", "text/event-stream")
                    .set_body_bytes(peer(recording)),
            )
            .mount(&server)
            .await;
    }
    // The recordings call `calculator`, which the CLI does not offer: approved, the call gets
    // `Unknown tool`, and that result is sent.
    let chat = scratch("http.chat", b"@You:\nWhat is 15 multiplied by 7?\n");
    let uri = server.uri();
    let out = tokio::task::spawn_blocking(move || {
        crate::flemma_command()
            .args(["run", chat.to_str().unwrap(), "--provider", "anthropic"])
            .args(["--approve", "all"])
            .env("ANTHROPIC_API_KEY", "sk-from-env")
            .env("FLEMMA_BASE_URL", uri)
            .output()
            .map(|out| (out, chat))
    })
    .await
    .unwrap()
    .unwrap();
    let (out, chat) = out;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "15 multiplied by 7 equals 105.\n",
        "{}",
        text(&out.stderr)
    );
    let transcript = std::fs::read_to_string(chat).unwrap();
    assert!(
        transcript.contains("(error)\n```\nUnknown tool: calculator\n```"),
        "{transcript}"
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let second: serde_json::Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!(second["model"], "claude-sonnet-4-5");
    assert_eq!(second["messages"][2]["content"][0]["is_error"], true);
}

/// Ctrl-C (SIGINT) while the response streams: the abort marker, exit 130.
#[cfg(unix)]
#[test]
fn an_interrupt_cancels_the_streaming_request() {
    let script = scratch(
        "slow.script.json",
        br#"[{"text": "one \ntwo \nthree \nfour \nfive \nsix \nseven \neight", "delay_ms": 200}]"#,
    );
    let chat = scratch("slow.chat", b"@You:\nCount slowly.\n");
    let child = crate::flemma_command()
        .args(["run", chat.to_str().unwrap(), "--provider", "scripted"])
        .args(["--script", script.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until some text is in the file, then interrupt.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&chat).unwrap().contains("one") {
        assert!(std::time::Instant::now() < deadline, "no text arrived");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("cancelling the request"), "{stderr}");
    let transcript = std::fs::read_to_string(&chat).unwrap();
    assert!(
        transcript.ends_with("\n\n<!-- flemma:aborted: Response interrupted by the user. -->\n"),
        "{transcript}"
    );
    assert!(transcript.contains("@Assistant:\none \n"), "{transcript}");
    assert!(!transcript.contains("eight"), "{transcript}");
    assert!(flemma::ast::parse(&transcript).diagnostics.is_empty());
}

#[test]
fn an_output_that_is_the_file_itself_edits_it_in_place() {
    let script = scratch("self.script.json", br#"[{"text": "Hi."}]"#);
    let chat = scratch("self.chat", b"@You:\nHello.\n");
    let out = flemma(
        &[
            "run",
            chat.to_str().unwrap(),
            "--output",
            chat.to_str().unwrap(),
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(&chat).unwrap(),
        "@You:\nHello.\n\n@Assistant:\nHi.\n\n@You:\n"
    );
}

/// `flemma run` with the scripted provider on `chat`, every call approved, at most
/// `max_turns` tool turns in a row.
fn run_scripted(chat: &Path, script: &Path, max_turns: &str) -> std::process::Output {
    flemma(
        &[
            "run",
            chat.to_str().unwrap(),
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
            "--approve",
            "all",
            "--max-turns",
            max_turns,
            "--set",
            "sandbox.enabled=false",
        ],
        None,
    )
}

/// Each way a run stops has its own exit code (the book's "The `flemma` command", exit codes), and the stops that
/// leave work say what to do next.
#[test]
fn a_runs_exit_code_says_how_it_stopped() {
    let two_turns = scratch(
        "codes.script.json",
        br#"[{"tool_uses": [{"name": "bash", "input": {"command": "true"}}]}, {"tool_uses": [{"name": "bash", "input": {"command": "true"}}]}, {"text": "Done."}]"#,
    );
    // Stopped by --max-turns: 4, and how to go on.
    let limited = scratch("codes-limit.chat", b"@You:\nGo.\n");
    let out = run_scripted(&limited, &two_turns, "1");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("stopped: max_turns\n"), "{stderr}");
    assert!(stderr.contains("run again to go on"), "{stderr}");
    // Finished: 0.
    let finished = scratch("codes-finished.chat", b"@You:\nGo.\n");
    let out = run_scripted(&finished, &two_turns, "5");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).ends_with("stopped: finished\n"));
    // Run again on the finished conversation: nothing to do, 0, and how to continue.
    let out = run_scripted(&finished, &two_turns, "5");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("stopped: idle\nnothing to do: ")
            && stderr.contains("ends with the model's answer; add a @You: message and run again"),
        "{stderr}"
    );
}

/// Markers that name no role (`@User:`, `@you:`, `@Assistent:`) are not sent, as the spec
/// says, but never silently: `check` warns with the role meant, and `run` and `request`
/// refuse a conversation that has nothing else to send.
#[test]
fn unknown_role_markers_are_reported_and_an_empty_request_is_refused() {
    let chat = scratch(
        "roles.chat",
        b"@User:\nList the files.\n\n@you:\nPlease.\n\n@Assistent:\nSure.\n\n@Notes:\nmine\n",
    );
    let check = flemma(&["check", chat.to_str().unwrap()], None);
    assert_eq!(check.status.code(), Some(1));
    let name = chat.display();
    assert_eq!(
        text(&check.stdout),
        format!(
            "{name}:1: warning: role: @User: is not a role: its message is not sent (did you mean @You:?)\n\
             {name}:4: warning: role: @you: is not a role: its message is not sent (did you mean @You:?)\n\
             {name}:7: warning: role: @Assistent: is not a role: its message is not sent (did you mean @Assistant:?)\n\
             {name}:10: warning: role: @Notes: is not a role: its message is not sent (the roles are @System:, @You: and @Assistant:)\n"
        )
    );
    let script = scratch("roles.script.json", br#"[{"text": "Hello."}]"#);
    let out = run_scripted(&chat, &script, "3");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "warning: line 1: @User: is not a role: its message is not sent (did you mean @You:?)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "there is nothing to send: the conversation has no @You: or @Assistant: message"
        ),
        "{stderr}"
    );
    assert!(text(&out.stdout).is_empty());
    assert!(!std::fs::read_to_string(&chat).unwrap().contains("Hello."));
    let request = flemma(
        &["request", "--provider", "anthropic", chat.to_str().unwrap()],
        None,
    );
    assert_eq!(request.status.code(), Some(1));
    assert!(
        text(&request.stderr).contains("there is nothing to send"),
        "{}",
        text(&request.stderr)
    );
    // With a message to send, the others are still named, and the run goes on.
    let mixed = scratch("roles-mixed.chat", b"@User:\nHi.\n\n@You:\nList.\n");
    let out = run_scripted(&mixed, &script, "3");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("@User: is not a role"), "{stderr}");
    assert_eq!(text(&out.stdout), "Hello.\n");
}

/// With no one to ask, a subagent's call that needs approval stops the parent too, naming the
/// child's call and the command that approves it; approved there, the next run of the parent
/// (a new process, the same script) resumes the child where it stopped.
#[test]
fn a_waiting_subagent_stops_the_parent_and_the_next_run_resumes_it() {
    let chat = scratch(
        "agent-wait.chat",
        b"```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"agent\"]}}}\n```\n@You:\nDelegate it.\n",
    );
    let dir = chat.parent().unwrap().to_owned();
    std::fs::create_dir_all(dir.join(".flemma/agents")).unwrap();
    std::fs::write(
        dir.join(".flemma/agents/marker.md"),
        "---\ndescription: Marks things.\ntools: [bash]\n---\nYou mark things.\n",
    )
    .unwrap();
    let script = dir.join("agent-wait.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_uses": [{"name": "agent", "input": {"agent": "marker", "prompt": "Mark it."}}]},
            {"tool_uses": [{"name": "bash", "input": {"command": "echo marked > marker"}}]},
            {"text": "Marked."},
            {"text": "Done."}
        ])
        .to_string(),
    )
    .unwrap();
    let run = || {
        flemma(
            &[
                "run",
                chat.to_str().unwrap(),
                "--provider",
                "scripted",
                "--script",
                script.to_str().unwrap(),
                "--approve",
                "none",
                "--set",
                "sandbox.enabled=false",
            ],
            None,
        )
    };
    let out = run();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let child = dir.join("agent-wait.marker.toolu_scripted_1_1.chat");
    let shown = child.display().to_string();
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "waiting: agent toolu_scripted_1_1: subagent 'marker' waits for approval in {shown}: \
             bash toolu_scripted_2_1 (flemma approve {shown} toolu_scripted_2_1, or flemma reject \
             {shown} toolu_scripted_2_1)"
        )),
        "{stderr}"
    );
    assert!(stderr.ends_with("stopped: awaiting_approval\n"), "{stderr}");
    assert!(!dir.join("marker").exists());

    let approve = flemma(&["approve", &shown, "toolu_scripted_2_1"], None);
    assert_eq!(approve.status.code(), Some(0), "{}", text(&approve.stderr));
    let out = run();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.join("marker")).unwrap(),
        "marked\n"
    );
    let done = std::fs::read_to_string(&chat).unwrap();
    assert!(done.contains("Marked.\n\nSubagent transcript: "), "{done}");
    assert!(done.ends_with("@Assistant:\nDone.\n\n@You:\n"), "{done}");
    let check = flemma(&["check", &shown], None);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
    // The parent's commands know the project's agents: its `agent` tool is no unknown name.
    let check = flemma(&["check", chat.to_str().unwrap()], None);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
    let tools = flemma(&["tools", chat.to_str().unwrap()], None);
    let listed = text(&tools.stdout);
    assert!(listed.lines().any(|l| l.starts_with("agent ")), "{listed}");
    assert!(listed.contains("Delegate a task to a subagent"), "{listed}");
}

/// A definition file that cannot be used is a warning on stderr, and what its name or text
/// holds cannot steer the terminal: controls are shown as escapes.
#[test]
fn a_broken_agent_definition_is_an_escaped_warning() {
    let chat = scratch("agent-warn.chat", b"@You:\nHi.\n");
    let dir = chat.parent().unwrap().to_owned();
    std::fs::create_dir_all(dir.join(".claude/agents")).unwrap();
    std::fs::write(
        dir.join(".claude/agents/\x1b[2Jevil.md"),
        "---\ndescription: [unclosed\n---\n",
    )
    .unwrap();
    std::fs::write(
        dir.join(".claude/agents/wide.md"),
        "---\ndescription: Wide.\npermissionMode: bypassPermissions\n---\nGo.\n",
    )
    .unwrap();
    let out = flemma(&["tools", chat.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
    assert!(
        stderr.contains("\\x1b[2Jevil.md: the frontmatter cannot be read"),
        "{stderr}"
    );
    assert!(
        stderr.contains("wide.md: agent wide: `permissionMode` is not honoured"),
        "{stderr}"
    );
    // The definition that can be used is offered, without what it may not widen.
    assert!(text(&out.stdout).lines().any(|l| l.starts_with("agent ")));
}

/// `flemma run sub/FILE` from another directory: the agents are the conversation's project's,
/// and the child's transcript is beside FILE, not in the working directory.
#[test]
fn a_relative_file_from_another_directory_finds_its_projects_agents() {
    let chat = scratch(
        "agent-rel.chat",
        b"```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"agent\"]}}}\n```\n@You:\nAsk.\n",
    );
    let dir = chat.parent().unwrap().to_owned();
    let base = dir.parent().unwrap().to_owned();
    let relative = format!(
        "{}/agent-rel.chat",
        dir.file_name().unwrap().to_str().unwrap()
    );
    std::fs::create_dir_all(dir.join(".flemma/agents")).unwrap();
    std::fs::write(
        dir.join(".flemma/agents/helper.md"),
        "---\ndescription: Helps.\ntools: []\n---\nHelp.\n",
    )
    .unwrap();
    let script = dir.join("rel.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"tool_uses": [{"name": "agent", "input": {"agent": "helper", "prompt": "Help."}}]},
            {"text": "Helped."},
            {"text": "Done."}
        ])
        .to_string(),
    )
    .unwrap();
    let out = crate::flemma_command()
        .current_dir(&base)
        .args(["run", &relative, "--provider", "scripted"])
        .args(["--script", script.to_str().unwrap(), "--approve", "none"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let done = std::fs::read_to_string(&chat).unwrap();
    assert!(done.contains("Helped.\n\nSubagent transcript: "), "{done}");
    assert!(
        dir.join("agent-rel.helper.toolu_scripted_1_1.chat")
            .exists()
    );
    assert!(
        !base
            .join("agent-rel.helper.toolu_scripted_1_1.chat")
            .exists()
    );
}
