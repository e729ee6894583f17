//! Background jobs (spec §8): long calls that run past the turn and come back later as
//! `**Job Result:**` blocks, and the journal that keeps them across host processes.
//!
//! A call enters the background when the model sets `"flemma.background": true` on an async
//! tool, or when the host moves a running call there ([`Executor::background`]). Its result
//! block then holds a placeholder (`**Tool Result:** `id` (job=job_…)`), the conversation goes
//! on, and the finished job waits in a FIFO queue until a delivery point
//! ([`Executor::drain_jobs`], run by every cycle when no foreground call is running) writes its
//! Job Result.
//!
//! # The journal
//!
//! Every job has a small JSON file under the conversation's store directory,
//! `<store>/jobs/<job id>.json`: its ids, tool, input, state (`running`, `completed`,
//! `delivered`, `lost`), the host process that owns it and, for a job that runs as a process
//! of its own, that process, its output file and its exit status. A process is named by its
//! pid *and* its start time, so a reused pid is never taken for it.
//!
//! The journal is a port, [`JobJournal`]: [`FileJournal`] keeps those files, and a
//! conversation kept elsewhere gives a journal of its own
//! ([`Conversation::job_journal`](crate::Conversation::job_journal)), whose entries name the
//! machine whose processes they are ([`JobRecord::machine`]): a job of another machine is left
//! to it while it lives ([`JobJournal::lives`]) and is lost once it does not.
//!
//! A tool that implements [`Detach`] (the built-in `bash` does) runs in the background as a
//! process of its own: its own process group, output to `<store>/jobs/<job id>.out`, and a
//! small shell wrapper that writes the exit status to `<job id>.exit` when the command ends,
//! whether or not a host is still running. Other tools run in the host's runtime; their result
//! is written to the journal the moment they finish.
//!
//! When a conversation is opened ([`Executor::recover`], run by the first cycle), every job it
//! references is looked up: one whose process still runs is re-adopted (watched, and delivered
//! when it ends); one that finished while no host was running is delivered; one that finished
//! but whose delivery was interrupted is delivered again (the Job Result is replaced in place,
//! so a redelivery is idempotent). Only a job whose process is gone without a recorded exit, or
//! an in-process job whose host died, is lost: its header becomes `error job=…` and its Job
//! Result says `Job lost: session ended before completion.`
//!
//! [`Executor::background`]: crate::Executor::background
//! [`Executor::drain_jobs`]: crate::Executor::drain_jobs
//! [`Executor::recover`]: crate::Executor::recover

mod deliver;
#[cfg(unix)]
pub(crate) mod detached;
pub(crate) mod host;
pub(crate) mod journal;
mod recover;
pub(crate) mod start;
pub(crate) mod status;
pub(crate) mod table;
#[cfg(unix)]
mod watch;

use flemma_ast::writer::JobPlacement;
use flemma_ids::{JobId, ToolName, ToolUseId};
use serde::{Deserialize, Serialize};

pub use journal::{Change, FileJournal, JobJournal, JobRecord, Outcome, Recorded};
pub use recover::journaled;
pub use status::JobsStatus;

/// A job action that does not apply, or a job journal that cannot be used: what
/// [`Executor::background`](crate::Executor::background) and the recovery of a conversation's
/// jobs refuse with (as [`ExecutorError::Job`](crate::ExecutorError::Job)). The messages are
/// spec §8.1's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// The call is not running (no result is being produced for it here).
    #[error("Tool {id} is not currently executing")]
    NotExecuting {
        /// The call.
        id: String,
    },
    /// The call has its result already.
    #[error("Tool {id} has already completed")]
    AlreadyCompleted {
        /// The call.
        id: String,
    },
    /// The call runs as a job already.
    #[error("Tool {id} is already running in background")]
    AlreadyBackground {
        /// The call.
        id: String,
    },
    /// The tool is synchronous: it cannot run in the background (spec §8.1; the catalogue
    /// has no text for it).
    #[error("Tool '{tool}' is synchronous and cannot run in the background")]
    NotBackgroundable {
        /// The tool.
        tool: ToolName,
    },
    /// The conversation's job journal could not be read or written.
    #[error("job journal: {source}")]
    Journal {
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Its process or task runs.
    Running,
    /// It finished; its Job Result is not written yet.
    Completed,
    /// Its Job Result is in the conversation.
    Delivered,
    /// It ended without a result (its host or process died).
    Lost,
}

