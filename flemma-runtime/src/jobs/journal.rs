//! The job journals: [`FileJournal`], one small JSON file per job under the conversation's
//! store directory, the default; a conversation kept elsewhere gives its own
//! ([`Conversation::job_journal`](flemma_core::Conversation::job_journal)). The port and its
//! entries are flemma-core's ([`flemma_core::jobs`]); [`lives_here`] and [`claim_here`] are
//! the answers of a journal of this machine's processes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_ids::{JobId, ToolName};
use serde_json::Value;

use flemma_builtins::process::ProcessRefExt as _;
use flemma_core::jobs::{Change, JobJournal, JobRecord, JobState, Recorded};
use flemma_core::process::ProcessRef;

/// Making a journal entry: only the executor makes them.
pub(crate) trait NewRecord {
    /// A job that starts now in this process (its owner), in state `running`.
    fn running(
        job_id: &JobId,
        tool_id: &str,
        tool: &ToolName,
        input: Value,
        save_to: Option<String>,
    ) -> Self;
}

impl NewRecord for JobRecord {
    fn running(
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
}

/// What the executor does with a journal's files beside its entries.
pub(crate) trait JournalFiles: JobJournal {
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

impl<J: JobJournal + ?Sized> JournalFiles for J {}

/// Whether the process `which` of `record` still runs, for a journal of this machine's
/// processes: when the entry is this machine's ([`JobJournal::is_local`]), its process looked up
/// by its pid and start time; another machine's is taken for gone. [`FileJournal`]'s
/// [`JobJournal::lives`].
pub fn lives_here<J: JobJournal + ?Sized>(
    journal: &J,
    record: &JobRecord,
    which: Recorded,
) -> bool {
    let process = match which {
        Recorded::Owner => record.owner,
        Recorded::Process => record.process,
        _ => None,
    };
    journal.is_local(record) && process.is_some_and(|p| p.is_alive())
}

/// Takes a running job of this machine over for `owner` through [`JobJournal::update`],
/// unless a live host owns it or it no longer runs: the entry as claimed; `None` when it was
/// not. [`JobJournal::claim`] of [`FileJournal`] and of a journal shared by machines.
///
/// # Errors
///
/// As [`JobJournal::update`].
pub async fn claim_here<J: JobJournal + ?Sized>(
    journal: &J,
    job: &str,
    owner: Option<ProcessRef>,
) -> std::io::Result<Option<JobRecord>> {
    let claimed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let set = Arc::clone(&claimed);
    let machine = journal.machine().map(str::to_owned);
    let record = journal
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

    async fn lives(&self, record: &JobRecord, which: Recorded) -> bool {
        lives_here(self, record, which)
    }

    async fn claim(
        &self,
        job: &str,
        owner: Option<ProcessRef>,
    ) -> std::io::Result<Option<JobRecord>> {
        claim_here(self, job, owner).await
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
        let scratch = tempfile::Builder::new()
            .prefix("flemma-journal-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = scratch.path().join("jobs");
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
    }

    #[tokio::test]
    async fn a_job_is_claimed_once_and_only_while_it_runs() {
        let scratch = tempfile::Builder::new()
            .prefix("flemma-claim-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let journal = FileJournal::new(&scratch.path().join("jobs"));
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
    }

    #[test]
    fn ids_escape_to_file_names() {
        assert_eq!(escape("job_ab12"), "job_ab12");
        assert_eq!(escape("a/b c"), "a--2fb--20c");
        assert_eq!(escape("../x"), "--2e.--2fx");
        assert_ne!(escape("a b"), escape("a--b"));
    }
}
