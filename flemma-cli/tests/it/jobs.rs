//! Background jobs across processes: a real background `bash` job started by one `flemma`
//! process and delivered by another, with the host killed by SIGKILL mid-job, with the job's
//! own process killed (only then is it lost), and (feature `crash-points`) with the host
//! killed at each step of a delivery, which still delivers exactly once.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::scratch::Scratch;
use crate::{flemma, scratch, text};

/// A transcript whose model asked for `sleep 2; echo done` in the background.
fn transcript(test: &str) -> Scratch {
    let chat = "```json\n{\"flemma\": {\"tools\": {\"require_approval\": false}}}\n```\n\
        @You:\nRun it in the background.\n\n@Assistant:\n\
        **Tool Use:** `bash` (`toolu_bg`)\n```json\n\
        {\"label\": \"waiting\", \"command\": \"sleep 2; echo done\", \"timeout\": null, \"flemma.background\": true}\n```\n";
    scratch(&format!("jobs-{test}.chat"), chat.as_bytes())
}

fn path(file: &Path) -> &str {
    file.to_str().unwrap()
}

/// `flemma ARGS` with the sandbox off, so the test does not depend on bubblewrap.
fn run(args: &[&str]) -> (i32, String, String) {
    let args = [args, &["--set", "sandbox.enabled=false"]].concat();
    let out = flemma(&args, None);
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    crate::flemma_command()
        .args(args)
        .args(["--set", "sandbox.enabled=false"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn jobs(file: &Path) -> serde_json::Value {
    let (code, stdout, stderr) = run(&["jobs", path(file), "--json"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    serde_json::from_str(&stdout).unwrap()
}

/// The job's journal entry (`<chat dir>/.flemma/<name>/jobs/<job>.json`).
fn journal(file: &Path, job: &str) -> serde_json::Value {
    let name = file.file_name().unwrap().to_str().unwrap();
    let entry = file
        .parent()
        .unwrap()
        .join(".flemma")
        .join(name)
        .join("jobs")
        .join(format!("{job}.json"));
    serde_json::from_slice(&std::fs::read(entry).unwrap()).unwrap()
}

/// What a host that opens the conversation after another host's job says on stderr (spec
/// §8.8): the job re-adopted, or finished while away, depending on whether it ended first.
fn assert_took_over_one(stderr: &str) {
    assert!(
        [
            "jobs: 1 re-adopted, 0 finished while away, 0 lost, 0 run elsewhere\n",
            "jobs: 0 re-adopted, 1 finished while away, 0 lost, 0 run elsewhere\n",
        ]
        .contains(&stderr),
        "{stderr}"
    );
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILL to a process, or to a process group when `pid` is negative.
fn sigkill(pid: i32) {
    use rustix::process::{Pid, Signal, kill_process, kill_process_group};
    let target = Pid::from_raw(pid.abs()).unwrap();
    if pid < 0 {
        kill_process_group(target, Signal::KILL).unwrap();
    } else {
        kill_process(target, Signal::KILL).unwrap();
    }
}

fn job_id(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let at = text.find("(job=").unwrap() + 5;
    text[at..at + 12].to_owned()
}

/// How many Job Result blocks name `job`.
#[cfg(feature = "crash-points")]
fn job_results(file: &Path, job: &str) -> usize {
    std::fs::read_to_string(file)
        .unwrap()
        .matches(&format!("**Job Result:** `{job}`"))
        .count()
}

#[test]
fn a_job_started_by_one_process_is_delivered_by_the_next() {
    let file = transcript("next");
    let (code, stdout, stderr) = run(&["cycle", path(&file)]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    let job = job_id(&file);
    // The first process has exited; the job runs on.
    assert_eq!(jobs(&file)[0]["state"], "running");
    let (code, stdout, stderr) = run(&["cycle", path(&file), "--wait", "--json"]);
    assert_eq!(code, 0);
    assert_took_over_one(&stderr);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let recovered = &report["recovered"];
    assert_eq!(
        [&recovered["adopted"], &recovered["finished"]]
            .iter()
            .filter_map(|list| list.as_array())
            .flatten()
            .collect::<Vec<_>>(),
        [&serde_json::json!(job)]
    );
    assert_eq!(report["delivered"][0]["job_id"], job.as_str());
    assert_eq!(report["delivered"][0]["success"], true);
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(&format!("**Job Result:** `{job}`\n```\ndone\n```\n")),
        "{after}"
    );
    assert_eq!(jobs(&file)[0]["state"], "delivered");
    // Its raw output and exit status are gone with the delivery; the entry stays.
    let dir = file
        .parent()
        .unwrap()
        .join(".flemma")
        .join(file.file_name().unwrap())
        .join("jobs");
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, [format!("{job}.json")]);
}

#[test]
fn a_host_killed_mid_job_loses_nothing() {
    let file = transcript("killed-host");
    // This host starts the job and waits for it; it is killed while the job runs.
    let mut host = spawn(&["cycle", path(&file), "--wait"], &[]);
    wait_until("the placeholder", || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.contains("(job="))
    });
    let job = job_id(&file);
    sigkill(i32::try_from(host.id()).unwrap());
    host.wait().unwrap();
    assert_eq!(jobs(&file)[0]["state"], "running");
    // The next host re-adopts the job and delivers it.
    let (code, _, stderr) = run(&["cycle", path(&file), "--wait"]);
    assert_eq!(code, 0);
    assert_took_over_one(&stderr);
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(&format!("**Job Result:** `{job}`\n```\ndone\n```\n")),
        "{after}"
    );
    assert!(!after.contains("Job lost"), "{after}");
}

#[test]
fn a_job_whose_process_is_killed_is_lost_and_only_then() {
    let file = transcript("killed-job");
    let (code, _, stderr) = run(&["cycle", path(&file)]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let job = job_id(&file);
    let pid = journal(&file, &job)["process"]["pid"].as_i64().unwrap();
    // The job's whole process group: the wrapper that would record its exit, and the command.
    sigkill(-i32::try_from(pid).unwrap());
    wait_until("the job's process to go", || {
        jobs(&file)[0]["state"] == "lost"
    });
    let (code, _, stderr) = run(&["cycle", path(&file), "--wait"]);
    assert_eq!(
        (code, stderr.as_str()),
        (
            0,
            "jobs: 0 re-adopted, 0 finished while away, 1 lost, 0 run elsewhere\n"
        )
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains(&format!("**Tool Result:** `toolu_bg` (error job={job})")),
        "{after}"
    );
    assert!(
        after.ends_with(&format!(
            "**Job Result:** `{job}` (error)\n```\nJob lost: session ended before completion.\n```\n"
        )),
        "{after}"
    );
    assert_eq!(jobs(&file)[0]["state"], "lost");
}

/// Kills the host by SIGKILL at `point` (feature `crash-points`), then checks that the next
/// host delivers the job exactly once.
#[cfg(feature = "crash-points")]
fn crash_at(point: &str) {
    let file = transcript(&format!("crash-{point}"));
    let mut host = spawn(
        &["cycle", path(&file), "--wait"],
        &[("FLEMMA_CRASH_POINT", point)],
    );
    let status = host.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "the host did not reach {point}"
    );
    let (code, _, stderr) = run(&["cycle", path(&file), "--wait"]);
    assert_eq!(code, 0);
    assert_took_over_one(&stderr);
    // Read after recovery: a host killed before writing the placeholder left none.
    let job = job_id(&file);
    assert_eq!(job_results(&file, &job), 1, "{point}");
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(&format!("**Job Result:** `{job}`\n```\ndone\n```\n")),
        "{point}: {after}"
    );
    assert_eq!(journal(&file, &job)["state"], "delivered", "{point}");
    // Opening it again delivers nothing more.
    let (code, _, _) = run(&["cycle", path(&file), "--wait"]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after, "{point}");
}

#[cfg(feature = "crash-points")]
#[test]
fn a_host_killed_after_journaling_the_job_but_before_its_placeholder() {
    crash_at("job-journaled");
}

#[cfg(feature = "crash-points")]
#[test]
fn a_host_killed_after_journaling_the_result_delivers_once_next_time() {
    crash_at("job-completed");
}

#[cfg(feature = "crash-points")]
#[test]
fn a_host_killed_between_writing_the_job_result_and_marking_it_delivered() {
    crash_at("job-result-written");
}

/// `flemma run` with a scripted model that sends `bash` to the background: the run waits at
/// idle, delivers the Job Result, resumes after `resume_delay`, and the model answers.
#[test]
fn run_waits_for_a_background_job_and_resumes() {
    let chat = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"bash\"], \"autopilot\": {\"resume_delay\": 50}}}}\n```\n\
        @You:\nBuild it in the background.\n";
    let file = scratch("jobs-run.chat", chat.as_bytes());
    let script = serde_json::json!({"turns": [
        {"text": "Starting the build.", "tool_uses": [{"name": "bash", "input": {
            "label": "build", "command": "sleep 1; echo built", "timeout": null,
            "flemma.background": true}}]},
        {"text": "The build runs in the background."},
        {"text": "The build says: built."},
    ]});
    let script_path = file.with_extension("script.json");
    std::fs::write(&script_path, script.to_string()).unwrap();
    let (code, stdout, stderr) = run(&[
        "run",
        path(&file),
        "--provider",
        "scripted",
        "--script",
        path(&script_path),
    ]);
    assert_eq!(code, 0, "{stderr}");
    // The model's text on standard output, one paragraph per response; the progress on
    // standard error, with the Job Result's first lines.
    assert_eq!(
        stdout,
        "Starting the build.\n\nThe build runs in the background.\n\nThe build says: built.\n"
    );
    let after = std::fs::read_to_string(&file).unwrap();
    let job = job_id(&file);
    assert_eq!(
        stderr,
        format!(
            "request 1\nbackground: toolu_scripted_1_1 is job {job}\nrequest 2\n\
             ok: job {job} (bash)\n    built\njobs delivered: resuming in 50 ms\nresumed\nrequest 3\n\
             stopped: finished\n"
        )
    );
    assert!(
        after.contains(&format!("**Job Result:** `{job}`\n```\nbuilt\n```")),
        "{after}"
    );
    assert!(
        after.ends_with("@Assistant:\nThe build says: built.\n\n@You:\n"),
        "{after}"
    );
}
