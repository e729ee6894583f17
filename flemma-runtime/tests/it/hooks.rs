//! Hooks: each tool event with in-process hooks (a table of cases), and command hooks run
//! for real (bash and Python scripts under `tests/it/hooks/`, some written the way Claude
//! Code users write them), with assertions on the transcript.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use flemma_approval::Chain;
use flemma_core::hooks::HookEvent;
use flemma_core::hooks::{
    Hook, HookError, PostToolUseAnswer, PreToolUseAnswer, PreToolUseInput, on,
};
use flemma_runtime::hooks::HookRegistration;
use flemma_runtime::hooks::{Compat, from_config, hook_fn};
use flemma_runtime::{
    Event, Executor, FileConversation, MemoryConversation, ToolRegistry, register_builtins,
};

use crate::cycle::test_registry;
use crate::scratch::Scratch;

const APPROVE_ALL: &str = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"*\"]}}}\n```\n";

fn echo_call(text: &str) -> String {
    format!(
        "@Assistant:\n**Tool Use:** `echo` (`toolu_1`)\n```json\n{{\"text\":\"{text}\"}}\n```\n"
    )
}

/// Runs one cycle of `text` with `registry`; the transcript after it and the warnings.
async fn cycle(text: &str, registry: ToolRegistry) -> (String, Vec<String>) {
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry).build();
    let mut events = executor.subscribe();
    executor.cycle().await.unwrap();
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(w) = event {
            warnings.push(w);
        }
    }
    (conversation.text(), warnings)
}

#[track_caller]
fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
}

fn pre(
    name: &str,
    f: impl Fn(&PreToolUseInput) -> PreToolUseAnswer + Send + Sync + 'static,
) -> HookRegistration {
    hook_fn(on::PreToolUse, f).named(name).unwrap()
}

struct Case {
    name: &'static str,
    frontmatter: &'static str,
    hooks: Vec<HookRegistration>,
    expect: &'static [&'static str],
    absent: &'static [&'static str],
}

