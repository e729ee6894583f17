//! The job journal: where a conversation's jobs are recorded so that they outlive the host
//! that runs them. [`JobJournal`] is the port (claim, update, list, lock); [`FileJournal`],
//! one small JSON file per job under the conversation's store directory, is today's only
//! implementation.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_ids::{JobId, ToolName, ToolUseId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::JobState;
use crate::process::ProcessRef;

/// A finished job's result, as its Job Result will say it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Outcome {
    pub(crate) success: bool,
    /// The block's text (an error's text with its partial output).
    pub(crate) text: String,
}

/// One job's journal entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct JobRecord {
    pub(crate) job_id: String,
    pub(crate) tool_id: String,
    pub(crate) tool: String,
    pub(crate) state: JobState,
    /// Seconds since the Unix epoch.
    pub(crate) started_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) completed_at: Option<f64>,
    /// The host that watches the job (runs it, for an in-process job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<ProcessRef>,
    /// The job's own process (a detached command's wrapper, the leader of its group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) process: Option<ProcessRef>,
    /// The marker in the detached command's environment (to stop its escapees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) marker: Option<String>,
    /// When a detached command's timeout passes (seconds since the epoch), and the timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deadline: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) timeout_seconds: Option<f64>,
    /// The call's input (harness parameters removed).
    #[serde(default)]
    pub(crate) input: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) save_to: Option<String>,
    /// A detached command's exit status, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exit_status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) outcome: Option<Outcome>,
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
            started_at: super::now_seconds(),
            completed_at: None,
            owner: ProcessRef::current(),
            process: None,
            marker: None,
            deadline: None,
            timeout_seconds: None,
            input,
            save_to,
            exit_status: None,
            outcome: None,
        }
    }

    pub(crate) fn job_id(&self) -> JobId {
        JobId::sanitized(&self.job_id)
    }

    pub(crate) fn tool_id(&self) -> ToolUseId {
        ToolUseId::sanitized(&self.tool_id)
    }

    pub(crate) fn tool(&self) -> ToolName {
        ToolName::read(self.tool.as_str()).unwrap_or_else(|_| ToolName::sanitized(&self.tool))
    }
}

/// A change of one journal entry, made under the journal's lock: whether to write it.
pub(crate) type Change = Box<dyn FnOnce(&mut JobRecord) -> bool + Send>;

/// A held journal lock: while it lives, no other host changes the journal.
#[derive(Debug)]
pub(crate) struct JournalLock {
    _held: Box<dyn std::fmt::Debug + Send + Sync>,
}

impl JournalLock {
    /// A lock held by whatever `held` is (released when it is dropped).
    pub(crate) fn new(held: impl std::fmt::Debug + Send + Sync + 'static) -> Self {
        Self {
            _held: Box::new(held),
        }
    }
}

/// Where a conversation's jobs are recorded: the port a journal kept elsewhere (object
/// storage, a database) implements. Object-safe; every method that does I/O is async and must
/// not block the runtime. Entries are keyed by job id; `update` and `claim` are atomic with
/// respect to every host using the same journal.
///
/// A detached job's own process writes its output and exit status to local files
/// ([`output_path`](Self::output_path), [`exit_path`](Self::exit_path)), whatever keeps the
/// entries.
#[async_trait::async_trait]
pub(crate) trait JobJournal: Send + Sync + std::fmt::Debug {
    /// Records an entry, replacing the one of the same job: a reader sees the old entry or
    /// the new one, never half of one.
    async fn put(&self, record: &JobRecord) -> std::io::Result<()>;

    /// One job's entry; `None` when there is none or it does not decode.
    async fn get(&self, job: &str) -> Option<JobRecord>;

    /// Every entry, oldest start first; entries that do not decode are skipped.
    async fn list(&self) -> Vec<JobRecord>;

    /// Reads, changes and writes one entry under the journal's lock, so two hosts never both
    /// claim or deliver one job; `change` says whether to write. The entry after the change;
    /// `None` when there is none.
    ///
    /// # Errors
    ///
    /// When the lock cannot be taken or the entry cannot be written.
    async fn update(&self, job: &str, change: Change) -> std::io::Result<Option<JobRecord>>;

    /// An exclusive lock on the whole journal, released when dropped: what
    /// [`update`](Self::update) and [`claim`](Self::claim) hold, for a caller that needs several
    /// changes at once.
    ///
    /// # Errors
    ///
    /// When the lock cannot be taken.
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the port's lock; today's callers need update and claim only"
        )
    )]
    async fn lock(&self) -> std::io::Result<JournalLock>;

    /// Where a detached job's output goes (a local file).
    fn output_path(&self, job: &str) -> PathBuf;

    /// Where a detached job's wrapper writes its exit status (a local file).
    fn exit_path(&self, job: &str) -> PathBuf;

    /// Takes a running job over for `owner`: under the lock, unless a live host owns it or
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
        let record = self
            .update(
                job,
                Box::new(move |current| {
                    let taken = current.owner.is_some_and(|o| o.is_alive());
                    if taken || current.state != JobState::Running {
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
/// operation runs on the blocking pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileJournal {
    dir: Arc<Path>,
}

impl FileJournal {
    /// The journal under `store_dir`.
    pub(crate) fn new(store_dir: &Path) -> Self {
        Self {
            dir: Arc::from(store_dir.join("jobs")),
        }
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

    async fn update(&self, job: &str, change: Change) -> std::io::Result<Option<JobRecord>> {
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

    async fn lock(&self) -> std::io::Result<JournalLock> {
        self.blocking(|dir| lock(dir).map(JournalLock::new)).await
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
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|path| {
            let bytes = std::fs::read(&path).ok()?;
            serde_json::from_slice(&bytes)
                .map_err(
                    |error| tracing::warn!(path = %path.display(), %error, "{what} unreadable"),
                )
                .ok()
        })
        .collect()
}

/// A job id as a file name: bytes outside `[A-Za-z0-9._-]` become `--` (the store's escaping).
pub(crate) fn escape(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            out.push(c);
        } else {
            out.push_str("--");
        }
    }
    if out.starts_with('.') {
        out.insert(0, '_');
    }
    out
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
        // The lock is not the directory, which the atomic write locks: no deadlock.
        let held = journal.lock().await;
        assert!(held.is_ok());
        drop(held);
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
        assert_eq!(escape("a/b c"), "a--b--c");
        assert_eq!(escape("../x"), "_..--x");
    }
}
