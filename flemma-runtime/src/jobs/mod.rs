//! Background jobs: long calls that run past the turn and come back later as
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
//! [`Detach`]: flemma_core::Detach
//! [`Executor::background`]: crate::Executor::background
//! [`Executor::drain_jobs`]: crate::Executor::drain_jobs
//! [`Executor::recover`]: crate::Executor::recover

mod deliver;
#[cfg(unix)]
pub(crate) mod detached;
pub(crate) mod host;
mod id;
pub(crate) mod journal;
mod recover;
pub(crate) mod start;
pub(crate) mod status;
pub(crate) mod support;
pub(crate) mod table;
pub(crate) mod types;
#[cfg(unix)]
mod watch;

pub(crate) use flemma_core::jobs::{JobJournal, JobRecord, JobState, Outcome, Recorded};
pub use id::new_job_id;
pub use journal::{FileJournal, claim_here, lives_here};
pub(crate) use journal::{JournalFiles, NewRecord};
pub use recover::journaled;
pub use status::JobsStatus;
pub use types::{Delivered, JobError, JobInfo, Recovery};
