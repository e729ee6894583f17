//! One execution per call among the executors of one process: several executors cycling
//! one conversation (in memory, or one file opened twice) run each call once.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flemma_core::Conversation;
use flemma_core::{ToolDefinition, ToolOutput, async_tool_fn};
use flemma_runtime::{Executor, FileConversation, MemoryConversation, Next, ToolRegistry};

use crate::scratch::Scratch;

const CALLS: usize = 12;
const EXECUTORS: usize = 3;

/// A tool that counts its runs by call id, and takes a little while.
fn counting_registry(runs: Arc<Mutex<HashMap<String, usize>>>) -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(async_tool_fn(
        ToolDefinition::builder("count", "Counts its runs.")
            .unwrap()
            .asynchronous(true)
            .build()
            .unwrap(),
        move |input, _| {
            let runs = Arc::clone(&runs);
            async move {
                let id = input["id"].as_str().unwrap_or_default().to_owned();
                *runs.lock().unwrap().entry(id).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(30)).await;
                ToolOutput::text("counted")
            }
        },
    ));
    registry
}

fn transcript() -> String {
    let mut text = String::from(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"*\"], \"max_concurrent\": 2}}}\n```\n@Assistant:\n",
    );
    for i in 0..CALLS {
        let _ = write!(
            text,
            "**Tool Use:** `count` (`toolu_{i:02}`)\n```json\n{{\"id\": \"toolu_{i:02}\"}}\n```\n"
        );
    }
    text
}

