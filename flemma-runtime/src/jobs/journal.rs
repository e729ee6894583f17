//! The job journal: where a conversation's jobs are recorded so that they outlive the host
//! that runs them. [`JobJournal`] is the port (put, get, list, update, claim, and whether a
//! recorded process lives); [`FileJournal`], one small JSON file per job under the
//! conversation's store directory, is the default; a conversation kept elsewhere gives its own
//! ([`Conversation::job_journal`](crate::Conversation::job_journal)).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_ids::{JobId, ToolName, ToolUseId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::types::JobState;
use flemma_builtins::process::ProcessRef;

/// A finished job's result, as its Job Result will say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Outcome {
    /// Whether the job succeeded.
    pub success: bool,
    /// The block's text (an error's text with its partial output).
    pub text: String,
}

/// One job's journal entry: what `<store>/jobs/<job id>.json` holds (written with
/// `serde_json::to_vec_pretty`, the text every journal stores). Only the executor makes
/// entries; a [`JobJournal`] stores them, and reads the fields it needs to say whether the
/// processes they name live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// files (a [`FileJournal`]'s entries never name one).
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
    /// A job that starts now in this process (its owner), in state `running`.
    pub(crate) fn running(
        job_id: &JobId,
        tool_id: &str,
        tool: &ToolName,
        input: Value,
        save_to: Option<String>,
    ) -> Self {
        Self {
            job_id: job_id.as_str().to_owned(),
            tool_id: tool_id.to_owned(),
            tool: tool.as_str().to_owned(),
            state: JobState::Running,
            started_at: super::support::now_seconds(),
            completed_at: None,
            owner: ProcessRef::current(),
            process: None,
            machine: None,
            marker: None,
            deadline: None,
            timeout_seconds: None,
            input,
            save_to,
            exit_status: None,
            outcome: None,
        }
    }

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
    /// This machine's is looked up by its pid and start time; by default another machine's
    /// is taken for gone; a shared journal asks that machine's liveness.
    async fn lives(&self, record: &JobRecord, which: Recorded) -> bool {
        let process = match which {
            Recorded::Owner => record.owner,
            Recorded::Process => record.process,
        };
        self.is_local(record) && process.is_some_and(|p| p.is_alive())
    }

    /// Takes a running job of this machine over for `owner`, unless a live host owns it or
    /// it no longer runs. The entry as claimed; `None` when it was not.
    ///
    /// # Errors
    ///
    /// As [`update`](Self::update).
    async fn claim(
        &self,
        job: &str,
        owner: Option<ProcessRef>,
    ) -> std::io::Result<Option<JobRecord>> {
        let claimed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let set = Arc::clone(&claimed);
        let machine = self.machine().map(str::to_owned);
        let record = self
            .update(
                job,
                Box::new(move |current| {
                    set.store(false, std::sync::atomic::Ordering::Relaxed);
                    // Another machine's job cannot be watched here; this machine's owner is
                    // looked up by its pid.
                    let local = current.machine == machine;
                    let taken = current.owner.is_some_and(|o| o.is_alive());
                    if !local || taken || current.state != JobState::Running {
                        return false;
                    }
                    current.owner = owner;
                    set.store(true, std::sync::atomic::Ordering::Relaxed);
                    true
                }),
            )
            .await?;
        Ok(record.filter(|_| claimed.load(std::sync::atomic::Ordering::Relaxed)))
    }

    /// The recorded exit status of a detached job, when its wrapper wrote one.
    async fn exit_status(&self, job: &str) -> Option<i32> {
        let path = self.exit_path(job);
        tokio::task::spawn_blocking(move || super::detached::read_exit(&path))
            .await
            .ok()
            .flatten()
    }

    /// Removes a delivered detached job's output and exit files: its result is in the
    /// conversation.
    async fn remove_files(&self, job: &str) {
        let (output, exit) = (self.output_path(job), self.exit_path(job));
        let _ = tokio::task::spawn_blocking(move || {
            let _ = std::fs::remove_file(output);
            let _ = std::fs::remove_file(exit);
        })
        .await;
    }
}

