//! A later `**Tool Use:**` with an earlier one's id (issue 35): the earlier result never
//! answers it. The cycle reports it (a warning naming the id and both lines), does not run it,
//! and does not send the conversation; it used to stop `idle` and say nothing (or send).

use std::sync::{Arc, Mutex};

use flemma_runtime::{Event, Executor, MemoryConversation, Next};

const APPROVE: &str = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"echo\"]}}}\n```\n";

/// One cycle over `text`: the report's next step, the warnings, the runs and the text after.
async fn cycle(text: &str) -> (Next, Vec<String>, usize, String) {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let conversation = Arc::new(MemoryConversation::new(text));
    let executor = Executor::builder(
        conversation.clone(),
        crate::id_names::echo(Arc::clone(&runs)),
    )
    .build();
    let mut events = executor.subscribe();
    let report = executor.cycle().await.unwrap();
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(warning) = event {
            warnings.push(warning);
        }
    }
    let ran = runs.lock().unwrap().len();
    (report.next, warnings, ran, conversation.text())
}

/// `t1` answered (its use on line 8), then asked for again on line 20.
fn transcript(after: &str) -> String {
    format!(
        "{APPROVE}@You:\ngo\n\n@Assistant:\n**Tool Use:** `echo` (`t1`)\n```json\n{{\"text\":\"one\"}}\n```\n\n\
         @You:\n**Tool Result:** `t1`\n```\none\n```\n\n\
         @Assistant:\n**Tool Use:** `echo` (`t1`)\n```json\n{{\"text\":\"two\"}}\n```\n{after}"
    )
}

const WARNING: &str = "line 20: Duplicate tool use id `t1` (first used on line 8): its result would answer the first call; give this call an id of its own; it is not run and the conversation is not sent";

#[tokio::test]
async fn a_later_duplicate_is_reported_not_run_and_not_answered() {
    let text = transcript("");
    let (next, warnings, ran, after) = cycle(&text).await;
    assert_eq!(
        (next, warnings, ran),
        (Next::Idle, vec![WARNING.to_owned()], 0)
    );
    assert_eq!(after, text);
}

#[tokio::test]
async fn a_later_duplicate_keeps_the_conversation_from_being_sent() {
    // The user wrote on: without the duplicate this would be sent.
    let text = transcript("\n@You:\nand now?\n");
    let (next, warnings, ran, after) = cycle(&text).await;
    assert_eq!(
        (next, warnings, ran),
        (Next::Idle, vec![WARNING.to_owned()], 0)
    );
    assert_eq!(after, text);
}

#[tokio::test]
async fn the_first_of_two_unanswered_uses_runs_and_the_second_is_reported() {
    let text = format!(
        "{APPROVE}@You:\ngo\n\n@Assistant:\n**Tool Use:** `echo` (`t1`)\n```json\n{{\"text\":\"one\"}}\n```\n\n\
         **Tool Use:** `echo` (`t1`)\n```json\n{{\"text\":\"two\"}}\n```\n"
    );
    let (next, warnings, ran, after) = cycle(&text).await;
    assert_eq!(
        (next, warnings, ran),
        (
            Next::Idle,
            vec!["line 13: Duplicate tool use id `t1` (first used on line 8): its result would answer the first call; give this call an id of its own; it is not run and the conversation is not sent".to_owned()],
            1
        )
    );
    assert!(
        after.ends_with("**Tool Result:** `t1`\n```\none\n```\n"),
        "{after}"
    );
}