impl JobState {
    /// The state's name in `flemma jobs --json`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Delivered => "delivered",
            JobState::Lost => "lost",
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One job of a conversation, as [`Executor::jobs`](crate::Executor::jobs) lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobInfo {
    /// The job.
    pub job_id: JobId,
    /// The call it runs.
    pub tool_id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// Its state.
    pub state: JobState,
    /// Seconds since it started (until it completed, for a finished job); `None` when unknown.
    pub elapsed_seconds: Option<f64>,
}

/// One Job Result written by a delivery point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// The job.
    pub job_id: JobId,
    /// The call it ran.
    pub tool_id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// Whether it succeeded.
    pub success: bool,
    /// Where its block went.
    pub placement: JobPlacement,
}

/// What opening a conversation found among its jobs ([`Executor::recover`](crate::Executor::recover)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Jobs whose process still runs, now watched by this host.
    pub adopted: Vec<JobId>,
    /// Jobs running in another live host, left to it.
    pub elsewhere: Vec<JobId>,
    /// Jobs that finished while no host delivered them, now queued for delivery.
    pub finished: Vec<JobId>,
    /// Jobs that are gone without a result: marked lost.
    pub lost: Vec<JobId>,
}

/// The characters of a job id's random part (spec §8.2).
const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// A fresh job id (`job_` and eight characters of `[a-z0-9]` from the OS's randomness),
/// drawn again while `taken` says it is in use, at most 100 times (spec §8.2).
pub fn new_job_id(taken: impl Fn(&str) -> bool) -> JobId {
    let mut id = random_id();
    for _ in 0..100 {
        if !taken(&id) {
            break;
        }
        id = random_id();
    }
    JobId::sanitized(&id)
}

fn random_id() -> String {
    let mut bytes = [0_u8; 8];
    fill_random(&mut bytes);
    let mut id = String::with_capacity(12);
    id.push_str("job_");
    id.extend(
        bytes
            .iter()
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])),
    );
    id
}

/// OS randomness; a clock- and counter-based fallback where the OS gives none.
fn fill_random(bytes: &mut [u8]) {
    use std::hash::{BuildHasher as _, Hasher as _};
    use std::io::Read as _;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(bytes))
        .is_ok()
    {
        return;
    }
    for (i, byte) in bytes.iter_mut().enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        hasher.write_usize(i);
        *byte = hasher.finish().to_le_bytes()[0];
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Dies by `SIGKILL` when `FLEMMA_CRASH_POINT` names `point`: the crash tests kill the host at
/// each step of a job's life (feature `crash-points`, for tests only).
#[cfg(feature = "crash-points")]
pub(crate) fn crash_point(point: &str) {
    if std::env::var("FLEMMA_CRASH_POINT").is_ok_and(|p| p == point) {
        #[cfg(unix)]
        {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
        std::process::abort();
    }
}

/// Without the feature `crash-points`, nothing.
#[cfg(not(feature = "crash-points"))]
#[inline]
pub(crate) fn crash_point(_point: &str) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_have_the_spec_shape() {
        let id = new_job_id(|_| false);
        let rest = id.as_str().strip_prefix("job_").unwrap_or_default();
        assert_eq!(rest.len(), 8);
        assert!(rest.bytes().all(|b| ALPHABET.contains(&b)));
    }

    #[test]
    fn taken_ids_are_drawn_again() {
        let first = new_job_id(|_| false);
        let next = new_job_id(|id| id == first.as_str());
        assert_ne!(first, next);
    }
}
