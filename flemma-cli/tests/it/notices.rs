//! What hosts are told: every command that runs a cycle shows the executor's warnings (spec
//! §7.3's content-overwrite warning) and what orphan recovery found (spec §8.8) on stderr, and
//! `flemma cycle --json` reports them; `flemma jobs` says what became of a job the transcript
//! names but no journal knows; a lost job's Job Result reaches the model as its text alone
//! (spec §8.6).

use pretty_assertions::assert_eq;

use crate::scratch::Scratch;
use crate::{flemma, scratch, text};

/// An approved block the user wrote into (protected, spec §7.3) and a job nobody journaled
/// (an orphan, spec §8.8).
const EDITED_AND_ORPHAN: &str = "@You:\nLook, then build.\n\n@Assistant:\n\
    **Tool Use:** `bash` (`toolu_01`)\n```json\n{\"command\":\"ls\",\"label\":\"listing\"}\n```\n\
    **Tool Use:** `bash` (`toolu_02`)\n```json\n{\"command\":\"make\",\"label\":\"building\",\"flemma.background\":true}\n```\n\n\
    @You:\n**Tool Result:** `toolu_01` (approved)\n```\nI ran it myself: a.txt\n```\n\n\
    **Tool Result:** `toolu_02` (job=job_gone1234)\n```\nRunning as a background job.\n```\n";

/// Spec §7.3, byte for byte.
const PROTECTED: &str = "1 tool result(s) have edited content inside an approved tool block – skipping execution to protect your edits. Remove the (approved) status from the header to send your content.";

const RECOVERED: &str = "jobs: 0 re-adopted, 0 finished while away, 1 lost, 0 run elsewhere";

/// A fresh copy (each test its own directory, so its own store and journal).
fn transcript(name: &str, chat: &str) -> Scratch {
    let file = scratch(&format!("notices-{name}.chat"), chat.as_bytes());
    let _ = std::fs::remove_dir_all(file.with_file_name(".flemma"));
    file
}

/// `flemma ARGS` with the sandbox off (bubblewrap's resolver would approve bash by itself).
fn run(args: &[&str]) -> (i32, String, String) {
    let args = [args, &["--set", "sandbox.enabled=false"]].concat();
    let out = flemma(&args, None);
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn cycle_shows_the_protection_warning_and_the_recovery_count_on_stderr() {
    let file = transcript("cycle", EDITED_AND_ORPHAN);
    let (code, stdout, stderr) = run(&["cycle", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "next: await_approval\n");
    assert_eq!(stderr, format!("{RECOVERED}\nwarning: {PROTECTED}\n"));
    // The edit is kept, the orphan marked lost.
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains("`toolu_01` (approved)\n```\nI ran it myself: a.txt\n```"),
        "{after}"
    );
    assert!(
        after.contains("`toolu_02` (error job=job_gone1234)"),
        "{after}"
    );
    // Recovery ran once; the protection warns on every cycle.
    let (code, _, stderr) = run(&["cycle", file.to_str().unwrap()]);
    assert_eq!((code, stderr), (0, format!("warning: {PROTECTED}\n")));
}

#[test]
fn cycle_json_reports_the_warnings_and_what_recovery_found() {
    let file = transcript("cycle-json", EDITED_AND_ORPHAN);
    let (code, stdout, stderr) = run(&["cycle", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    // Standard error says it as well: the JSON is for programs, stderr for the person.
    assert_eq!(stderr, format!("{RECOVERED}\nwarning: {PROTECTED}\n"));
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report,
        serde_json::json!({
            "placed": [],
            "completed": [],
            "delivered": [],
            "warnings": [PROTECTED],
            "recovered": {"adopted": [], "finished": [], "lost": ["job_gone1234"], "elsewhere": []},
            "next": "await_approval",
        })
    );
}

#[test]
fn run_shows_the_same_lines() {
    let file = transcript("run", EDITED_AND_ORPHAN);
    let script = file.with_extension("script.json");
    std::fs::write(&script, "[]").unwrap();
    let (code, stdout, stderr) = run(&[
        "run",
        file.to_str().unwrap(),
        "--provider",
        "scripted",
        "--script",
        script.to_str().unwrap(),
        "--approve",
        "none",
    ]);
    assert_eq!((code, stdout.as_str()), (3, ""), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "{RECOVERED}\nerror: job job_gone1234 (bash)\n    Job lost: session ended before completion.\n\
             warning: {PROTECTED}\nstopped: awaiting_approval\n"
        )
    );
}

#[test]
fn approve_and_reject_show_what_recovery_found() {
    let text = EDITED_AND_ORPHAN.replace(
        "`toolu_01` (approved)\n```\nI ran it myself: a.txt\n```",
        "`toolu_01` (pending)\n```\n```",
    );
    let file = transcript("act", &text);
    let (code, stdout, stderr) = run(&["reject", file.to_str().unwrap(), "toolu_01"]);
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (0, "", format!("{RECOVERED}\n"))
    );
    // Nothing left to recover: nothing to say.
    let (code, _, stderr) = run(&["approve", file.to_str().unwrap(), "toolu_01"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
}

fn job_states(file: &std::path::Path) -> serde_json::Value {
    let (code, stdout, stderr) = run(&["jobs", file.to_str().unwrap(), "--json"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let jobs: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    jobs.as_array()
        .unwrap()
        .iter()
        .map(|j| serde_json::json!([j["job_id"], j["state"]]))
        .collect()
}

/// Spec §8.8: a job the transcript names that no journal knows, its result never delivered, is
/// lost, before recovery and after it wrote the `Job lost` marker; the model reads the marker
/// as text alone (spec §8.6: the `(error)` status is not conveyed separately).
#[test]
fn jobs_says_lost_for_an_orphan_before_and_after_recovery() {
    let file = transcript("jobs-lost", EDITED_AND_ORPHAN);
    let lost = serde_json::json!([["job_gone1234", "lost"]]);
    assert_eq!(job_states(&file), lost);
    assert_eq!(run(&["cycle", file.to_str().unwrap()]).0, 0);
    assert_eq!(job_states(&file), lost);
    let (code, stdout, _) = run(&["jobs", file.to_str().unwrap()]);
    assert_eq!(
        (code, stdout.as_str()),
        (
            0,
            "JOB           CALL      TOOL  STATE  ELAPSED\njob_gone1234  toolu_02  bash  lost\n"
        )
    );

    let (code, body, _) = run(&["request", file.to_str().unwrap(), "--provider", "anthropic"]);
    assert_eq!(code, 0);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    let texts: Vec<&serde_json::Value> = body["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|part| part["type"] == "text")
        .collect();
    assert_eq!(
        texts,
        // The latest message's last block carries the prompt cache's breakpoint.
        [&serde_json::json!({
            "type": "text",
            "text": "[Job result for bash (toolu_02)]\nJob lost: session ended before completion.",
            "cache_control": {"type": "ephemeral"},
        })]
    );
}

/// One whose Job Result (not the lost marker) is in the transcript was delivered, by whatever
/// host wrote it.
#[test]
fn jobs_says_delivered_for_an_unjournaled_job_with_its_job_result() {
    let text = format!(
        "{EDITED_AND_ORPHAN}\n@You:\n**Job Result:** `job_gone1234` (error)\n```\nCommand exited with code 2\n```\n"
    );
    let file = transcript("jobs-delivered", &text);
    assert_eq!(
        job_states(&file),
        serde_json::json!([["job_gone1234", "delivered"]])
    );
}
