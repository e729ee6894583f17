//! A `**Tool Use:**` input edited while its call runs (issue 35). The conversation is locked
//! while calls run (spec §7.5 step 6), but a lock is advisory: a file or an editor may still
//! change. The result used to be written under the edited input without a word, so the
//! transcript (and the next request) claimed the tool ran with input it never saw. Now the
//! input that ran is put back in the edit that writes the result, and a warning quotes the
//! edit, so nothing the user typed is lost.

use std::sync::{Arc, Mutex};

use flemma_core::{ToolDefinition, ToolOutput, async_tool_fn};
use flemma_runtime::{Event, Executor, MemoryConversation, ToolRegistry};
use tokio::sync::Notify;

const APPROVE: &str = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"slow\"]}}}\n```\n";

/// A tool that says it started, then waits to be released; it answers with the text it saw.
struct Slow {
    started: Arc<Notify>,
    release: Arc<Notify>,
    seen: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl Slow {
    fn new() -> Self {
        Self {
            started: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
            seen: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn registry(&self) -> ToolRegistry {
        let registry = ToolRegistry::new();
        let (started, release, seen) = (
            Arc::clone(&self.started),
            Arc::clone(&self.release),
            Arc::clone(&self.seen),
        );
        registry.register(async_tool_fn(
            ToolDefinition::builder("slow", "Waits, then echoes its text.")
                .unwrap()
                .asynchronous(true)
                .build()
                .unwrap(),
            move |input, _| {
                let (started, release, seen) = (
                    Arc::clone(&started),
                    Arc::clone(&release),
                    Arc::clone(&seen),
                );
                async move {
                    seen.lock().unwrap().push(input.clone());
                    started.notify_one();
                    release.notified().await;
                    ToolOutput::text(format!("ran with {}", input["text"]))
                }
            },
        ));
        registry
    }
}

/// Runs one cycle over `text`; while the call runs, `edit` rewrites the conversation's text.
/// Returns the text after the cycle, the warnings, and the inputs the tool saw.
async fn edited_while_running(
    text: &str,
    edit: impl FnOnce(&str) -> String,
) -> (String, Vec<String>, Vec<serde_json::Value>) {
    let slow = Slow::new();
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Arc::new(Executor::builder(conversation.clone(), slow.registry()).build());
    let mut events = executor.subscribe();
    let cycle = tokio::spawn({
        let executor = Arc::clone(&executor);
        async move { executor.cycle().await }
    });
    // The call runs: the user edits its input.
    slow.started.notified().await;
    conversation.set_text(edit(&conversation.text()));
    slow.release.notify_one();
    cycle.await.unwrap().unwrap();
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(warning) = event {
            warnings.push(warning);
        }
    }
    let seen = slow.seen.lock().unwrap().clone();
    (conversation.text(), warnings, seen)
}

fn transcript(input: &str) -> String {
    format!(
        "{APPROVE}@You:\ngo\n\n@Assistant:\n**Tool Use:** `slow` (`t1`)\n```json\n{input}\n```\n"
    )
}

const RESULT: &str = "\n@You:\n\n**Tool Result:** `t1`\n```\nran with \"one\"\n```\n";

#[tokio::test]
async fn an_input_edited_while_its_call_runs_is_put_back_and_the_edit_is_quoted() {
    let (after, warnings, seen) = edited_while_running(&transcript(r#"{"text":"one"}"#), |now| {
        now.replace(r#"{"text":"one"}"#, "{\n  \"text\": \"two\"\n}")
    })
    .await;
    assert_eq!(seen, vec![serde_json::json!({"text": "one"})]);
    assert_eq!(
        after,
        format!("{}{RESULT}", transcript(r#"{"text":"one"}"#))
    );
    assert_eq!(
        warnings,
        vec![
            r#"the input of slow call t1 was edited while the call ran: its result is written under the input it ran with, and the edit is undone; the edited input was {\n  "text": "two"\n}"#
                .to_owned()
        ]
    );
}

#[tokio::test]
async fn an_input_only_reformatted_while_its_call_runs_is_left_as_the_user_wrote_it() {
    let pretty = "{\n  \"text\": \"one\"\n}";
    let (after, warnings, _) = edited_while_running(&transcript(r#"{"text":"one"}"#), |now| {
        now.replace(r#"{"text":"one"}"#, pretty)
    })
    .await;
    assert_eq!(after, format!("{}{RESULT}", transcript(pretty)));
    assert_eq!(warnings, Vec::<String>::new());
}

#[tokio::test]
async fn an_input_edited_into_unreadable_json_is_left_with_a_warning_quoting_it() {
    let broken = "{\"text\": \"two\"\n\tmore";
    let (after, warnings, _) = edited_while_running(&transcript(r#"{"text":"one"}"#), |now| {
        now.replace(r#"{"text":"one"}"#, broken)
    })
    .await;
    // The block no longer reads as a call; the result is written, the user's text is kept.
    assert_eq!(after, format!("{}{RESULT}", transcript(broken)));
    assert_eq!(
        warnings,
        vec![
            r#"the input of slow call t1 was edited while the call ran and its block no longer reads as a tool use: its result is written, and the block is left as edited; the edited block was **Tool Use:** `slow` (`t1`)\n```json\n{"text": "two"\n\tmore\n```"#
                .to_owned()
        ]
    );
}
