//! Background jobs (spec §8) through the executor: entering the background (model- and
//! host-initiated), placeholders, delivery placements, `flemma.jobs.status`, cancel, slots,
//! and orphan recovery. Each test's conversation has a path in a directory of its own, so its
//! store and job journal are its own.

use std::sync::Arc;
use std::time::Duration;

use flemma_ast::writer::JobPlacement;
use flemma_core::Durability;
use flemma_core::jobs::JobState;
use flemma_runtime::jobs::{JobError, JobsStatus};
use flemma_runtime::{Event, Executor, ExecutorError, MemoryConversation, Next, ToolRegistry};

use crate::cycle::test_registry;
use crate::executor::cycle_running;
use crate::scratch::Scratch;

/// The test's directory (first: bound first, it is dropped after the executor), the
/// conversation `notes.chat` in it, and its executor.
fn executor(
    name: &str,
    text: &str,
    registry: ToolRegistry,
) -> (Scratch, Arc<MemoryConversation>, Executor) {
    let dir = Scratch::new(format!("flemma-jobs-it-{}-{name}", std::process::id()));
    let conversation = Arc::new(MemoryConversation::new(text).with_path(dir.join("notes.chat")));
    let executor = Executor::builder(conversation.clone(), registry).build();
    (dir, conversation, executor)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Job ids are random: `job_` and eight characters become `job_ID`.
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("job_") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 4..];
        let id_len = tail
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            .count();
        if id_len == 8 {
            out.push_str("job_ID");
            rest = &tail[8..];
        } else {
            out.push_str("job_");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

const APPROVE_ALL: &str =
    "```json\n{\"flemma\": {\"tools\": {\"require_approval\": false}}}\n```\n";

/// A conversation that approves everything and waits for one background `sleep` call.
fn waiting(id: &str, ms: u64) -> String {
    format!(
        "{APPROVE_ALL}@You:\nWait.\n\n@Assistant:\n{}",
        sleep_use(id, ms, true)
    )
}

fn sleep_use(id: &str, ms: u64, background: bool) -> String {
    format!(
        "**Tool Use:** `sleep` (`{id}`)\n```json\n{{\"ms\": {ms}, \"flemma.background\": {background}}}\n```\n"
    )
}

#[test]
fn a_model_initiated_job_gets_an_untracked_placeholder_then_its_job_result() {
    let text = waiting("toolu_1", 50);
    let (_dir, conversation, executor) = executor("untracked", &text, test_registry());
    runtime().block_on(async {
        let report = executor.cycle().await.unwrap();
        // The job is not a foreground completion; its placeholder is a final result.
        assert!(report.completed.is_empty());
        assert_eq!(report.next, Next::Send, "{}", conversation.text());
        let placeholder = mask(&conversation.text());
        let delivered = executor.wait_jobs().await.unwrap();
        assert_eq!(delivered.len(), 1);
        assert_eq!(delivered[0].placement, JobPlacement::Appended);
        insta::assert_snapshot!(format!(
            "{placeholder}\n--- delivered ---\n{}",
            mask(&conversation.text())
        ));
    });
}

#[test]
fn with_the_status_tool_in_the_set_the_placeholder_is_tracked_and_the_three_lookups_answer() {
    let registry = test_registry();
    registry.register(JobsStatus::new().unwrap());
    let text = waiting("toolu_1", 400);
    let (_dir, conversation, executor) = executor("tracked", &text, registry);
    runtime().block_on(async {
        let mut events = executor.subscribe();
        executor.cycle().await.unwrap();
        let job = conversation
            .text()
            .split("job=")
            .nth(1)
            .map(|s| s[..12].to_owned())
            .unwrap();
        let status_call = |id: &str, job: &str| {
            format!(
                "\n@Assistant:\n**Tool Use:** `flemma.jobs.status` (`{id}`)\n```json\n{{\"job_id\": \"{job}\"}}\n```\n"
            )
        };
        // 1. Running.
        executor
            .append_lines(&status_call("toolu_s1", &job), Durability::Durable)
            .await
            .unwrap();
        executor.cycle().await.unwrap();
        // 2. Finished, delivery pending: the status call runs in the cycle before its drain.
        loop {
            if let Some(Event::JobCompleted { .. }) = events.recv().await {
                break;
            }
        }
        executor
            .append_lines(&status_call("toolu_s2", &job), Durability::Durable)
            .await
            .unwrap();
        executor.cycle().await.unwrap();
        // 3. In the conversation; and an id nobody knows.
        executor
            .append_lines(&status_call("toolu_s3", &job), Durability::Durable)
            .await
            .unwrap();
        executor
            .append_lines(&status_call("toolu_s4", "job_nothere"), Durability::Durable)
            .await
            .unwrap();
        executor.cycle().await.unwrap();
        let text = conversation.text();
        let status = |id: &str| -> serde_json::Value {
            let block = text.split(&format!("**Tool Result:** `{id}`")).nth(1).unwrap();
            let body = block.split("```").nth(1).unwrap().trim();
            serde_json::from_str(body).unwrap()
        };
        assert_eq!(status("toolu_s1")["status"], "running");
        assert_eq!(status("toolu_s1")["tool_name"], "sleep");
        assert_eq!(status("toolu_s1")["tool_id"], "toolu_1");
        assert_eq!(status("toolu_s2")["status"], "completed (delivery pending)");
        assert!(status("toolu_s2")["elapsed_seconds"].is_u64());
        assert_eq!(status("toolu_s3")["status"], "completed");
        assert_eq!(
            status("toolu_s4"),
            serde_json::json!({"status": "completed (removed from conversation)", "job_id": "job_nothere"})
        );
        insta::assert_snapshot!(mask(&text));
    });
}

#[test]
fn job_results_are_placed_before_a_draft_or_in_a_new_message() {
    let text = format!(
        "{APPROVE_ALL}@You:\nWait.\n\n@Assistant:\n{}{}",
        sleep_use("toolu_1", 100, true),
        sleep_use("toolu_2", 300, true)
    );
    let (_dir, conversation, executor) = executor("placements", &text, test_registry());
    runtime().block_on(async {
        let mut events = executor.subscribe();
        executor.cycle().await.unwrap();
        // The model answered, the user started typing: the first Job Result goes before the
        // draft, in a new @You: message.
        executor
            .append_lines(
                "\n@Assistant:\nBoth are running.\n\n@You:\nMy draft.\n",
                Durability::Durable,
            )
            .await
            .unwrap();
        loop {
            if let Some(Event::JobCompleted { .. }) = events.recv().await {
                break;
            }
        }
        let first = executor.drain_jobs().await.unwrap();
        assert_eq!(first[0].placement, JobPlacement::Displaced);
        // The second joins the first, still before the draft.
        let second = executor.wait_jobs().await.unwrap();
        assert_eq!(second[0].placement, JobPlacement::Displaced);
        let displaced = mask(&conversation.text());
        // After an assistant message, a new @You: message at the end.
        let text = waiting("toolu_3", 100);
        conversation.set_text(text);
        executor.cycle().await.unwrap();
        executor
            .append_lines("\n@Assistant:\nIt is running.\n", Durability::Durable)
            .await
            .unwrap();
        let created = executor.wait_jobs().await.unwrap();
        assert_eq!(created[0].placement, JobPlacement::Created);
        insta::assert_snapshot!(format!(
            "{displaced}\n--- created ---\n{}",
            mask(&conversation.text())
        ));
    });
}

#[test]
fn a_cancelled_job_says_user_aborted() {
    let text = waiting("toolu_1", 60_000);
    let (_dir, conversation, executor) = executor("cancel", &text, test_registry());
    runtime().block_on(async {
        executor.cycle().await.unwrap();
        assert!(executor.cancel("toolu_1"));
        let delivered = executor.wait_jobs().await.unwrap();
        assert!(!delivered[0].success);
        let text = conversation.text();
        assert!(
            text.contains("(error)\n```\nUser aborted tool execution.\n```"),
            "{text}"
        );
    });
}

#[test]
fn background_jobs_take_no_concurrency_slot() {
    let text = format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"require_approval\": false, \"max_concurrent\": 1}}}}}}\n```\n@You:\nGo.\n\n@Assistant:\n{}**Tool Use:** `echo` (`toolu_2`)\n```json\n{{\"text\": \"hi\"}}\n```\n",
        sleep_use("toolu_1", 60_000, true)
    );
    let (_dir, conversation, executor) = executor("slots", &text, test_registry());
    runtime().block_on(async {
        let report = tokio::time::timeout(Duration::from_secs(20), executor.cycle())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(report.completed.len(), 1, "{}", conversation.text());
        assert_eq!(report.completed[0].id, "toolu_2");
        executor.cancel_all();
        executor.wait_jobs().await.unwrap();
    });
}