/// Cycles every executor at once until none reports `running`; returns the runs per call.
async fn cycle_all(conversations: Vec<Arc<dyn Conversation>>) -> HashMap<String, usize> {
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let executors: Vec<Arc<Executor>> = conversations
        .into_iter()
        .map(|c| Arc::new(Executor::builder(c, counting_registry(Arc::clone(&runs))).build()))
        .collect();
    let tasks: Vec<_> = executors
        .iter()
        .map(|executor| {
            let executor = Arc::clone(executor);
            tokio::spawn(async move {
                for _ in 0..1000 {
                    let report = executor.cycle().await.unwrap();
                    if report.next != Next::Running {
                        return report.next;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                panic!("never settled");
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), Next::Send);
    }
    runs.lock().unwrap().clone()
}

fn assert_once(runs: &HashMap<String, usize>, text: &str) {
    let expected: HashMap<String, usize> =
        (0..CALLS).map(|i| (format!("toolu_{i:02}"), 1)).collect();
    assert_eq!(runs, &expected);
    assert_eq!(text.matches("```\ncounted\n```").count(), CALLS, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_of_one_memory_conversation_run_each_call_once() {
    let conversation = Arc::new(MemoryConversation::new(transcript()));
    let shared: Arc<dyn Conversation> = conversation.clone();
    let runs = cycle_all(vec![shared; EXECUTORS]).await;
    assert_once(&runs, &conversation.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_of_one_file_opened_twice_run_each_call_once() {
    let dir = Scratch::new(format!("flemma-claims-{}", std::process::id()));
    let file = dir.join("twice.chat");
    std::fs::write(&file, transcript()).unwrap();
    let conversations: Vec<Arc<dyn Conversation>> = (0..EXECUTORS)
        .map(|_| Arc::new(FileConversation::new(&file)) as Arc<dyn Conversation>)
        .collect();
    let runs = cycle_all(conversations).await;
    assert_once(&runs, &std::fs::read_to_string(&file).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_executor_went_away_mid_run_is_answered_with_an_error() {
    let started = Arc::new(tokio::sync::Notify::new());
    let registry = ToolRegistry::new();
    let signal = Arc::clone(&started);
    registry.register(async_tool_fn(
        ToolDefinition::builder("hang", "Never ends.")
            .unwrap()
            .asynchronous(true)
            .build()
            .unwrap(),
        move |_, _| {
            let signal = Arc::clone(&signal);
            async move {
                signal.notify_one();
                std::future::pending::<()>().await;
                ToolOutput::text("never")
            }
        },
    ));
    let text = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"*\"]}}}\n```\n@Assistant:\n\
        **Tool Use:** `hang` (`toolu_h`)\n```json\n{}\n```\n";
    let conversation = Arc::new(MemoryConversation::new(text));
    let first = Executor::builder(conversation.clone(), registry.clone()).build();
    let cycle = tokio::spawn(async move { first.cycle().await.map(|r| r.next) });
    started.notified().await;
    // The host goes away with the call running: its empty block stays behind.
    cycle.abort();
    assert!(cycle.await.unwrap_err().is_cancelled());
    assert!(
        conversation
            .text()
            .ends_with("**Tool Result:** `toolu_h`\n```\n```\n")
    );
    let second = Executor::builder(conversation.clone(), registry).build();
    let report = second.cycle().await.unwrap();
    assert_eq!(
        report
            .completed
            .iter()
            .map(|c| (c.id.as_str(), c.success))
            .collect::<Vec<_>>(),
        [("toolu_h", false)]
    );
    assert_eq!(report.next, Next::Send);
    assert!(
        conversation.text().ends_with(
            "**Tool Result:** `toolu_h` (error)\n```\nTool execution lost: session ended before completion. It may have run in part; check before retrying.\n```\n"
        ),
        "{}",
        conversation.text()
    );
}

/// A call whose claim a crash of the machine left unreadable (the file's name durable, its
/// bytes not: an empty file, what ext4 can leave of a file renamed into place just before) is
/// answered with the lost-call error, not sent as an empty success; the torn claim goes. A
/// well-formed result next to it is left alone.
#[tokio::test]
async fn a_call_whose_claim_a_crash_left_empty_is_answered_with_an_error() {
    let dir = Scratch::new(format!("flemma-claims-torn-{}", std::process::id()));
    let file = dir.join("torn.chat");
    std::fs::write(
        &file,
        "@Assistant:\n\
         **Tool Use:** `hang` (`toolu_h`)\n```json\n{}\n```\n\
         **Tool Use:** `hang` (`toolu_done`)\n```json\n{}\n```\n\n\
         @You:\n\n\
         **Tool Result:** `toolu_h`\n```\n```\n\n\
         **Tool Result:** `toolu_done`\n```\nfinished\n```\n",
    )
    .unwrap();
    let calls = dir.join(".flemma/torn.chat/calls");
    std::fs::create_dir_all(&calls).unwrap();
    std::fs::write(calls.join("toolu_h.json"), "").unwrap();
    let executor =
        Executor::builder(Arc::new(FileConversation::new(&file)), ToolRegistry::new()).build();
    let report = executor.cycle().await.unwrap();
    assert_eq!(
        report
            .completed
            .iter()
            .map(|c| (c.id.as_str(), c.tool.as_str(), c.success))
            .collect::<Vec<_>>(),
        [("toolu_h", "hang", false)]
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.ends_with(
            "**Tool Result:** `toolu_h` (error)\n```\nTool execution lost: session ended before completion. It may have run in part; check before retrying.\n```\n\n\
             **Tool Result:** `toolu_done`\n```\nfinished\n```\n"
        ),
        "{text}"
    );
    assert!(!calls.join("toolu_h.json").exists());
}

/// A claim a crash left unreadable on a call already answered (the result was durable, the
/// claim's removal was not) goes at the next cycle and changes nothing in the conversation,
/// so that it is not read and warned of at every cycle after.
#[tokio::test]
async fn an_unreadable_claim_on_an_answered_call_goes() {
    let dir = Scratch::new(format!("flemma-claims-torn-done-{}", std::process::id()));
    let file = dir.join("done.chat");
    let text = "@Assistant:\n\
         **Tool Use:** `hang` (`toolu_done`)\n```json\n{}\n```\n\n\
         @You:\n\n\
         **Tool Result:** `toolu_done`\n```\nfinished\n```\n";
    std::fs::write(&file, text).unwrap();
    let calls = dir.join(".flemma/done.chat/calls");
    std::fs::create_dir_all(&calls).unwrap();
    std::fs::write(calls.join("toolu_done.json"), "").unwrap();
    // Not a claim's name: left alone (a host's temporary file, or anything else).
    std::fs::write(calls.join(".toolu_x.json.1.tmp"), "").unwrap();
    let executor =
        Executor::builder(Arc::new(FileConversation::new(&file)), ToolRegistry::new()).build();
    let report = executor.cycle().await.unwrap();
    assert!(report.completed.is_empty(), "{:?}", report.completed);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert!(!calls.join("toolu_done.json").exists());
    assert!(calls.join(".toolu_x.json.1.tmp").exists());
}
