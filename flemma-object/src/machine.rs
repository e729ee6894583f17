//! [`Machine`]: which machine a host runs on, and whether a machine's hosts live.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt as _, PutPayload, path::PathPart};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use flemma_builtins::process::ProcessRefExt as _;
use flemma_core::process::ProcessRef;

use crate::bucket::Bucket;
use crate::error::ObjectError;
use crate::lease::now;

/// The prefix of the hosts' objects, at the bucket's root (beside no conversation: the store
/// prefixes are `.flemma/`).
pub const HOSTS_PREFIX: &str = ".flemma-hosts";

/// The largest host object read; a larger one is taken for no host.
const MAX_HOST_BYTES: u64 = 64 * 1024;

/// The file of a working directory that holds its machine's id.
const MACHINE_ID_FILE: &str = ".flemma/machine-id";

/// A host's object (`.flemma-hosts/MACHINE/PID-START.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HostRecord {
    /// The machine.
    pub machine: String,
    /// The host process.
    pub process: ProcessRef,
    /// When it expires unless renewed, seconds since the Unix epoch.
    pub expires_at: f64,
}

/// Which machine a host runs on, as the bucket knows it, and whether a machine's
/// hosts live.
///
/// A background job's process and its output files stay on the machine that started it, so
/// the job journal on the bucket names that machine in each entry
/// ([`JobRecord::machine`](flemma_core::jobs::JobRecord::machine)). A machine is a working
/// directory (`--workdir`): the conversations' local paths, the jobs' output and exit files,
/// and the machine's id in `WORKDIR/.flemma/machine-id`, made once, so that every worker using
/// that directory is a host of the same machine. Each host process says it lives with a small
/// object, `.flemma-hosts/MACHINE/PID-START.json`, renewed every third of its time to live and
/// deleted when the host stops. Another machine takes a host for gone once its object has
/// expired (or is missing), and a machine for gone once none of its hosts lives.
#[derive(Debug)]
pub struct Machine {
    bucket: Bucket,
    id: String,
    ttl: Duration,
    process: Option<ProcessRef>,
}

impl Machine {
    /// The machine `id` (made of `[A-Za-z0-9._-]` only: other characters become `-`), whose
    /// hosts' objects live `ttl` unless renewed.
    pub fn new(bucket: &Bucket, id: &str, ttl: Duration) -> Self {
        let id: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let id = if id.is_empty() || id.starts_with('.') {
            format!("m{id}")
        } else {
            id
        };
        Self {
            bucket: bucket.clone(),
            id,
            ttl,
            process: ProcessRef::current(),
        }
    }

    /// The machine of the working directory `workdir`: its id read from
    /// `workdir/.flemma/machine-id`, which is made (the host's name and a random part) when
    /// there is none.
    ///
    /// # Errors
    ///
    /// [`ObjectError::Workdir`] when the file can be neither read nor made.
    pub fn of_workdir(bucket: &Bucket, workdir: &Path, ttl: Duration) -> Result<Self, ObjectError> {
        let id = machine_id(workdir).map_err(|source| ObjectError::Workdir {
            path: workdir.join(MACHINE_ID_FILE),
            source,
        })?;
        Ok(Self::new(bucket, &id, ttl))
    }

    /// The machine's id, as the job journal's entries name it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The bucket it is known on.
    pub fn bucket(&self) -> &Bucket {
        &self.bucket
    }

    fn host_key(machine: &str, process: &ProcessRef) -> ObjectPath {
        ObjectPath::from_iter([
            PathPart::from(HOSTS_PREFIX),
            PathPart::from(machine),
            PathPart::from(format!("{}-{}.json", process.pid, process.start_time)),
        ])
    }

    /// Says on the bucket that this host lives, for the time to live from now.
    ///
    /// # Errors
    ///
    /// [`ObjectError::Request`] when the object cannot be written.
    pub async fn announce(&self) -> Result<(), ObjectError> {
        let Some(process) = self.process else {
            return Ok(());
        };
        let record = HostRecord {
            machine: self.id.clone(),
            process,
            expires_at: now() + self.ttl.as_secs_f64(),
        };
        let key = Self::host_key(&self.id, &process);
        let bytes = serde_json::to_vec(&record).map_err(|source| ObjectError::LeaseRecord {
            url: self.bucket.url(&key),
            source,
        })?;
        self.bucket
            .store()
            .put(&key, PutPayload::from(bytes))
            .await
            .map_err(|e| ObjectError::request(self.bucket.url(&key), "put", e))?;
        Ok(())
    }

    /// Deletes this host's object: it no longer lives (its jobs are answered lost by the next
    /// host that opens their conversation, unless another host of this machine lives).
    pub async fn withdraw(&self) {
        let Some(process) = self.process else {
            return;
        };
        let key = Self::host_key(&self.id, &process);
        if let Err(error) = self.bucket.store().delete(&key).await {
            tracing::warn!(key = %key, %error, "host object not deleted");
        }
    }