#[test]
fn the_host_moves_a_running_call_to_the_background() {
    let text = format!(
        "{APPROVE_ALL}@You:\nWait.\n\n@Assistant:\n{}**Tool Use:** `echo` (`toolu_2`)\n```json\n{{\"text\": \"hi\"}}\n```\n",
        sleep_use("toolu_1", 300, false)
    );
    let (_dir, conversation, executor) = executor("host", &text, test_registry());
    let executor = Arc::new(executor);
    runtime().block_on(async {
        // Errors of spec §8.1 first.
        let error = executor.background("toolu_9").await.unwrap_err();
        assert_eq!(error.to_string(), "Tool toolu_9 is not currently executing");
        assert!(
            matches!(&error, ExecutorError::Job(JobError::NotExecuting { id }) if id == "toolu_9"),
            "{error:?}"
        );
        let cycle = cycle_running(&executor, &["toolu_1"]).await;
        let job = executor.background("toolu_1").await.unwrap();
        let again = executor.background("toolu_1").await.unwrap_err();
        assert_eq!(
            again.to_string(),
            "Tool toolu_1 is already running in background"
        );
        assert!(matches!(
            again,
            ExecutorError::Job(JobError::AlreadyBackground { .. })
        ));
        let report = cycle.await.unwrap().unwrap();
        // The cycle stopped waiting for it: only the echo completed in the foreground.
        assert_eq!(
            report
                .completed
                .iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>(),
            ["toolu_2"]
        );
        let delivered = executor.wait_jobs().await.unwrap();
        assert_eq!(delivered[0].job_id, job);
        let done = executor.background("toolu_2").await.unwrap_err();
        assert_eq!(done.to_string(), "Tool toolu_2 has already completed");
        let text = conversation.text();
        assert!(
            text.contains(&format!("**Tool Result:** `toolu_1` (job={job})")),
            "{text}"
        );
        assert!(
            text.contains(&format!("**Job Result:** `{job}`\n```\nslept 300\n```")),
            "{text}"
        );
    });
}

