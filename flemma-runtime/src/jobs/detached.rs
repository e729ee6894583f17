//! Detached commands: a background job's own process, which outlives the host that started it.
//!
//! The command runs under a small `sh` wrapper in a process group of its own, with standard
//! input from `/dev/null` and standard output and error appended to the job's output file.
//! When the command ends, the wrapper writes its exit status to the job's exit file (a
//! temporary file renamed into place), so the status is on disk whether or not a host is
//! still watching. A host watches a job by its [`ProcessRef`] (pid and start time) and the
//! exit file, polling: the process need not be its child.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::support::now_seconds;
use flemma_builtins::process::ProcessRefExt as _;
use flemma_builtins::process::reap::{MARKER_VAR, Members, stop_all};
use flemma_core::DetachedCommand;
use flemma_core::process::ProcessRef;

/// The wrapper: runs `"$@"`, then records its status in `$1` atomically.
const WRAPPER: &str = r#"exit_file=$1; shift; "$@"; code=$?; printf '%s\n' "$code" > "$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file""#;

/// How often a watched job is looked at.
const POLL: Duration = Duration::from_millis(50);

/// A started detached command.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub(crate) process: ProcessRef,
    /// Reaped by the watcher while this host lives.
    pub(crate) child: tokio::process::Child,
}

/// Starts `command` detached, its output appended to `output`, its status recorded in
/// `exit`, every process marked with `marker`.
pub(crate) fn spawn(
    command: &DetachedCommand,
    output: &Path,
    exit: &Path,
    marker: &str,
) -> std::io::Result<Spawned> {
    let Some((program, args)) = command.argv.split_first() else {
        return Err(std::io::Error::other("empty command line"));
    };
    if let Some(dir) = output.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let out = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(output)?;
    let err = out.try_clone()?;
    let _ = std::fs::remove_file(exit);
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(WRAPPER)
        .arg("flemma-job")
        .arg(exit)
        .arg(program)
        .args(args)
        .current_dir(&command.cwd)
        .env_clear()
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .env(MARKER_VAR, marker)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(false)
        .spawn()?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| std::io::Error::other("the job has no process id"))?;
    let process = ProcessRef::of(pid).unwrap_or(ProcessRef { pid, start_time: 0 });
    Ok(Spawned { process, child })
}

/// How a watched job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watched {
    /// The wrapper recorded this exit status.
    Exited(i32),
    /// Its deadline passed; it was stopped.
    TimedOut,
    /// It was cancelled and stopped.
    Cancelled,
    /// Its process is gone without a recorded status.
    Vanished,
}

/// What a watcher needs to know of a job.
#[derive(Debug)]
pub(crate) struct Watch<'a> {
    pub(crate) process: ProcessRef,
    pub(crate) child: Option<tokio::process::Child>,
    pub(crate) exit: &'a Path,
    /// Seconds since the epoch.
    pub(crate) deadline: Option<f64>,
    pub(crate) marker: Option<&'a str>,
}

/// Waits until the job ends, its deadline passes or `cancel` fires (then stops it).
pub(crate) async fn watch(mut job: Watch<'_>, cancel: &CancellationToken) -> Watched {
    loop {
        if let Some(child) = job.child.as_mut() {
            // Reap our own child, so it does not linger as a zombie.
            if let Ok(Some(_)) = child.try_wait() {
                job.child = None;
            }
        }
        if let Some(code) = read_exit(job.exit) {
            return Watched::Exited(code);
        }
        if !job.process.is_alive() {
            // The wrapper writes the status before it exits: look once more.
            return read_exit(job.exit).map_or(Watched::Vanished, Watched::Exited);
        }
        if job.deadline.is_some_and(|d| now_seconds() >= d) {
            stop(&job).await;
            return Watched::TimedOut;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = cancel.cancelled() => {
                stop(&job).await;
                return Watched::Cancelled;
            }
        }
    }
}

/// The exit status a wrapper recorded.
pub(crate) fn read_exit(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Stops the job's process group and every marked process (`SIGTERM`, a grace period,
/// `SIGKILL`), when the process is still the one started.
async fn stop(job: &Watch<'_>) {
    if !job.process.is_alive() {
        return;
    }
    let members = Members::new(job.process.pid, job.marker.unwrap_or_default().to_owned());
    stop_all(&members).await;
}