/// The journal of one conversation in files: `<store directory>/jobs/<job id>.json`, written
/// atomically ([`flemma_store::write_atomic`]) under a lock on the store directory; every file
/// operation runs on the blocking pool. Its entries name no machine: the processes they name
/// are this machine's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileJournal {
    dir: Arc<Path>,
}

impl FileJournal {
    /// The journal under `store_dir`.
    pub fn new(store_dir: &Path) -> Self {
        Self {
            dir: Arc::from(store_dir.join("jobs")),
        }
    }

    /// Its directory, `<store directory>/jobs`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The name of `job`'s entry, `<job id>.json`, the id escaped as the store escapes ids
    /// ([`flemma_store::escape_id`]: one name per id): a journal kept elsewhere names its
    /// entries the same.
    ///
    /// ```
    /// use flemma_runtime::jobs::FileJournal;
    ///
    /// assert_eq!(FileJournal::entry_name("job_ab12cd34"), "job_ab12cd34.json");
    /// assert_eq!(FileJournal::entry_name("../x"), "--2e.--2fx.json");
    /// assert_ne!(FileJournal::entry_name("a b"), FileJournal::entry_name("a--b"));
    /// ```
    pub fn entry_name(job: &str) -> String {
        format!("{}.json", escape(job))
    }

    fn file(&self, job: &str, extension: &str) -> PathBuf {
        file(&self.dir, job, extension)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Path) -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        let dir = Arc::clone(&self.dir);
        tokio::task::spawn_blocking(move || f(&dir))
            .await
            .map_err(std::io::Error::other)?
    }
}

fn file(dir: &Path, job: &str, extension: &str) -> PathBuf {
    dir.join(format!("{}.{extension}", escape(job)))
}

fn read(dir: &Path, job: &str) -> Option<JobRecord> {
    let bytes = std::fs::read(file(dir, job, "json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn write(dir: &Path, record: &JobRecord) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    let path = file(dir, &record.job_id, "json");
    flemma_store::write_atomic(&path, &bytes, &flemma_store::NoBackup)
        .map(drop)
        .map_err(std::io::Error::other)
}

/// The journal's lock: `flock` on the store directory, `jobs/`'s parent (not on `jobs/`
/// itself, which [`flemma_store::write_atomic`] locks for its rename of an entry).
fn lock(dir: &Path) -> std::io::Result<std::fs::File> {
    std::fs::create_dir_all(dir)?;
    let file = std::fs::File::open(dir.parent().unwrap_or(dir))?;
    #[cfg(unix)]
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}

#[async_trait::async_trait]
impl JobJournal for FileJournal {
    async fn put(&self, record: &JobRecord) -> std::io::Result<()> {
        let record = record.clone();
        self.blocking(move |dir| write(dir, &record)).await
    }

    async fn get(&self, job: &str) -> Option<JobRecord> {
        let job = job.to_owned();
        self.blocking(move |dir| Ok(read(dir, &job)))
            .await
            .ok()
            .flatten()
    }

    async fn list(&self) -> Vec<JobRecord> {
        let records = self
            .blocking(|dir| Ok(read_json_dir::<JobRecord>(dir, "job journal entry")))
            .await;
        let mut records = records.unwrap_or_default();
        records.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
        records
    }

    async fn update(&self, job: &str, mut change: Change) -> std::io::Result<Option<JobRecord>> {
        let job = job.to_owned();
        self.blocking(move |dir| {
            let _lock = lock(dir)?;
            let Some(mut record) = read(dir, &job) else {
                return Ok(None);
            };
            if change(&mut record) {
                write(dir, &record)?;
            }
            Ok(Some(record))
        })
        .await
    }

    fn output_path(&self, job: &str) -> PathBuf {
        self.file(job, "out")
    }

    fn exit_path(&self, job: &str) -> PathBuf {
        self.file(job, "exit")
    }
}

/// Every `*.json` file of `dir` decoded as a `T`; files that cannot be read or decoded are
/// skipped (a decoding failure with a warning naming `what`), and a missing directory is empty.
pub(crate) fn read_json_dir<T: serde::de::DeserializeOwned>(dir: &Path, what: &str) -> Vec<T> {
    scan_json_dir(dir, what).0
}

/// [`read_json_dir`], and whether a `.json` file there did not parse (each warned of as
/// `what` unreadable).
pub(crate) fn scan_json_dir<T: serde::de::DeserializeOwned>(
    dir: &Path,
    what: &str,
) -> (Vec<T>, bool) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (Vec::new(), false);
    };
    let mut records = Vec::new();
    let mut unreadable = false;
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        match serde_json::from_slice(&bytes) {
            Ok(record) => records.push(record),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "{what} unreadable");
                unreadable = true;
            }
        }
    }
    (records, unreadable)
}