#[test]
fn an_orphan_without_a_journal_entry_is_lost() {
    let text = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `sleep` (`toolu_1`)\n```json\n{\"ms\": 1}\n```\n\n@You:\n**Tool Result:** `toolu_1` (job=job_gone1234)\n```\nRunning as a background job.\n```\n";
    let (_dir, conversation, executor) = executor("orphan", text, test_registry());
    let states = |jobs: Vec<flemma_runtime::jobs::JobInfo>| -> Vec<(String, JobState)> {
        jobs.into_iter()
            .map(|j| (j.job_id.to_string(), j.state))
            .collect()
    };
    runtime().block_on(async {
        let lost = vec![("job_gone1234".to_owned(), JobState::Lost)];
        assert_eq!(states(executor.jobs().await.unwrap()), lost);
        let recovery = executor.recover().await.unwrap();
        assert_eq!(recovery.lost.len(), 1);
        // Its Job Result is now the lost marker, not a result: the job stays lost (spec §8.8).
        assert_eq!(states(executor.jobs().await.unwrap()), lost);
        insta::assert_snapshot!(conversation.text());
    });
}

/// A job no journal knows whose Job Result is in the transcript was delivered (by another
/// host, or before the store moved).
#[test]
fn an_unjournaled_job_with_its_job_result_is_delivered() {
    let text = "@You:\nGo.\n\n@Assistant:\n**Tool Use:** `sleep` (`toolu_1`)\n```json\n{\"ms\": 1}\n```\n\n@You:\n**Tool Result:** `toolu_1` (job=job_done1234)\n```\nRunning as a background job.\n```\n\n@You:\n**Job Result:** `job_done1234` (error)\n```\nCommand exited with code 2\n```\n";
    let (_dir, _, executor) = executor("unjournaled-delivered", text, test_registry());
    runtime().block_on(async {
        let jobs = executor.jobs().await.unwrap();
        let states: Vec<_> = jobs.iter().map(|j| (j.job_id.as_str(), j.state)).collect();
        assert_eq!(states, [("job_done1234", JobState::Delivered)]);
    });
}

#[test]
fn a_job_put_back_to_approved_is_re_adopted_not_run_twice() {
    let text = waiting("toolu_1", 300);
    let (_dir, conversation, executor) = executor("readopt", &text, test_registry());
    runtime().block_on(async {
        executor.cycle().await.unwrap();
        let placeholder = conversation.text();
        // An undo puts the block back as it was before the job started.
        let job = placeholder.split("(job=").nth(1).unwrap()[..12].to_owned();
        let undone = placeholder.replace(&format!("(job={job})"), "(approved)");
        let undone = undone.replace(
            "Running as a background job. Do not retry or attempt to check progress — the result will be delivered to you automatically when the job completes.\n",
            "",
        );
        conversation.set_text(undone);
        let report = executor.cycle().await.unwrap();
        assert!(report.completed.is_empty());
        assert_eq!(conversation.text(), placeholder);
        let delivered = executor.wait_jobs().await.unwrap();
        assert_eq!(delivered.len(), 1);
        assert_eq!(conversation.text().matches("**Job Result:**").count(), 1);
    });
}

