//! The job journal: one small JSON file per job under the conversation's store directory.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use flemma_ids::{JobId, ToolName, ToolUseId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::JobState;

/// A process named by its pid and its start time (clock ticks after boot, from
/// `/proc/<pid>/stat`), so a pid the kernel gave to another process is never taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessRef {
    /// The process id.
    pub pid: i32,
    /// Its start time; 0 where the platform does not tell.
    pub start_time: u64,
}

impl ProcessRef {
    /// This process.
    pub fn current() -> Option<Self> {
        Self::of(i32::try_from(std::process::id()).ok()?)
    }

    /// The process `pid` as it is now; `None` when there is none.
    pub fn of(pid: i32) -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            let stat = crate::procfs::Stat::of(pid)?;
            Some(Self {
                pid,
                start_time: stat.start_time,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            Some(Self { pid, start_time: 0 })
        }
    }

    /// Whether this very process still runs (same pid, same start time, not a zombie).
    pub fn is_alive(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            crate::procfs::Stat::of(self.pid)
                .is_some_and(|stat| stat.start_time == self.start_time && !stat.has_ended())
        }
        #[cfg(all(unix, not(target_os = "linux")))]
        {
            rustix::process::Pid::from_raw(self.pid)
                .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
        }
        #[cfg(not(unix))]
        {
            false
        }
    }
}

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

/// The journal of one conversation: `<store directory>/jobs/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Journal {
    dir: PathBuf,
}

impl Journal {
    pub(crate) fn new(store_dir: &Path) -> Self {
        Self {
            dir: store_dir.join("jobs"),
        }
    }

    fn file(&self, job: &str, extension: &str) -> PathBuf {
        self.dir.join(format!("{}.{extension}", escape(job)))
    }

    /// Where a detached job's output goes.
    pub(crate) fn output_path(&self, job: &str) -> PathBuf {
        self.file(job, "out")
    }

    /// Where a detached job's wrapper writes its exit status.
    pub(crate) fn exit_path(&self, job: &str) -> PathBuf {
        self.file(job, "exit")
    }

    /// The recorded exit status of a detached job, when its wrapper wrote one.
    pub(crate) fn exit_status(&self, job: &str) -> Option<i32> {
        std::fs::read_to_string(self.exit_path(job))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// One job's entry.
    pub(crate) fn read(&self, job: &str) -> Option<JobRecord> {
        let bytes = std::fs::read(self.file(job, "json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Every entry, oldest start first; unreadable files are skipped with a warning.
    pub(crate) fn read_all(&self) -> Vec<JobRecord> {
        let mut records: Vec<JobRecord> = read_json_dir(&self.dir, "job journal entry");
        records.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
        records
    }

    /// Writes an entry atomically (a temporary file renamed over it, synced first), so a
    /// reader sees the old entry or the new one, never half of one.
    pub(crate) fn write(&self, record: &JobRecord) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.file(&record.job_id, "json");
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            escape(&record.job_id),
            std::process::id()
        ));
        let bytes = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &path)
    }

    /// Reads, changes and writes an entry under the journal's lock, so two hosts never both
    /// claim or deliver one job. `change` returns whether to write.
    pub(crate) fn update<T>(
        &self,
        job: &str,
        change: impl FnOnce(&mut JobRecord) -> (bool, T),
    ) -> std::io::Result<Option<T>> {
        let _lock = self.lock()?;
        let Some(mut record) = self.read(job) else {
            return Ok(None);
        };
        let (write, value) = change(&mut record);
        if write {
            self.write(&record)?;
        }
        Ok(Some(value))
    }

    /// An exclusive lock on the journal directory (`flock`), released when dropped.
    pub(crate) fn lock(&self) -> std::io::Result<Lock> {
        std::fs::create_dir_all(&self.dir)?;
        let file = std::fs::File::open(&self.dir)?;
        #[cfg(unix)]
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(Lock { _file: file })
    }
}

/// A held journal lock.
#[derive(Debug)]
pub(crate) struct Lock {
    _file: std::fs::File,
}

/// A job id as a file name: bytes outside `[A-Za-z0-9._-]` become `--` (the store's escaping).
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

    #[test]
    fn entries_round_trip_and_list_oldest_first() {
        let dir = std::env::temp_dir().join(format!("flemma-journal-{}", std::process::id()));
        let journal = Journal::new(&dir);
        journal.write(&record("job_b", 2.0)).unwrap_or_default();
        journal.write(&record("job_a", 1.0)).unwrap_or_default();
        let all = journal.read_all();
        assert_eq!(
            all.iter().map(|r| r.job_id.as_str()).collect::<Vec<_>>(),
            ["job_a", "job_b"]
        );
        let changed = journal
            .update("job_a", |r| {
                r.state = JobState::Delivered;
                (true, ())
            })
            .ok()
            .flatten();
        assert_eq!(changed, Some(()));
        assert_eq!(
            journal.read("job_a").map(|r| r.state),
            Some(JobState::Delivered)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let Some(me) = ProcessRef::current() else {
            return;
        };
        assert!(me.is_alive());
        if cfg!(target_os = "linux") {
            let other = ProcessRef {
                start_time: me.start_time + 1,
                ..me
            };
            assert!(!other.is_alive());
        }
    }

    #[test]
    fn ids_escape_to_file_names() {
        assert_eq!(escape("job_ab12"), "job_ab12");
        assert_eq!(escape("a/b c"), "a--b--c");
        assert_eq!(escape("../x"), "_..--x");
    }
}
