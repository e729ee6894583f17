//! The executor beyond single fixtures: concurrency, cancellation, the approver, user actions,
//! a file edited while a tool runs, line endings, and a property test over user text.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use flemma_core::{Answer, Approver, PendingCall};
use flemma_core::{ToolDefinition, ToolOutput, async_tool_fn};
use flemma_runtime::{
    ActionError, CycleReport, Event, Executor, ExecutorError, FileConversation, MemoryConversation,
    Next, ToolRegistry,
};
use proptest::prelude::*;

use crate::cycle::{run_cycle, test_registry};
use crate::scratch::Scratch;

const APPROVE_ALL: &str =
    "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"*\"], \"max_concurrent\": 2}}}\n```\n";

fn uses(tool: &str, inputs: &[&str]) -> String {
    let mut text = String::from("@Assistant:\n");
    for (i, input) in inputs.iter().enumerate() {
        let _ = write!(
            text,
            "**Tool Use:** `{tool}` (`toolu_{i:02}`)\n```json\n{input}\n```\n"
        );
    }
    text
}

/// Asserts that `text` holds each of `parts`, showing it when one is missing.
#[track_caller]
fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
}

/// Starts a cycle in a task of its own and hands it back once each of the calls `ids` runs.
pub(crate) async fn cycle_running(
    executor: &Arc<Executor>,
    ids: &[&str],
) -> tokio::task::JoinHandle<Result<CycleReport, ExecutorError>> {
    let mut events = executor.subscribe();
    let cycle = tokio::spawn({
        let executor = Arc::clone(executor);
        async move { executor.cycle().await }
    });
    let mut waiting = ids.to_vec();
    while !waiting.is_empty() {
        match events.recv().await {
            Some(Event::ToolExecuting { id, .. }) => waiting.retain(|w| id != *w),
            Some(_) => {}
            None => panic!("the events ended before {waiting:?} ran"),
        }
    }
    cycle
}