/// A job whose result block the user removed (here: while no host ran) gets its placeholder
/// back when a host takes it over: the block is put back, then given `job=` and its text.
#[test]
fn a_job_whose_result_block_was_removed_gets_its_placeholder_back() {
    let text = waiting("toolu_1", 10);
    let (dir, conversation, first) = executor("replaced-placeholder", &text, test_registry());
    let rt = runtime();
    let placeholder = rt.block_on(async {
        first.cycle().await.unwrap();
        first.job_finished().await;
        conversation.text()
    });
    // The job finished and is journaled; its host goes away before delivering it (the
    // journal then names no live owner).
    drop(first);
    let job = placeholder.split("(job=").nth(1).unwrap()[..12].to_owned();
    let entry = dir.join(format!(".flemma/notes.chat/jobs/{job}.json"));
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&entry).unwrap()).unwrap();
    assert_eq!(record["state"], "completed");
    record.as_object_mut().unwrap().remove("owner");
    std::fs::write(&entry, record.to_string()).unwrap();
    let header =
        format!("**Tool Result:** `toolu_1` (job={job})\n```\nRunning as a background job.");
    let block = placeholder.find("\n@You:\n\n**Tool Result:**").unwrap();
    conversation.set_text(placeholder[..=block].to_owned());
    assert!(!conversation.text().contains("**Tool Result:**"));
    let second = Executor::builder(conversation.clone(), test_registry()).build();
    rt.block_on(async {
        // Recovery puts the placeholder back, then delivers the job.
        let recovery = second.recover().await.unwrap();
        assert_eq!(recovery.finished, [job.as_str()]);
        let text = conversation.text();
        assert_eq!(text.matches("**Tool Result:**").count(), 1, "{text}");
        assert!(text.contains(&header), "{text}");
        assert_eq!(text.matches("**Job Result:**").count(), 1, "{text}");
    });
}

#[test]
fn a_re_run_job_replaces_its_job_result_in_place() {
    let text = waiting("toolu_1", 10);
    let (_dir, conversation, executor) = executor("rerun", &text, test_registry());
    runtime().block_on(async {
        executor.cycle().await.unwrap();
        executor.wait_jobs().await.unwrap();
        executor
            .append_lines("\n@Assistant:\nDone.\n\n@You:\nAgain, please.\n", Durability::Durable)
            .await
            .unwrap();
        // The user runs the call again: the header keeps its job id.
        let delivered = conversation.text();
        let job = delivered.split("(job=").nth(1).unwrap()[..12].to_owned();
        conversation.set_text(
            delivered
                .replace(&format!("(job={job})"), &format!("(approved job={job})"))
                .replacen(
                    "Running as a background job. Do not retry or attempt to check progress — the result will be delivered to you automatically when the job completes.\n",
                    "",
                    1,
                ),
        );
        let mut events = executor.subscribe();
        executor.cycle().await.unwrap();
        executor.wait_jobs().await.unwrap();
        // Delivered by the cycle or by the wait, whichever came after the job ended.
        let again: Vec<_> = std::iter::from_fn(|| events.try_recv())
            .filter_map(|e| match e {
                Event::JobDelivered(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(again.len(), 1, "{}", conversation.text());
        assert_eq!(again[0].job_id, job.as_str());
        assert_eq!(again[0].placement, JobPlacement::Replaced);
        let text = conversation.text();
        assert_eq!(text.matches("**Job Result:**").count(), 1, "{text}");
        assert!(text.ends_with("@You:\nAgain, please.\n"), "{text}");
    });
}

#[test]
fn a_host_can_wait_for_the_next_finished_job_without_delivering_it() {
    let text = waiting("toolu_1", 200);
    let (_dir, conversation, executor) = executor("finished", &text, test_registry());
    runtime().block_on(async {
        executor.cycle().await.unwrap();
        assert_eq!(executor.running_jobs(), 1);
        executor.job_finished().await;
        assert_eq!(executor.running_jobs(), 0);
        assert!(!conversation.text().contains("**Job Result:**"));
        // Finished and queued: no wait.
        executor.job_finished().await;
        assert_eq!(executor.drain_jobs().await.unwrap().len(), 1);
        assert!(conversation.text().contains("**Job Result:**"));
    });
}
