//! [`BucketJournal`]: a conversation's job journal on the bucket.

use std::sync::Arc;

use futures_util::{StreamExt as _, TryStreamExt as _};
use object_store::path::Path as ObjectPath;
use object_store::{
    GetOptions, ObjectStoreExt as _, PutMode, PutOptions, PutPayload, UpdateVersion,
};

use flemma_builtins::process::ProcessRefExt as _;
use flemma_core::jobs::{Change, JobJournal, JobRecord, Recorded};
use flemma_core::process::ProcessRef;
use flemma_runtime::jobs::FileJournal;

use crate::bucket::Bucket;
use crate::lease::store_prefix;
use crate::machine::Machine;

/// How many times in a row an update is tried again when another host changed the entry.
const UPDATE_TRIES: usize = 32;

/// How many entries are read at once when the journal is listed.
const LIST_READS: usize = 8;

/// The largest entry read (a finished job's result text is in it): a larger object under the
/// prefix is skipped with a warning, never read into memory.
pub const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;

/// The prefix of the journal of the conversation `key` (`dir/.flemma/name.chat/jobs`).
///
/// ```
/// let key = "team/a.chat".into();
/// assert_eq!(flemma_object::journal_prefix(&key).as_ref(), "team/.flemma/a.chat/jobs");
/// ```
pub fn journal_prefix(key: &ObjectPath) -> ObjectPath {
    store_prefix(key).join("jobs")
}

/// A conversation's job journal on the bucket, shared by the machines that
/// run it in turn.
///
/// The entry of job `J` of `dir/name.chat` is `dir/.flemma/name.chat/jobs/J.json`: the path
/// and the text a file conversation's journal has in its store directory. An entry is created
/// by a conditional create (`If-None-Match: *`) and changed by a conditional replace
/// (`If-Match` on the version read, tried again on the entry as it is now when another host
/// changed it in between), so two hosts never both claim or deliver one job. The job's process, its output
/// and its exit file stay on the machine that started it (the entry names it); a host of
/// another machine leaves the job to that machine while one of its hosts lives
/// ([`Machine::lives`]) and answers it lost once none does.
#[derive(Debug, Clone)]
pub struct BucketJournal {
    bucket: Bucket,
    prefix: ObjectPath,
    /// This machine's files of the jobs (output, exit status), in the conversation's local
    /// store directory.
    files: FileJournal,
    machine: Arc<Machine>,
}

impl BucketJournal {
    /// The journal of the conversation `key` of `bucket`, kept by a host of `machine`, whose
    /// jobs' files are kept under `store_dir/jobs/` on this machine. Its requests are counted
    /// with `bucket`'s ([`Bucket::requests`]); the machine's liveness is asked on its own.
    pub fn new(
        bucket: &Bucket,
        machine: Arc<Machine>,
        key: &ObjectPath,
        store_dir: &std::path::Path,
    ) -> Self {
        Self {
            bucket: bucket.clone(),
            prefix: journal_prefix(key),
            files: FileJournal::new(store_dir),
            machine,
        }
    }

    fn key(&self, job: &str) -> ObjectPath {
        self.prefix.clone().join(FileJournal::entry_name(job))
    }

    fn io(&self, key: &ObjectPath, op: &str, error: &object_store::Error) -> std::io::Error {
        std::io::Error::other(format!("{op} {}: {error}", self.bucket.url(key)))
    }

    /// The error of a write refused [`UPDATE_TRIES`] times in a row.
    fn contended(&self, key: &ObjectPath) -> std::io::Error {
        std::io::Error::other(format!(
            "{}: changed by other hosts {UPDATE_TRIES} times in a row",
            self.bucket.url(key)
        ))
    }

    /// The entry and its version; `None` when there is none or it does not decode.
    async fn read(&self, key: &ObjectPath) -> std::io::Result<Option<(JobRecord, UpdateVersion)>> {
        let got = match self
            .bucket
            .store()
            .get_opts(key, GetOptions::default())
            .await
        {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(error) => return Err(self.io(key, "get", &error)),
        };
        let version = UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        if got.meta.size > MAX_ENTRY_BYTES {
            tracing::warn!(key = %key, size = got.meta.size, "job journal entry too large, skipped");
            return Ok(None);
        }
        let bytes = got.bytes().await.map_err(|e| self.io(key, "get", &e))?;
        match serde_json::from_slice(&bytes) {
            Ok(record) => Ok(Some((record, version))),
            Err(error) => {
                tracing::warn!(key = %key, %error, "job journal entry unreadable");
                Ok(None)
            }
        }
    }

    async fn write(
        &self,
        key: &ObjectPath,
        record: &JobRecord,
        mode: PutMode,
    ) -> Result<(), object_store::Error> {
        let bytes =
            serde_json::to_vec_pretty(record).map_err(|e| object_store::Error::Generic {
                store: "journal",
                source: Box::new(e),
            })?;
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        self.bucket
            .store()
            .put_opts(key, PutPayload::from(bytes), opts)
            .await
            .map(drop)
    }
}

