//! The job journal's contract: where a conversation's background jobs are recorded so that
//! they outlive the host that runs them. [`JobJournal`] is the port (put, get, list, update,
//! claim, and whether a recorded process lives); a [`JobRecord`] is one job's entry.
//!
//! flemma-runtime holds the journals (`jobs::FileJournal`, one small JSON file per job under
//! the conversation's store directory, the default) and everything that makes and reads the
//! entries; a conversation kept elsewhere gives its own journal
//! ([`Conversation::job_journal`](crate::Conversation::job_journal)).

use flemma_ids::{JobId, ToolName, ToolUseId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

use crate::process::ProcessRef;

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

/// A finished job's result, as its Job Result will say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Outcome {
    /// Whether the job succeeded.
    pub success: bool,
    /// The block's text (an error's text with its partial output).
    pub text: String,
}

impl Outcome {
    /// A result: whether the job succeeded, and the block's text.
    pub fn new(success: bool, text: impl Into<String>) -> Self {
        Self {
            success,
            text: text.into(),
        }
    }
}

/// One job's journal entry: what `<store>/jobs/<job id>.json` holds (written with
/// `serde_json::to_vec_pretty`, the text every journal stores). Only the executor makes
/// entries; a [`JobJournal`] stores them, and reads the fields it needs to say whether the
/// processes they name live. Plain data: every field is public and the struct may be built
/// whole (a field added later is a breaking change of this crate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job's id (`job_…`).
    pub job_id: String,
    /// The call it runs.
    pub tool_id: String,
    /// The tool.
    pub tool: String,
    /// Where it is in its life.
    pub state: JobState,
    /// Seconds since the Unix epoch.
    pub started_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// When it finished, seconds since the Unix epoch.
    pub completed_at: Option<f64>,
    /// The host that watches the job (runs it, for an in-process job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ProcessRef>,
    /// The job's own process (a detached command's wrapper, the leader of its group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessRef>,
    /// The machine whose processes [`owner`](Self::owner) and [`process`](Self::process)
    /// are, as the journal that recorded them names it; `None`: the machine of the journal's
    /// files (flemma-runtime's `FileJournal`'s entries never name one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The marker in the detached command's environment (to stop its escapees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
    /// When a detached command's timeout passes (seconds since the epoch), and the timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The detached command's timeout, in seconds.
    pub timeout_seconds: Option<f64>,
    /// The call's input (harness parameters removed).
    #[serde(default)]
    pub input: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Where its result is saved (`flemma.save_to`).
    pub save_to: Option<String>,
    /// A detached command's exit status, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Its result, once it finished.
    pub outcome: Option<Outcome>,
}

impl JobRecord {
    /// The job's id, as an id.
    pub fn job_id(&self) -> JobId {
        JobId::sanitized(&self.job_id)
    }

    /// The call's id, as an id.
    pub fn tool_id(&self) -> ToolUseId {
        ToolUseId::sanitized(&self.tool_id)
    }

    /// The tool's name, as a name.
    pub fn tool(&self) -> ToolName {
        ToolName::read(self.tool.as_str()).unwrap_or_else(|_| ToolName::sanitized(&self.tool))
    }
}

/// A change of one journal entry, made where no other host changes it at the same time
/// ([`JobJournal::update`]): whether to write it. A journal may call it more than once (again on
/// the entry as it is now, when another host changed it in between), so it must not depend on
/// having run before.
pub type Change = Box<dyn FnMut(&mut JobRecord) -> bool + Send>;

/// Which of an entry's processes [`JobJournal::lives`] is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Recorded {
    /// The host that watches the job ([`JobRecord::owner`]).
    Owner,
    /// The job's own process ([`JobRecord::process`]).
    Process,
}

/// Where a conversation's jobs are recorded: the port a journal kept elsewhere (object
/// storage, a database) implements. Object-safe; every method that does I/O is async and must
/// not block the runtime. Entries are keyed by job id; `update` and `claim` are atomic with
/// respect to every host using the same journal.
///
/// A detached job's own process writes its output and exit status to files of the machine
/// it runs on ([`output_path`](Self::output_path), [`exit_path`](Self::exit_path)), whatever
/// keeps the entries: only a host of that machine can watch it or read its result. A journal
/// that several machines share names its host's machine ([`machine`](Self::machine)), which
/// the executor writes into the entries it makes ([`JobRecord::machine`]), and says whether
/// another machine's processes live ([`lives`](Self::lives)).
#[async_trait::async_trait]
pub trait JobJournal: Send + Sync + std::fmt::Debug {
    /// Records an entry, replacing the one of the same job: a reader sees the old entry or
    /// the new one, never half of one.
    ///
    /// # Errors
    ///
    /// When the entry cannot be written.
    async fn put(&self, record: &JobRecord) -> std::io::Result<()>;

    /// One job's entry; `None` when there is none or it does not decode.
    async fn get(&self, job: &str) -> Option<JobRecord>;

    /// Every entry, oldest start first; entries that do not decode are skipped.
    async fn list(&self) -> Vec<JobRecord>;

    /// Reads, changes and writes one entry so that no other host's change of it comes in
    /// between (under a lock, or by a conditional write tried again on the entry as it is now),
    /// so two hosts never both claim or deliver one job; `change` says whether to write. The
    /// entry after the change; `None` when there is none.
    ///
    /// # Errors
    ///
    /// When the lock cannot be taken or the entry cannot be written.
    async fn update(&self, job: &str, change: Change) -> std::io::Result<Option<JobRecord>>;

    /// Where a detached job's output goes (a file of this machine).
    fn output_path(&self, job: &str) -> PathBuf;

    /// Where a detached job's wrapper writes its exit status (a file of this machine).
    fn exit_path(&self, job: &str) -> PathBuf;

    /// The machine this journal's host runs on, as its entries name it
    /// ([`JobRecord::machine`]); `None`, the default, for a journal of one machine's files.
    fn machine(&self) -> Option<&str> {
        None
    }

    /// Whether `record`'s processes are this machine's (see [`machine`](Self::machine)): only
    /// then can this host watch its process and read its output.
    fn is_local(&self, record: &JobRecord) -> bool {
        record.machine.as_deref() == self.machine()
    }

    /// Whether the process `which` of `record` still runs (false when the entry names none).
    /// This machine's is looked up by its pid and start time; another machine's is taken for
    /// gone by a journal of one machine's files, and asked of that machine by a shared one.
    /// flemma-runtime's `jobs::lives_here` is the answer for this machine's processes.
    async fn lives(&self, record: &JobRecord, which: Recorded) -> bool;

    /// Takes a running job of this machine over for `owner`, unless a live host owns it or
    /// it no longer runs. The entry as claimed; `None` when it was not. flemma-runtime's
    /// `jobs::claim_here` does it through [`update`](Self::update).
    ///
    /// # Errors
    ///
    /// As [`update`](Self::update).
    async fn claim(
        &self,
        job: &str,
        owner: Option<ProcessRef>,
    ) -> std::io::Result<Option<JobRecord>>;
}