/// A job id as a file name: the store's escaping ([`flemma_store::escape_id`]), one name per
/// id, so that two jobs a transcript names never share an entry.
pub(crate) fn escape(id: &str) -> String {
    flemma_store::escape_id(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, started_at: f64) -> JobRecord {
        let bash = ToolName::new("bash").unwrap_or_else(|e| panic!("{e}"));
        let input = serde_json::json!({"command": "sleep 1"});
        JobRecord {
            started_at,
            ..JobRecord::running(&JobId::sanitized(id), "toolu_1", &bash, input, None)
        }
    }

    #[tokio::test]
    async fn entries_round_trip_and_list_oldest_first() {
        let dir = std::env::temp_dir().join(format!("flemma-journal-{}", std::process::id()));
        let journal: Arc<dyn JobJournal> = Arc::new(FileJournal::new(&dir));
        journal.put(&record("job_b", 2.0)).await.unwrap_or_default();
        journal.put(&record("job_a", 1.0)).await.unwrap_or_default();
        let all = journal.list().await;
        assert_eq!(
            all.iter().map(|r| r.job_id.as_str()).collect::<Vec<_>>(),
            ["job_a", "job_b"]
        );
        let changed = journal
            .update(
                "job_a",
                Box::new(|r| {
                    r.state = JobState::Delivered;
                    true
                }),
            )
            .await
            .ok()
            .flatten();
        assert_eq!(changed.map(|r| r.state), Some(JobState::Delivered));
        assert_eq!(
            journal.get("job_a").await.map(|r| r.state),
            Some(JobState::Delivered)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_job_is_claimed_once_and_only_while_it_runs() {
        let dir = std::env::temp_dir().join(format!("flemma-claim-{}", std::process::id()));
        let journal = FileJournal::new(&dir);
        let gone = ProcessRef {
            pid: i32::MAX,
            start_time: 1,
        };
        let orphan = JobRecord {
            owner: Some(gone),
            ..record("job_c", 1.0)
        };
        journal.put(&orphan).await.unwrap_or_default();
        let me = ProcessRef::current();
        let claimed = journal.claim("job_c", me).await.ok().flatten();
        assert_eq!(claimed.map(|r| r.owner), Some(me));
        if me.is_some() {
            // This process is alive: a second claim finds the job taken.
            assert_eq!(journal.claim("job_c", me).await.ok().flatten(), None);
        }
        journal
            .update(
                "job_c",
                Box::new(|r| {
                    r.owner = None;
                    r.state = JobState::Completed;
                    true
                }),
            )
            .await
            .unwrap_or_default();
        assert_eq!(journal.claim("job_c", me).await.ok().flatten(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ids_escape_to_file_names() {
        assert_eq!(escape("job_ab12"), "job_ab12");
        assert_eq!(escape("a/b c"), "a--2fb--20c");
        assert_eq!(escape("../x"), "--2e.--2fx");
        assert_ne!(escape("a b"), escape("a--b"));
    }
}