#[async_trait::async_trait]
impl JobJournal for BucketJournal {
    async fn put(&self, record: &JobRecord) -> std::io::Result<()> {
        let key = self.key(&record.job_id);
        // A conditional create; over an entry that is there, a conditional replace of the
        // version read: every write of an entry is conditional.
        let mut mode = PutMode::Create;
        for _ in 0..UPDATE_TRIES {
            match self.write(&key, record, mode).await {
                Ok(()) => return Ok(()),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => {
                    // Replace what is there (an entry, or an object that is none), or create
                    // it when it is gone again.
                    mode = match self.bucket.store().head(&key).await {
                        Ok(meta) => PutMode::Update(UpdateVersion {
                            e_tag: meta.e_tag,
                            version: meta.version,
                        }),
                        Err(object_store::Error::NotFound { .. }) => PutMode::Create,
                        Err(error) => return Err(self.io(&key, "head", &error)),
                    };
                }
                Err(error) => return Err(self.io(&key, "put", &error)),
            }
        }
        Err(self.contended(&key))
    }

    async fn get(&self, job: &str) -> Option<JobRecord> {
        let key = self.key(job);
        match self.read(&key).await {
            Ok(found) => found.map(|(record, _)| record),
            Err(error) => {
                tracing::warn!(%error, "job journal entry not read");
                None
            }
        }
    }

    async fn list(&self) -> Vec<JobRecord> {
        let metas: Vec<_> = match self
            .bucket
            .store()
            .list(Some(&self.prefix))
            .try_collect()
            .await
        {
            Ok(metas) => metas,
            Err(error) => {
                tracing::warn!(prefix = %self.prefix, %error, "job journal not listed");
                return Vec::new();
            }
        };
        let entries = metas.into_iter().filter(|m| {
            // Entries only: `jobs/J.json` directly under the prefix.
            m.location
                .prefix_match(&self.prefix)
                .is_some_and(|mut rest| {
                    rest.next().is_some_and(|name| {
                        std::path::Path::new(name.as_ref())
                            .extension()
                            .is_some_and(|e| e == "json")
                    }) && rest.next().is_none()
                })
        });
        let mut records: Vec<JobRecord> = futures_util::stream::iter(entries)
            .map(|meta| async move { self.read(&meta.location).await })
            .buffer_unordered(LIST_READS)
            .filter_map(|read| async move {
                match read {
                    Ok(found) => found.map(|(record, _)| record),
                    Err(error) => {
                        tracing::warn!(%error, "job journal entry not read");
                        None
                    }
                }
            })
            .collect()
            .await;
        records.sort_by(|a, b| a.started_at.total_cmp(&b.started_at));
        records
    }

    async fn update(&self, job: &str, mut change: Change) -> std::io::Result<Option<JobRecord>> {
        let key = self.key(job);
        for _ in 0..UPDATE_TRIES {
            let Some((mut record, version)) = self.read(&key).await? else {
                return Ok(None);
            };
            if !change(&mut record) {
                return Ok(Some(record));
            }
            match self.write(&key, &record, PutMode::Update(version)).await {
                Ok(()) => return Ok(Some(record)),
                // Another host changed it since it was read: the change again, on its text.
                Err(object_store::Error::Precondition { .. }) => {}
                Err(error) => return Err(self.io(&key, "put", &error)),
            }
        }
        Err(self.contended(&key))
    }

    fn output_path(&self, job: &str) -> std::path::PathBuf {
        self.files.output_path(job)
    }

    fn exit_path(&self, job: &str) -> std::path::PathBuf {
        self.files.exit_path(job)
    }

    fn machine(&self) -> Option<&str> {
        Some(self.machine.id())
    }

    async fn claim(
        &self,
        job: &str,
        owner: Option<ProcessRef>,
    ) -> std::io::Result<Option<JobRecord>> {
        flemma_runtime::jobs::claim_here(self, job, owner).await
    }

    async fn lives(&self, record: &JobRecord, which: Recorded) -> bool {
        let process = match which {
            Recorded::Owner => record.owner,
            Recorded::Process => record.process,
            _ => None,
        };
        let Some(process) = process else {
            return false;
        };
        if self.is_local(record) {
            return process.is_alive();
        }
        // An entry that names no machine was not written by a journal on a bucket: its
        // processes cannot be found.
        let Some(machine) = record.machine.as_deref() else {
            return false;
        };
        match which {
            // A host says it lives itself.
            Recorded::Owner => self.machine.host_lives(machine, &process).await,
            // A job's process cannot: its machine lives, or nothing there watches it.
            Recorded::Process => self.machine.lives(machine).await,
            _ => false,
        }
    }
}