/// The `PreToolUse` table: each case's hooks, and what the transcript holds after a cycle.
fn pre_cases() -> Vec<Case> {
    vec![
        Case {
            name: "a denial with its reason reaches the model, naming the hook",
            frontmatter: APPROVE_ALL,
            hooks: vec![pre("no-hi", |_| PreToolUseAnswer::deny("no greetings"))],
            expect: &["The tool was denied by a policy. Hook `no-hi`: no greetings"],
            absent: &["\nhi\n"],
        },
        Case {
            name: "allow runs a call the options would ask about",
            frontmatter: "",
            hooks: vec![pre("yes", |_| PreToolUseAnswer::allow())],
            expect: &["**Tool Result:** `toolu_1`\n```\nhi\n```"],
            absent: &["(pending)"],
        },
        Case {
            name: "ask makes an auto-approved call pending",
            frontmatter: APPROVE_ALL,
            hooks: vec![pre("ask", |_| PreToolUseAnswer::ask("are you sure?"))],
            expect: &["(pending)"],
            absent: &["\nhi\n"],
        },
        Case {
            name: "a denial wins over a higher hook's allow",
            frontmatter: "",
            hooks: vec![
                pre("first", |_| PreToolUseAnswer::allow()).priority(90),
                pre("second", |_| PreToolUseAnswer::deny("second says no")).priority(10),
            ],
            expect: &["Hook `second`: second says no"],
            absent: &["\nhi\n"],
        },
        Case {
            name: "a rewrite is what the Tool Use block holds and what runs",
            frontmatter: APPROVE_ALL,
            hooks: vec![pre("loud", |call| {
                let text = call.input["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_uppercase();
                PreToolUseAnswer::pass().with_input(serde_json::json!({ "text": text }))
            })],
            expect: &["{\"text\":\"HI\"}", "```\nHI\n```"],
            absent: &["{\"text\":\"hi\"}"],
        },
        Case {
            name: "hooks run in priority order, each seeing the rewrite before it",
            frontmatter: APPROVE_ALL,
            hooks: vec![
                pre("then", |call| {
                    let text = format!("{}-then", call.input["text"].as_str().unwrap_or_default());
                    PreToolUseAnswer::pass().with_input(serde_json::json!({ "text": text }))
                })
                .priority(1),
                pre("first", |_| {
                    PreToolUseAnswer::pass().with_input(serde_json::json!({ "text": "first" }))
                })
                .priority(99),
            ],
            expect: &["```\nfirst-then\n```"],
            absent: &[],
        },
        Case {
            name: "context is a note the result shows",
            frontmatter: APPROVE_ALL,
            hooks: vec![pre("ctx", |_| {
                PreToolUseAnswer::pass().with_context("the user is on call")
            })],
            expect: &["hi\n\nHook `ctx`: the user is on call"],
            absent: &[],
        },
        Case {
            name: "a hook that matches other tools has no say",
            frontmatter: APPROVE_ALL,
            hooks: vec![
                pre("bash-only", |_| PreToolUseAnswer::deny("no"))
                    .matcher("bash|write")
                    .unwrap(),
            ],
            expect: &["```\nhi\n```"],
            absent: &["denied"],
        },
        Case {
            name: "an input that is not an object is refused and the call runs as asked",
            frontmatter: APPROVE_ALL,
            hooks: vec![pre("bad", |_| {
                PreToolUseAnswer::pass().with_input(serde_json::json!("text"))
            })],
            expect: &["```\nhi\n```"],
            absent: &[],
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_tool_use_hooks_decide_rewrite_and_annotate() {
    for case in pre_cases() {
        let registry = test_registry();
        for hook in case.hooks {
            registry.register_hook(hook).unwrap();
        }
        let text = format!("{}{}", case.frontmatter, echo_call("hi"));
        let (after, _) = cycle(&text, registry).await;
        for part in case.expect {
            assert!(
                after.contains(part),
                "{}: {part:?} missing from:\n{after}",
                case.name
            );
        }
        for part in case.absent {
            assert!(
                !after.contains(part),
                "{}: {part:?} present in:\n{after}",
                case.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_tool_use_hooks_change_results() {
    let cases: Vec<(&str, HookRegistration, &str, &[&str])> = vec![
        (
            "append",
            hook_fn(on::PostToolUse, |_| PostToolUseAnswer::append("(appended)"))
                .named("a")
                .unwrap(),
            "echo",
            &["```\nhi\n(appended)\n```"],
        ),
        (
            "replace",
            hook_fn(on::PostToolUse, |_| PostToolUseAnswer::replace("replaced"))
                .named("r")
                .unwrap(),
            "echo",
            &["```\nreplaced\n```"],
        ),
        (
            "mark an error",
            hook_fn(on::PostToolUse, |_| {
                PostToolUseAnswer::pass().mark_error(true)
            })
            .named("e")
            .unwrap(),
            "echo",
            &["(error)"],
        ),
        (
            "context, seeing the result",
            hook_fn(on::PostToolUse, |r| {
                PostToolUseAnswer::pass()
                    .with_context(format!("saw {:?} error={}", r.result, r.is_error))
            })
            .named("see")
            .unwrap(),
            "echo",
            &["Hook `see`: saw \"hi\" error=false"],
        ),
        (
            "a failure goes to PostToolUseFailure",
            hook_fn(on::PostToolUseFailure, |r| {
                PostToolUseAnswer::append(format!("failed: {}", r.result))
            })
            .named("f")
            .unwrap(),
            "fail",
            &["(error)", "boom\nfailed: boom"],
        ),
    ];
    for (name, hook, tool, expect) in cases {
        let registry = test_registry();
        registry.register_hook(hook).unwrap();
        let input = if tool == "fail" {
            "{\"error\":\"boom\"}"
        } else {
            "{\"text\":\"hi\"}"
        };
        let text = format!(
            "{APPROVE_ALL}@Assistant:\n**Tool Use:** `{tool}` (`toolu_1`)\n```json\n{input}\n```\n"
        );
        let (after, _) = cycle(&text, registry).await;
        for part in expect {
            assert!(
                after.contains(part),
                "{name}: {part:?} missing from:\n{after}"
            );
        }
    }
    // A success does not reach a PostToolUseFailure hook.
    let registry = test_registry();
    registry
        .register_hook(
            hook_fn(on::PostToolUseFailure, |_| PostToolUseAnswer::replace("no"))
                .named("f")
                .unwrap(),
        )
        .unwrap();
    let (after, _) = cycle(&format!("{APPROVE_ALL}{}", echo_call("hi")), registry).await;
    assert_contains(&after, &["```\nhi\n```"]);
}

/// A hook that fails or panics at every event.
struct Broken {
    panics: bool,
}

#[async_trait]
impl Hook for Broken {
    async fn pre_tool_use(&self, _: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
        assert!(!self.panics, "the hook panicked");
        Err(HookError::new("policy service down"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_fails_or_panics_is_a_warning_and_no_opinion() {
    for panics in [false, true] {
        let registry = test_registry();
        let hook =
            HookRegistration::new("broken", [HookEvent::PreToolUse], Broken { panics }).unwrap();
        registry.register_hook(hook).unwrap();
        // Without auto-approval the call still waits: a broken hook is no yes.
        let (after, warnings) = cycle(&echo_call("hi"), registry).await;
        assert_contains(&after, &["(pending)"]);
        let expected = if panics {
            "hook 'broken' panicked"
        } else {
            "hook 'broken' error: policy service down"
        };
        assert!(warnings.iter().any(|w| w == expected), "{warnings:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_own_chain_still_hears_the_hooks() {
    let registry = test_registry();
    registry
        .register_hook(pre("no", |_| PreToolUseAnswer::deny("never")))
        .unwrap();
    let conversation = Arc::new(MemoryConversation::new(format!(
        "{APPROVE_ALL}{}",
        echo_call("hi")
    )));
    let executor = Executor::builder(conversation.clone(), registry)
        .chain(Arc::new(Chain::with_builtins()))
        .build();
    executor.cycle().await.unwrap();
    assert_contains(&conversation.text(), &["Hook `no`: never"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_call_is_a_notification() {
    let registry = test_registry();
    let told = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&told);
    let hook = hook_fn(on::Notification, move |n| {
        assert_eq!(n.message, "flemma needs your permission to use echo");
        assert_eq!(n.kind, "permission_prompt");
        count.fetch_add(1, Ordering::SeqCst);
    });
    registry.register_hook(hook.named("tell").unwrap()).unwrap();
    let (after, _) = cycle(&echo_call("hi"), registry).await;
    assert_contains(&after, &["(pending)"]);
    assert_eq!(told.load(Ordering::SeqCst), 1);
}

// --- Command hooks, run for real ---

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/hooks")
}

fn scratch(name: &str) -> Scratch {
    Scratch::canonical(format!("flemma-hooks-{name}-{}", std::process::id()))
}

/// A registry with the built-in tools and the command hooks of `toml`.
fn with_command_hooks(toml: &str) -> ToolRegistry {
    let registry = ToolRegistry::new();
    register_builtins(&registry).unwrap();
    let mut config = flemma_config::Config::new();
    config.load_toml_str(toml, "flemma.toml".as_ref()).unwrap();
    for hook in from_config(&config, None).unwrap().hooks {
        registry.register_hook(hook).unwrap();
    }
    registry
}

/// Runs one cycle of `text` as `dir/chat.chat`; the file after it and the warnings.
async fn file_cycle(dir: &Path, text: &str, registry: ToolRegistry) -> (String, Vec<String>) {
    let path = dir.join("chat.chat");
    std::fs::write(&path, text).unwrap();
    // No sandbox backend: `bash` is decided by the hooks and the options alone (bubblewrap
    // would let the sandbox resolver approve it), wherever the test runs.
    let executor = Executor::builder(Arc::new(FileConversation::new(&path)), registry)
        .sandbox_backends(flemma_core::sandbox::SandboxBackends::new())
        .build();
    let mut events = executor.subscribe();
    executor.cycle().await.unwrap();
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(w) = event {
            warnings.push(w);
        }
    }
    (std::fs::read_to_string(&path).unwrap(), warnings)
}

fn bash_call(id: &str, command: &str) -> String {
    let input = serde_json::json!({"label": "run", "command": command});
    format!("**Tool Use:** `bash` (`{id}`)\n```json\n{input}\n```\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_scripts_block_and_rewrite_bash_unchanged() {
    let dir = scratch("claude-bash");
    let toml = format!(
        "[hooks]\ncompat = \"claude\"\n\n[[hooks.PreToolUse]]\nmatcher = \"Bash\"\nhooks = [{{ type = \"command\", command = \"{}\" }}]\n\n[[hooks.PreToolUse]]\nmatcher = \"Bash\"\ncommand = \"python3 {}\"\n",
        scripts().join("deny_rm.sh").display(),
        scripts().join("rewrite_echo.py").display(),
    );
    let registry = with_command_hooks(&toml);
    let text = format!(
        "@Assistant:\n{}{}",
        bash_call("toolu_rm", "rm -rf ./build"),
        bash_call("toolu_hi", "echo hi"),
    );
    let (after, warnings) = file_cycle(&dir, &text, registry).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    // Exit 2: denied, stderr the reason the model reads.
    assert_contains(
        &after,
        &[
            "The tool was denied by a policy. Hook `PreToolUse-001`: Blocked: recursive deletes are not allowed (rm -rf ./build)",
        ],
    );
    // The JSON answer: allowed without auto-approval, the block rewritten, `label` kept.
    assert_contains(
        &after,
        &[
            "{\"label\":\"run\",\"command\":\"echo rewritten\"}",
            "**Tool Result:** `toolu_hi`\n```\nrewritten\n```",
        ],
    );
    assert!(!after.contains("echo hi"), "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_file_path_hooks_see_absolute_paths_and_note_results() {
    let dir = scratch("claude-write");
    let log = dir.join("post.log");
    let toml = format!(
        "[hooks]\ncompat = \"claude\"\n\n[[hooks.PreToolUse]]\nmatcher = \"Write|Edit\"\ncommand = \"python3 {}\"\n\n[[hooks.PostToolUse]]\nmatcher = \"Write\"\ncommand = \"HOOK_LOG={} {}\"\n",
        scripts().join("protect_env.py").display(),
        log.display(),
        scripts().join("lint_note.sh").display(),
    );
    let registry = with_command_hooks(&toml);
    let write = |id: &str, path: &str| {
        let input = serde_json::json!({"label": "w", "path": path, "content": "x=1\n"});
        format!("**Tool Use:** `write` (`{id}`)\n```json\n{input}\n```\n")
    };
    let text = format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"auto_approve\": [\"write\"]}}}}}}\n```\n@Assistant:\n{}{}",
        write("toolu_env", ".env"),
        write("toolu_ok", "notes.txt"),
    );
    let (after, warnings) = file_cycle(&dir, &text, registry).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    let env = dir.join(".env");
    assert!(!env.exists(), "the denied write ran");
    assert_contains(
        &after,
        &[&format!(
            "Write of {} refused: secrets live there",
            env.display()
        )],
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "x=1\n"
    );
    let notes = dir.join("notes.txt");
    assert_contains(
        &after,
        &[
            "(checked)",
            &format!("Hook `PostToolUse-001`: lint clean: {}", notes.display()),
        ],
    );
    // What the PostToolUse hook was given, in Claude Code's vocabulary.
    let seen: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&log).unwrap().trim()).unwrap();
    assert_eq!(seen["hook_event_name"], "PostToolUse");
    assert_eq!(seen["tool_name"], "Write");
    assert_eq!(seen["tool_input"]["file_path"], notes.display().to_string());
    assert_eq!(
        seen["tool_response"]["filePath"],
        notes.display().to_string()
    );
    assert_eq!(seen["tool_response"]["success"], true);
    assert_eq!(seen["tool_use_id"], "toolu_ok");
    assert_eq!(seen["cwd"], dir.display().to_string());
    assert_eq!(
        seen["transcript_path"],
        dir.join("chat.chat").display().to_string()
    );
}

/// A Claude Code hook on `Edit` reads `old_string` / `new_string` (our `oldText` / `newText`)
/// and its `updatedInput` reaches the tool: a denial it bases on them holds (the canary never
/// reaches the file), and its rewrite is what the edit writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_edit_hooks_see_and_rewrite_the_texts() {
    let dir = scratch("claude-edit");
    let toml = format!(
        "[hooks]\ncompat = \"claude\"\n\n[[hooks.PreToolUse]]\nmatcher = \"Edit\"\ncommand = \"python3 {}\"\n",
        scripts().join("guard_edit.py").display(),
    );
    let registry = with_command_hooks(&toml);
    std::fs::write(dir.join("a.txt"), "hello draft\n").unwrap();
    std::fs::write(dir.join("b.txt"), "hello world\n").unwrap();
    let edit = |id: &str, path: &str, old: &str, new: &str| {
        let input = serde_json::json!({"label": "e", "path": path, "oldText": old, "newText": new});
        format!("**Tool Use:** `edit` (`{id}`)\n```json\n{input}\n```\n")
    };
    let text = format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"auto_approve\": [\"edit\"]}}}}}}\n```\n@Assistant:\n{}{}",
        edit("toolu_canary", "b.txt", "world", "CANARY-secret"),
        edit("toolu_draft", "a.txt", "draft", "draft"),
    );
    let (after, warnings) = file_cycle(&dir, &text, registry).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).unwrap(),
        "hello world\n"
    );
    assert_contains(&after, &["the canary stays out"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "hello final\n"
    );
    assert_contains(&after, &["\"newText\":\"final\""]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_hook_that_times_out_or_exits_1_is_a_warning() {
    let dir = scratch("slow");
    let pid_file = dir.join("child.pid");
    let toml = format!(
        "[[hooks.PreToolUse]]\nmatcher = \"bash\"\ncommand = \"HOOK_LOG={} {}\"\ntimeout = 0.5\n\n[[hooks.PreToolUse]]\nname = \"broken\"\ncommand = \"{}\"\n",
        pid_file.display(),
        scripts().join("slow.sh").display(),
        scripts().join("exit1.sh").display(),
    );
    let registry = with_command_hooks(&toml);
    let started = std::time::Instant::now();
    let (after, warnings) = file_cycle(
        &dir,
        &format!("@Assistant:\n{}", bash_call("toolu_1", "echo hi")),
        registry,
    )
    .await;
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(
        warnings,
        [
            "hook 'PreToolUse-001' error: timed out after 0.5s",
            "hook 'broken' error: exited with status 1: the hook broke",
        ]
    );
    // No opinion from either: the call waits for the user.
    assert_contains(&after, &["(pending)"]);
    // The hook's process group died with it.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ");
    assert!(!alive, "the hook's child {pid} outlived its timeout");
}

#[test]
fn hooks_configuration_is_checked() {
    let bad = [
        (
            "[[hooks.PreTool]]\ncommand = \"x\"\n",
            "hooks.PreTool: not a hook event",
        ),
        (
            "[[hooks.PreToolUse]]\nmatcher = \"a\"\n",
            "hooks.PreToolUse[0].command: expected a string",
        ),
        (
            "[[hooks.Stop]]\ncommand = \"x\"\ntimeout = -1\n",
            "hooks.Stop[0].timeout: expected a positive number",
        ),
        (
            "[hooks]\ncompat = \"codex\"\n",
            "hooks.compat: expected \"claude\" or \"native\"",
        ),
        (
            "[[hooks.PreToolUse]]\ntype = \"prompt\"\ncommand = \"x\"\n",
            "only \"command\" hooks are supported",
        ),
    ];
    for (toml, message) in bad {
        let mut config = flemma_config::Config::new();
        config.load_toml_str(toml, "flemma.toml".as_ref()).unwrap();
        let error = from_config(&config, None).unwrap_err().to_string();
        assert!(error.contains(message), "{toml}: {error}");
    }
    // Two files: the second's hooks join the first's.
    let mut config = flemma_config::Config::new();
    config
        .load_toml_str(
            "[[hooks.PreToolUse]]\ncommand = \"a\"\n",
            "user.toml".as_ref(),
        )
        .unwrap();
    config
        .load_toml_str(
            "[[hooks.PreToolUse]]\ncommand = \"b\"\n",
            "project.toml".as_ref(),
        )
        .unwrap();
    let hooks = from_config(&config, None).unwrap();
    assert_eq!(hooks.hooks.len(), 2);
    assert_eq!(hooks.compat, Compat::Native);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_jobs_result_passes_through_post_tool_use() {
    let registry = test_registry();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let hook = hook_fn(on::PostToolUse, move |r| {
        record
            .lock()
            .unwrap()
            .push((r.tool.to_string(), r.id.to_string(), r.result.clone()));
        PostToolUseAnswer::append("(checked)").mark_error(true)
    });
    registry.register_hook(hook.named("jobs").unwrap()).unwrap();
    let text = format!(
        "{APPROVE_ALL}@You:\nWait.\n\n@Assistant:\n**Tool Use:** `sleep` (`toolu_j`)\n```json\n{{\"ms\": 20, \"flemma.background\": true}}\n```\n"
    );
    // The job's journal (the conversation's store) in a directory of the test's: an unnamed
    // conversation's store is under the temporary directory, where it would be left behind.
    let dir = scratch("background-job");
    let mut config = flemma_config::Config::new();
    config
        .set(
            flemma_config::Layer::Setup,
            "tools.store.unnamed_path_format",
            format!(
                "{}/{{{{ bufnr }}}}/{{{{ source }}}}_{{{{ name }}}}_{{{{ id }}}}.txt",
                dir.display()
            ),
        )
        .unwrap();
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry)
        .config(config)
        .build();
    executor.cycle().await.unwrap();
    assert_eq!(executor.wait_jobs().await.unwrap().len(), 1);
    let after = conversation.text();
    let job = after.split("**Job Result:**").nth(1).expect("a Job Result");
    assert!(
        job.contains("(error)\n```\nslept 20\n(checked)\n```"),
        "{after}"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            "sleep".to_owned(),
            "toolu_j".to_owned(),
            "slept 20".to_owned()
        )]
    );
}

/// Denies in conversation `b` only, after a pause (so that decisions interleave).
struct PerConversation;

#[async_trait]
impl Hook for PerConversation {
    async fn pre_tool_use(&self, call: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
        let b = call.context.session_id == "b";
        tokio::time::sleep(std::time::Duration::from_millis(if b { 1 } else { 20 })).await;
        Ok(if b {
            PreToolUseAnswer::deny("not in b")
        } else {
            PreToolUseAnswer::allow()
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_sharing_a_registry_never_read_each_others_verdicts() {
    let registry = test_registry();
    let hook = HookRegistration::new("per", [HookEvent::PreToolUse], PerConversation).unwrap();
    registry.register_hook(hook).unwrap();
    let run = |id: &'static str| {
        let registry = registry.clone();
        async move {
            let conversation = Arc::new(MemoryConversation::new(echo_call("hi")));
            let executor = Executor::builder(conversation.clone(), registry)
                .conversation_id(id)
                .build();
            executor.cycle().await.unwrap();
            conversation.text()
        }
    };
    let (a, b) = tokio::join!(tokio::spawn(run("a")), tokio::spawn(run("b")));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_contains(&a, &["**Tool Result:** `toolu_1`\n```\nhi\n```"]);
    assert_contains(&b, &["Hook `per`: not in b"]);
}

/// A frontmatter (JSON) adding `hooks`, with the approval of every call.
fn frontmatter_with_hooks(hooks: &serde_json::Value) -> String {
    let flemma = serde_json::json!({"flemma": {"tools": {"auto_approve": ["*"]}, "hooks": hooks}});
    format!("```json\n{flemma}\n```\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontmatter_adds_hooks_only_where_the_host_allows_it() {
    let dir = scratch("frontmatter-hooks");
    let path = dir.join("chat.chat");
    let hooks = serde_json::json!({
        "PreToolUse": [{"matcher": "bash", "command": scripts().join("deny_rm.sh").display().to_string()}],
        "PostToolUse": [{"name": "note", "matcher": "bash", "command":
            "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", \"additionalContext\": \"seen by the conversation hook\"}}'"}],
    });
    let text = format!(
        "{}@Assistant:\n{}{}",
        frontmatter_with_hooks(&hooks),
        bash_call("toolu_rm", "rm -rf ./build"),
        bash_call("toolu_hi", "echo hi"),
    );
    // The host's own hook runs beside the conversation's.
    let seen = Arc::new(AtomicUsize::new(0));
    let executor = |allow: bool| {
        let registry = ToolRegistry::new();
        register_builtins(&registry).unwrap();
        let count = Arc::clone(&seen);
        registry
            .register_hook(pre("host", move |_| {
                count.fetch_add(1, Ordering::SeqCst);
                PreToolUseAnswer::pass()
            }))
            .unwrap();
        let mut config = flemma_config::Config::new();
        config
            .load_toml_str(
                &format!("[hooks]\nallow_frontmatter = {allow}\n\n[sandbox]\nenabled = false\n"),
                "flemma.toml".as_ref(),
            )
            .unwrap();
        Executor::builder(Arc::new(FileConversation::new(&path)), registry)
            .config(config)
            .build()
    };
    std::fs::write(&path, &text).unwrap();
    let run = executor(true);
    let mut events = run.subscribe();
    run.cycle().await.unwrap();
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(w) = event {
            warnings.push(w);
        }
    }
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    let after = std::fs::read_to_string(&path).unwrap();
    assert_contains(
        &after,
        &[
            "The tool was denied by a policy. Hook `frontmatter:PreToolUse-001`: Blocked: recursive deletes are not allowed (rm -rf ./build)",
            "**Tool Result:** `toolu_hi`\n```\nhi\n\nHook `frontmatter:note`: seen by the conversation hook\n```",
        ],
    );

    // Without the host's leave, nothing of the conversation runs.
    std::fs::write(&path, &text).unwrap();
    let error = crate::chain(&executor(false).cycle().await.unwrap_err());
    assert!(error.contains("cannot add hooks"), "{error}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

    // A frontmatter hook that is wrong is an error at the frontmatter, and nothing runs.
    let wrong = format!(
        "{}@Assistant:\n{}",
        frontmatter_with_hooks(&serde_json::json!({"PreToolUse": [{"matcher": "bash"}]})),
        bash_call("toolu_hi", "echo hi"),
    );
    std::fs::write(&path, &wrong).unwrap();
    let error = crate::chain(&executor(true).cycle().await.unwrap_err());
    assert!(
        error.contains(
            "line 2: invalid hooks: frontmatter: hooks.PreToolUse[0].command: expected a string"
        ),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), wrong);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executors_own_hooks_are_its_conversations_alone() {
    let registry = test_registry();
    registry
        .register_hook(pre("guard", |_| PreToolUseAnswer::allow()))
        .unwrap();
    let text = echo_call("hi");
    // One executor replaces the registry's `guard` with its own; the other keeps it.
    let strict = Arc::new(MemoryConversation::new(&text));
    let executor = Executor::builder(strict.clone(), registry.clone())
        .hook(pre("guard", |_| PreToolUseAnswer::deny("strict session")))
        .build();
    assert_eq!(
        executor.hooks().await.unwrap().names(HookEvent::PreToolUse),
        ["guard"]
    );
    executor.cycle().await.unwrap();
    assert_contains(
        &strict.text(),
        &["The tool was denied by a policy. Hook `guard`: strict session"],
    );
    let (other, _) = cycle(&text, registry.clone()).await;
    assert_contains(&other, &["**Tool Result:** `toolu_1`\n```\nhi\n```"]);
    assert_eq!(registry.hooks().names(HookEvent::PreToolUse), ["guard"]);
}
