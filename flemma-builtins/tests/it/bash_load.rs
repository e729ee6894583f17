//! `bash` under load: many short commands at once, each with its exact status and output
//! (issue 17: complete, successful commands were reported as `Command exited with code 129`,
//! the pseudo-terminal's hangup racing the command's exit).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use flemma_core::ToolOutput;

use crate::bash::Call;

/// Calls per run, and how many run at once.
const CALLS: usize = 2000;
const CONCURRENCY: usize = 4;

/// The commands, in turn, with what each must report.
fn cases() -> Vec<(&'static str, ToolOutput)> {
    vec![
        ("seq 1 3", ToolOutput::text("1\n2\n3")),
        ("/bin/echo hi", ToolOutput::text("hi")),
        ("true", ToolOutput::text("(no output)")),
        (
            "exit 3",
            ToolOutput::error("(no output)\n\nCommand exited with code 3"),
        ),
        (
            "kill -9 $$",
            ToolOutput::error("(no output)\n\nCommand exited with code 137"),
        ),
    ]
}

/// Runs [`CALLS`] calls, [`CONCURRENCY`] at a time, and lists every call whose result was not
/// the expected one.
async fn run_all(call: Call) -> Vec<String> {
    let call = Arc::new(call);
    let cases = Arc::new(cases());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (call, cases, next) = (call.clone(), cases.clone(), next.clone());
        workers.spawn(async move {
            let mut wrong = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= CALLS {
                    break wrong;
                }
                let (command, expected) = &cases[n % cases.len()];
                let out = call.command(command).await;
                if out != *expected {
                    wrong.push(format!("call {n}: `{command}` gave {out:?}"));
                }
            }
        });
    }
    let mut wrong = Vec::new();
    while let Some(done) = workers.join_next().await {
        wrong.extend(done.unwrap());
    }
    #[expect(
        clippy::print_stderr,
        reason = "the run time, shown with --nocapture, to keep an eye on CI's budget"
    )]
    {
        eprintln!(
            "{CALLS} bash calls, {CONCURRENCY} at a time: {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    wrong
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_short_commands_report_their_exact_status() -> Result<(), String> {
    verdict(&run_all(Call::new("load")).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_short_sandboxed_commands_report_their_exact_status() -> Result<(), String> {
    verdict(&run_all(crate::sandbox::sandboxed("load-bwrap", false)).await)
}

/// The wrong calls as the test's error: returned rather than panicked with, so that the
/// failure shows the calls (the first 20) without a backtrace after them.
fn verdict(wrong: &[String]) -> Result<(), String> {
    if wrong.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = wrong.iter().take(20).map(String::as_str).collect();
    Err(format!(
        "{} of {CALLS} calls were wrong (the first {} shown):\n{}",
        wrong.len(),
        shown.len(),
        shown.join("\n")
    ))
}

/// A command that closes its last hold on the terminal and keeps running is not hung up:
/// the terminal stays open until the command's status is collected.
#[tokio::test]
async fn closing_the_terminal_does_not_hang_the_command_up() {
    let call = Call::new("close-tty");
    assert_eq!(
        call.command("exec >/dev/null 2>&1; sleep 1; exit 4").await,
        ToolOutput::error("(no output)\n\nCommand exited with code 4")
    );
}