/// A tool that records how many of its calls run at once.
fn gauge_registry(running: Arc<AtomicUsize>, peak: Arc<AtomicUsize>) -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(async_tool_fn(
        ToolDefinition::builder("gauge", "Counts concurrent calls.")
            .unwrap()
            .asynchronous(true)
            .build()
            .unwrap(),
        move |input, _| {
            let running = Arc::clone(&running);
            let peak = Arc::clone(&peak);
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let ms = input["ms"].as_u64().unwrap_or(50);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                ToolOutput::text(format!("done {ms}"))
            }
        },
    ));
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_slow_tools_never_run_more_than_two_at_once_and_land_in_document_order() {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    // Later calls finish first: results still stand in the order of their tool uses.
    let inputs = [
        r#"{"ms":120}"#,
        r#"{"ms":100}"#,
        r#"{"ms":80}"#,
        r#"{"ms":60}"#,
        r#"{"ms":40}"#,
        r#"{"ms":20}"#,
    ];
    let text = format!("{APPROVE_ALL}{}", uses("gauge", &inputs));
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(
        conversation.clone(),
        gauge_registry(Arc::clone(&running), Arc::clone(&peak)),
    )
    .build();
    let report = executor.cycle().await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 2);
    assert_eq!(report.completed.len(), 6);
    assert_eq!(report.next, Next::Send);
    let after = conversation.text();
    let positions: Vec<usize> = (0..6)
        .map(|i| {
            after
                .find(&format!("**Tool Result:** `toolu_{i:02}`"))
                .unwrap()
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{after}");
    // Each result holds its own output.
    for (i, input) in inputs.iter().enumerate() {
        let ms: serde_json::Value = serde_json::from_str(input).unwrap();
        let block = &after[positions[i]..];
        assert!(block.contains(&format!("done {}", ms["ms"])), "{after}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_concurrent_zero_is_unlimited() {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let header = APPROVE_ALL.replace("\"max_concurrent\": 2", "\"max_concurrent\": 0");
    let text = format!("{header}{}", uses("gauge", &[r#"{"ms":100}"#; 5]));
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor =
        Executor::builder(conversation, gauge_registry(running, Arc::clone(&peak))).build();
    executor.cycle().await.unwrap();
    assert_eq!(peak.load(Ordering::SeqCst), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_a_running_call_with_the_spec_text() {
    let registry = test_registry();
    let text = format!(
        "{APPROVE_ALL}{}",
        uses("sleep", &[r#"{"ms":60000}"#, r#"{"ms":10}"#])
    );
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Arc::new(Executor::builder(conversation.clone(), registry).build());
    // Wait until the long call runs, then cancel it.
    let cycle = cycle_running(&executor, &["toolu_00"]).await;
    assert!(executor.is_running("toolu_00"));
    assert!(executor.cancel("toolu_00"));
    let report = tokio::time::timeout(Duration::from_secs(5), cycle)
        .await
        .expect("the cycle ends once the call is cancelled")
        .unwrap()
        .unwrap();
    assert!(!executor.cancel("toolu_00"), "no longer running");
    let after = conversation.text();
    assert_contains(
        &after,
        &["**Tool Result:** `toolu_00` (error)\n```\nUser aborted tool execution.\n```"],
    );
    assert!(after.contains("slept 10"), "{after}");
    assert_eq!(report.completed.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_all_ends_every_call() {
    let text = format!("{APPROVE_ALL}{}", uses("sleep", &[r#"{"ms":60000}"#; 2]));
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Arc::new(Executor::builder(conversation.clone(), test_registry()).build());
    let cycle = cycle_running(&executor, &["toolu_00", "toolu_01"]).await;
    executor.cancel_all();
    tokio::time::timeout(Duration::from_secs(5), cycle)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        conversation
            .text()
            .matches("User aborted tool execution.")
            .count(),
        2
    );
}

struct Decide;

#[async_trait::async_trait]
impl Approver for Decide {
    async fn ask(&self, call: &PendingCall) -> Answer {
        match call.input["text"].as_str() {
            Some("yes") => Answer::Approve,
            Some("quiet") => Answer::Reject(None),
            _ => Answer::Reject(Some(format!("No: {}", call.preview))),
        }
    }
}

#[tokio::test]
async fn an_approver_decides_pending_calls() {
    let text = uses(
        "echo",
        &[
            r#"{"text":"yes"}"#,
            r#"{"text":"no"}"#,
            r#"{"text":"quiet"}"#,
        ],
    );
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), test_registry())
        .approver(Arc::new(Decide))
        .build();
    let mut events = executor.subscribe();
    let report = executor.cycle().await.unwrap();
    assert_eq!(report.next, Next::Send);
    let after = conversation.text();
    assert_contains(
        &after,
        &[
            "**Tool Result:** `toolu_00`\n```\nyes\n```",
            "**Tool Result:** `toolu_01` (error)\n```\nUser feedback: No: echo: {text: \"no\"}\n```",
            "**Tool Result:** `toolu_02` (error)\n```\nThis tool has been rejected by the user.\n```",
        ],
    );
    let mut asked = 0;
    while let Some(event) = events.try_recv() {
        if matches!(event, Event::ApprovalAsked { .. }) {
            asked += 1;
        }
    }
    assert_eq!(asked, 3);
}

#[tokio::test]
async fn user_actions_rewrite_the_status_and_report_the_spec_errors() {
    let text = uses(
        "echo",
        &[r#"{"text":"a"}"#, r#"{"text":"b"}"#, r#"{"text":"c"}"#],
    );
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), test_registry()).build();
    // Before any placeholder exists.
    let err = executor.approve("toolu_00").await.unwrap_err();
    assert_eq!(err.to_string(), "No tool result placeholder for toolu_00");
    let err = executor.approve("toolu_99").await.unwrap_err();
    assert_eq!(err.to_string(), "Tool not found: toolu_99");

    let report = executor.cycle().await.unwrap();
    assert_eq!(report.next, Next::AwaitApproval);
    executor.approve("toolu_00").await.unwrap();
    executor
        .reject("toolu_01", Some("Use the other tool."))
        .await
        .unwrap();
    let after = conversation.text();
    assert_contains(
        &after,
        &[
            "**Tool Result:** `toolu_00` (approved)\n```\n```",
            "**Tool Result:** `toolu_01` (rejected)\n```\nUser feedback: Use the other tool.\n```",
        ],
    );
    executor.approve_all_pending().await.unwrap();
    let err = executor.approve_all_pending().await.unwrap_err();
    assert!(matches!(
        err,
        ExecutorError::Action(ActionError::NothingPending)
    ));
    assert_eq!(err.to_string(), "No pending tools to approve");

    let report = executor.cycle().await.unwrap();
    assert_eq!(report.next, Next::Send);
    let after = conversation.text();
    assert_contains(
        &after,
        &[
            "**Tool Result:** `toolu_00`\n```\na\n```",
            "**Tool Result:** `toolu_01` (error)\n```\nUser feedback: Use the other tool.\n```",
            "**Tool Result:** `toolu_02`\n```\nc\n```",
        ],
    );
    let err = executor.approve("toolu_00").await.unwrap_err();
    assert_eq!(err.to_string(), "Tool toolu_00 has already completed");
}

/// A reason given through `reject` is wrapped (`User feedback: …`, spec §15
/// `tool.rejected.feedback`); text the user typed into a `(rejected)` block is sent as written
/// (spec §7.5); a reason already wrapped is not wrapped twice.
#[tokio::test]
async fn a_rejection_reason_is_user_feedback_and_text_typed_in_the_block_stays_as_written() {
    let mut text = uses(
        "echo",
        &[r#"{"text":"a"}"#, r#"{"text":"b"}"#, r#"{"text":"c"}"#],
    );
    text.push_str(
        "\n@You:\n**Tool Result:** `toolu_00` (pending)\n```\n```\n\n\
         **Tool Result:** `toolu_01` (rejected)\n```\nNot this one, I typed this.\n```\n\n\
         **Tool Result:** `toolu_02` (pending)\n```\n```\n",
    );
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), test_registry()).build();
    executor
        .reject("toolu_00", Some("  Use the other tool.\n"))
        .await
        .unwrap();
    executor
        .reject("toolu_02", Some("User feedback: already wrapped"))
        .await
        .unwrap();
    let report = executor.cycle().await.unwrap();
    assert_eq!(report.next, Next::Send);
    let after = conversation.text();
    assert!(
        after.ends_with(
            "@You:\n**Tool Result:** `toolu_00` (error)\n```\nUser feedback: Use the other tool.\n```\n\n\
             **Tool Result:** `toolu_01` (error)\n```\nNot this one, I typed this.\n```\n\n\
             **Tool Result:** `toolu_02` (error)\n```\nUser feedback: already wrapped\n```\n"
        ),
        "{after}"
    );
}

#[tokio::test]
async fn crlf_transcripts_stay_crlf() {
    let text = format!("{APPROVE_ALL}{}", uses("echo", &[r#"{"text":"x"}"#])).replace('\n', "\r\n");
    let (after, report, _) = run_cycle(&text).await;
    assert_eq!(report.next, Next::Send);
    assert!(
        after.contains("**Tool Result:** `toolu_00`\r\n```\r\nx\r\n```\r\n"),
        "{after:?}"
    );
    assert!(!after.replace("\r\n", "").contains('\n'), "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_edited_while_a_tool_runs_keeps_both_edits() {
    let dir = Scratch::new(format!("flemma-runtime-file-{}", std::process::id()));
    let path = dir.join("edited.chat");
    let text = format!(
        "{APPROVE_ALL}@You:\nRun it.\n\n{}",
        uses("sleep", &[r#"{"ms":400}"#])
    );
    std::fs::write(&path, &text).unwrap();
    let conversation = Arc::new(FileConversation::new(&path));
    let executor = Arc::new(Executor::builder(conversation, test_registry()).build());
    let cycle = cycle_running(&executor, &["toolu_00"]).await;
    // The user edits the file (above the blocks) while the tool runs.
    let current = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, current.replace("Run it.", "Run it, please.")).unwrap();
    cycle.await.unwrap().unwrap();
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.contains("Run it, please."), "{after}");
    assert_contains(
        &after,
        &["**Tool Result:** `toolu_00`\n```\nslept 400\n```"],
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A cycle never deletes or alters text outside the blocks it owns: every line of the
    /// input outside tool-result blocks is still there, in order.
    #[test]
    fn a_cycle_keeps_user_text(
        user in proptest::collection::vec("[a-zA-Z ,.!?]{0,30}", 1..4),
        statuses in proptest::collection::vec(0usize..5, 1..4),
        trailing in "[a-z ]{0,20}",
    ) {
        let mut text = format!("{APPROVE_ALL}@You:\n{}\n\n@Assistant:\n", user.join("\n"));
        for i in 0..statuses.len() {
            let _ = write!(text, "Step {i}.\n**Tool Use:** `echo` (`t{i}`)\n```json\n{{\"text\":\"r{i}\"}}\n```\n");
        }
        text.push_str("\n@You:\n");
        for (i, status) in statuses.iter().enumerate() {
            let suffix = ["", " (pending)", " (approved)", " (denied)", " (rejected)"][*status];
            if *status == 0 {
                continue; // no result yet
            }
            let _ = write!(text, "**Tool Result:** `t{i}`{suffix}\n```\n```\n\n");
        }
        text.push_str(&trailing);
        text.push('\n');
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let (after, _, _) = runtime.block_on(run_cycle(&text));
        let doc = flemma_ast::parse(&text);
        let mut owned = std::collections::HashSet::new();
        for message in &doc.messages {
            for result in message.tool_results() {
                owned.extend(result.span.start_line..=result.span.end_line);
            }
        }
        let mut rest = after.lines();
        for (i, line) in text.lines().enumerate() {
            if owned.contains(&u32::try_from(i + 1).unwrap()) {
                continue;
            }
            prop_assert!(rest.any(|l| l == line), "line {} {:?} lost in\n{}", i + 1, line, after);
        }
        // And the result is a transcript that parses without new problems.
        prop_assert!(flemma_ast::parse(&after).diagnostics.is_empty());
    }
}

#[tokio::test]
async fn a_module_resolver_decides_in_phase_one_and_leaves_with_its_module() {
    use flemma_approval::{ResolverError, Verdict, resolver_fn};
    let registry = test_registry();
    let module = flemma_runtime::ToolModule::new("guard")
        .tool(flemma_core::tool_fn(
            ToolDefinition::builder("guard.ping", "Ping.")
                .unwrap()
                .build()
                .unwrap(),
            |_, _| ToolOutput::text("pong"),
        ))
        .resolver(
            Some(150),
            resolver_fn(|call, _| match call.input["text"].as_str() {
                Some("deny") => Ok(Verdict::deny(Some("no".into()))),
                Some("broken") => Err(ResolverError::new("policy service down")),
                _ => Ok(Verdict::approve()),
            }),
        );
    registry.register_module(module).unwrap();
    let text = uses(
        "echo",
        &[
            r#"{"text":"deny"}"#,
            r#"{"text":"fine"}"#,
            r#"{"text":"broken"}"#,
        ],
    ) + "**Tool Use:** `guard.ping` (`toolu_ping`)\n```json\n{}\n```\n";
    let conversation = Arc::new(MemoryConversation::new(text.clone()));
    let executor = Executor::builder(conversation.clone(), registry.clone()).build();
    let mut events = executor.subscribe();
    let report = executor.cycle().await.unwrap();
    let statuses: Vec<&str> = report.placed.iter().map(|p| p.status.as_str()).collect();
    // The failing resolver is skipped: the built-in chain then asks (pending).
    assert_eq!(statuses, ["denied", "approved", "pending", "approved"]);
    let after = conversation.text();
    assert_contains(
        &after,
        &[
            // The resolver's reason follows the spec's text.
            "**Tool Result:** `toolu_00` (error)\n```\nThe tool was denied by a policy. no\n```",
            "**Tool Result:** `toolu_ping`\n```\npong\n```",
        ],
    );
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(w) = event {
            warnings.push(w);
        }
    }
    assert_eq!(
        warnings,
        ["approval: resolver 'guard' error: policy service down"]
    );

    // Without the module, its tool is gone and its resolver no longer decides.
    assert!(registry.unregister_module("guard"));
    assert!(!registry.contains("guard.ping"));
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation, registry).build();
    let report = executor.cycle().await.unwrap();
    assert!(report.placed.iter().all(|p| p.status.as_str() == "pending"));
}

#[tokio::test]
async fn a_tool_reads_its_defaults_under_the_conversations_table() {
    let registry = ToolRegistry::new();
    let mut defaults = serde_json::Map::new();
    defaults.insert("greeting".into(), "hello".into());
    defaults.insert("times".into(), 1.into());
    registry.register(flemma_core::tool_fn(
        ToolDefinition::builder("greeter", "Greets.")
            .unwrap()
            .config_defaults(defaults)
            .build()
            .unwrap(),
        |_, ctx| {
            let options = ctx.tool_options().cloned().unwrap_or_default();
            ToolOutput::json(serde_json::Value::Object(options))
        },
    ));
    let text = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"greeter\"], \"greeter\": {\"times\": 3}}}}\n```\n"
        .to_owned()
        + &uses("greeter", &["{}"]);
    let conversation = Arc::new(MemoryConversation::new(text));
    Executor::builder(conversation.clone(), registry)
        .build()
        .cycle()
        .await
        .unwrap();
    assert!(
        conversation
            .text()
            .contains("```json\n{\"greeting\":\"hello\",\"times\":3}\n```"),
        "{}",
        conversation.text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_to_redirects_a_result_into_a_file_and_leaves_a_stub() {
    let dir = Scratch::new(format!("flemma-runtime-saveto-{}", std::process::id()));
    let path = dir.join("chat.chat");
    let text = format!(
        "{APPROVE_ALL}{}",
        uses(
            "echo",
            &[r#"{"text":"line one\nline two","flemma.save_to":"out/saved.txt"}"#]
        )
    );
    std::fs::write(&path, text).unwrap();
    let conversation = Arc::new(FileConversation::new(&path));
    Executor::builder(conversation, test_registry())
        .build()
        .cycle()
        .await
        .unwrap();
    let saved = dir.join("out/saved.txt");
    assert_eq!(
        std::fs::read_to_string(&saved).unwrap(),
        "line one\nline two"
    );
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(
        after.contains(&format!(
            "**Tool Result:** `toolu_00`\n```\nline one\nline two\n\n[Output saved: {} — 17B, 2 lines]\n```",
            saved.display()
        )),
        "{after}"
    );
}

struct SlowSource;

#[async_trait::async_trait]
impl flemma_runtime::ToolSource for SlowSource {
    fn name(&self) -> &'static str {
        "slow"
    }

    async fn resolve(
        &self,
        registrar: flemma_runtime::Registrar,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        tokio::time::sleep(Duration::from_millis(200)).await;
        registrar.register(flemma_core::tool_fn(
            ToolDefinition::builder("late.tool", "Arrives late.")?.build()?,
            |_, _| ToolOutput::text("here now"),
        ));
        Ok(())
    }
}

#[tokio::test]
async fn a_cycle_waits_for_tool_sources_before_answering_calls() {
    let registry = test_registry();
    registry
        .add_source(SlowSource, Duration::from_secs(5))
        .unwrap();
    let text = format!("{APPROVE_ALL}{}", uses("late.tool", &["{}"]));
    let conversation = Arc::new(MemoryConversation::new(text));
    Executor::builder(conversation.clone(), registry.clone())
        .build()
        .cycle()
        .await
        .unwrap();
    assert!(
        conversation
            .text()
            .contains("**Tool Result:** `toolu_00`\n```\nhere now\n```"),
        "{}",
        conversation.text()
    );
    let specs = registry
        .specs_when_ready(
            &flemma_config::Config::new()
                .options_with_tools(&registry.names())
                .unwrap(),
        )
        .await;
    assert!(specs.iter().any(|s| s.name == "late.tool"));
}

/// A conversation that records what the executor does to it: the changes applied to it, and
/// when it locks it.
struct Watched {
    inner: MemoryConversation,
    applied: AtomicUsize,
    locks: std::sync::Mutex<Vec<bool>>,
}

impl Watched {
    fn new(text: String) -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryConversation::new(text),
            applied: AtomicUsize::new(0),
            locks: std::sync::Mutex::new(Vec::new()),
        })
    }
}

#[async_trait::async_trait]
impl flemma_core::Conversation for Watched {
    async fn snapshot(&self) -> Result<flemma_core::Snapshot, flemma_core::ConversationError> {
        self.inner.snapshot().await
    }

    async fn apply(
        &self,
        revision: flemma_core::Revision,
        edits: &[flemma_ast::TextEdit],
        durability: flemma_core::Durability,
    ) -> Result<flemma_core::Snapshot, flemma_core::ConversationError> {
        self.applied.fetch_add(1, Ordering::SeqCst);
        self.inner.apply(revision, edits, durability).await
    }

    async fn set_locked(&self, locked: bool) {
        self.locks.lock().unwrap().push(locked);
    }
}

#[tokio::test]
async fn the_conversation_is_locked_while_calls_run_and_unlocked_after() {
    use flemma_core::Conversation as _;
    let text = format!("{APPROVE_ALL}{}", uses("nope", &["{}"]));
    let conversation = Watched::new(text);
    let executor = Executor::builder(conversation.clone(), test_registry()).build();
    executor.cycle().await.unwrap();
    // Even a call that ends at once (an unknown tool) locks and unlocks once.
    assert_eq!(*conversation.locks.lock().unwrap(), [true, false]);
    // A cycle with nothing to run does not lock.
    executor.cycle().await.unwrap();
    assert_eq!(conversation.locks.lock().unwrap().len(), 2);
    assert!(
        conversation
            .snapshot()
            .await
            .unwrap()
            .text
            .contains("Unknown tool: nope")
    );
}

/// Issue 19: the results of calls that finished together are written in one change (one
/// re-parse, one write of the conversation), not one change per call: a cycle of 2,000
/// calls costs a handful of changes, not 2,002.
#[tokio::test]
async fn calls_that_finish_together_are_written_in_a_few_changes() {
    const CALLS: usize = 2_000;
    let registry = ToolRegistry::new();
    registry.register(flemma_core::tool_fn(
        ToolDefinition::builder("noop", "Does nothing.")
            .unwrap()
            .build()
            .unwrap(),
        |_, _| ToolOutput::text("ok"),
    ));
    let mut text = String::from(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"noop\"], \"max_concurrent\": 0}}}\n```\n@Assistant:\n",
    );
    for i in 0..CALLS {
        let _ = write!(
            text,
            "**Tool Use:** `noop` (`toolu_{i:05}`)\n```json\n{{}}\n```\n"
        );
    }
    let conversation = Watched::new(text);
    let executor = Executor::builder(conversation.clone(), registry).build();
    let report = executor.cycle().await.unwrap();
    assert_eq!(report.completed.len(), CALLS);
    assert!(report.completed.iter().all(|c| c.success));
    assert_eq!(report.next, Next::Send);
    let after = conversation.inner.text();
    for i in [0, 1, CALLS / 2, CALLS - 1] {
        assert!(
            after.contains(&format!("**Tool Result:** `toolu_{i:05}`\n```\nok\n```\n")),
            "result {i} missing"
        );
    }
    assert_eq!(after.matches("\n```\nok\n```\n").count(), CALLS);
    assert!(!after.contains("(approved)"));
    // Placeholders, cleared suffixes, and the results in a few batches (one per call before).
    let applied = conversation.applied.load(Ordering::SeqCst);
    assert!(applied <= 8, "{applied} changes for {CALLS} calls");
}

#[tokio::test]
async fn a_tool_reports_progress_as_events_naming_its_call() {
    let registry = ToolRegistry::new();
    registry.register(async_tool_fn(
        ToolDefinition::builder("steps", "Reports two steps.")
            .unwrap()
            .asynchronous(true)
            .build()
            .unwrap(),
        |_, ctx| async move {
            ctx.report_progress(flemma_core::ToolProgress::new(1.0).with_total(2.0));
            ctx.report_progress(
                flemma_core::ToolProgress::new(2.0)
                    .with_total(2.0)
                    .with_message("done"),
            );
            ToolOutput::text("ok")
        },
    ));
    let text = format!("{APPROVE_ALL}{}", uses("steps", &["{}"]));
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(conversation.clone(), registry).build();
    let mut events = executor.subscribe();
    executor.cycle().await.unwrap();
    assert_contains(
        &conversation.text(),
        &["**Tool Result:** `toolu_00`\n```\nok\n```"],
    );
    let mut progress = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::ToolProgress {
            id,
            tool,
            progress: p,
        } = event
        {
            progress.push((id.to_string(), tool.to_string(), p));
        }
    }
    assert_eq!(
        progress,
        [
            (
                "toolu_00".to_owned(),
                "steps".to_owned(),
                flemma_core::ToolProgress::new(1.0).with_total(2.0)
            ),
            (
                "toolu_00".to_owned(),
                "steps".to_owned(),
                flemma_core::ToolProgress::new(2.0)
                    .with_total(2.0)
                    .with_message("done")
            ),
        ]
    );
}