    /// Announces this host every third of the time to live until `until` is cancelled, then
    /// withdraws it. A failed renewal is tried again at the next tick.
    pub async fn keep_announced(&self, until: CancellationToken) {
        let every = (self.ttl / 3).max(Duration::from_millis(100));
        let mut ticks = tokio::time::interval(every);
        loop {
            tokio::select! {
                () = until.cancelled() => break,
                _ = ticks.tick() => {
                    if let Err(error) = self.announce().await {
                        tracing::warn!(%error, "host not announced");
                    }
                }
            }
        }
        self.withdraw().await;
    }

    /// Whether the host `process` of the machine `machine` lives: its object is there and has
    /// not expired. False when the bucket cannot be read.
    pub async fn host_lives(&self, machine: &str, process: &ProcessRef) -> bool {
        let key = Self::host_key(machine, process);
        self.object_lives(&key).await
    }

    /// Whether the host object `key` is there, whole, and not expired.
    async fn object_lives(&self, key: &ObjectPath) -> bool {
        let Ok(got) = self.bucket.store().get(key).await else {
            return false;
        };
        if got.meta.size > MAX_HOST_BYTES {
            return false;
        }
        got.bytes()
            .await
            .ok()
            .and_then(|bytes| serde_json::from_slice::<HostRecord>(&bytes).ok())
            .is_some_and(|record| record.expires_at > now())
    }

    /// Whether a host of the machine `machine` lives (see [`host_lives`](Self::host_lives)).
    pub async fn lives(&self, machine: &str) -> bool {
        if machine == self.id && self.process.is_some() {
            return true;
        }
        let prefix = ObjectPath::from_iter([PathPart::from(HOSTS_PREFIX), PathPart::from(machine)]);
        let Ok(hosts) = self
            .bucket
            .store()
            .list(Some(&prefix))
            .try_collect::<Vec<_>>()
            .await
        else {
            return false;
        };
        for meta in hosts {
            if meta.size <= MAX_HOST_BYTES && self.object_lives(&meta.location).await {
                return true;
            }
        }
        false
    }
}

/// The id in `workdir/.flemma/machine-id`, made when there is none: written to a file of its
/// own, then linked into place, so that of hosts starting at once one id wins and every host
/// reads a whole one.
fn machine_id(workdir: &Path) -> std::io::Result<String> {
    let path = workdir.join(MACHINE_ID_FILE);
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_owned());
    }
    let dir = path
        .parent()
        .map_or_else(|| workdir.to_owned(), Path::to_owned);
    std::fs::create_dir_all(&dir)?;
    let fresh = fresh_id();
    let temp: PathBuf = dir.join(format!(".machine-id.{}", std::process::id()));
    std::fs::write(&temp, format!("{fresh}\n"))?;
    let linked = std::fs::hard_link(&temp, &path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(fresh),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok(std::fs::read_to_string(&path)?.trim().to_owned())
        }
        Err(error) => Err(error),
    }
}

/// The kernel's name of this host, when it tells one.
pub(crate) fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

/// The host's name and 16 hex digits of the OS's randomness (or of the time and the pid).
fn fresh_id() -> String {
    use std::io::Read as _;
    let host = host_name().unwrap_or_else(|| "machine".to_owned());
    let mut bytes = [0_u8; 8];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    let part = if random.is_ok() {
        u64::from_le_bytes(bytes)
    } else {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        // Only the low bits are wanted: the truncation is the point.
        #[expect(clippy::cast_possible_truncation, reason = "the low 64 bits")]
        let low = nanos as u64;
        low ^ u64::from(std::process::id()).rotate_left(32)
    };
    format!("{host}-{part:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workdir_keeps_its_machine_id() {
        let scratch = tempfile::Builder::new()
            .prefix("flemma-machine-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        // Not there yet: the first call makes it.
        let dir = scratch.path().join("workdir");
        let first = machine_id(&dir).unwrap_or_else(|e| panic!("{e}"));
        let again = machine_id(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first, again);
        assert!(first.len() > 17, "{first}");
    }

    #[test]
    fn ids_keep_to_safe_characters() {
        let bucket = Bucket::with_store(
            "b",
            std::sync::Arc::new(object_store::memory::InMemory::new()),
        );
        assert_eq!(
            Machine::new(&bucket, "a/b c", Duration::from_secs(1)).id(),
            "a-b-c"
        );
        assert_eq!(
            Machine::new(&bucket, ".x", Duration::from_secs(1)).id(),
            "m.x"
        );
        assert_eq!(Machine::new(&bucket, "", Duration::from_secs(1)).id(), "m");
    }
}
