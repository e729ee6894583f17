//! The claim table: the records of who runs which call, the executors of this process
//! that may hold claims, and where a conversation's claims are kept (a directory beside the
//! job journal, or a table of this process), under a lock.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use serde::{Deserialize, Serialize};

use crate::conversation::Conversation;
use flemma_builtins::process::ProcessRefExt as _;
use flemma_core::process::ProcessRef;

/// The directory of a file conversation's claims, under its store directory.
const CLAIMS_DIR: &str = "calls";

/// One claim, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClaimRecord {
    pub(crate) tool_id: String,
    pub(crate) tool: String,
    /// The process that holds it; `None` where the platform does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) owner: Option<ProcessRef>,
    /// The executor within that process.
    pub(crate) host: u64,
    /// Seconds since the Unix epoch.
    pub(crate) claimed_at: f64,
}

impl ClaimRecord {
    /// Whether its owner still holds it: another process that still runs, or an executor of
    /// this process that still holds the call.
    pub(crate) fn is_live(&self) -> bool {
        let me = ProcessRef::current();
        match self.owner {
            Some(owner) if Some(owner) != me => owner.is_alive(),
            _ => host_holds(self.host, &self.tool_id),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Hosts: the executors of this process that may hold claims.

/// This executor as a claimant: its id and the calls it holds now.
#[derive(Debug)]
pub(crate) struct Claimant {
    inner: Arc<HostInner>,
}

#[derive(Debug)]
struct HostInner {
    id: u64,
    held: Mutex<HashSet<String>>,
}

/// The executors of this process, by id.
static HOSTS: LazyLock<Mutex<HashMap<u64, Weak<HostInner>>>> = LazyLock::new(Mutex::default);
static NEXT_HOST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn hosts() -> std::sync::MutexGuard<'static, HashMap<u64, Weak<HostInner>>> {
    HOSTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether the executor `host` of this process holds the call `id`.
pub(crate) fn host_holds(host: u64, id: &str) -> bool {
    let found = hosts().get(&host).and_then(Weak::upgrade);
    found.is_some_and(|h| h.held().contains(id))
}

impl HostInner {
    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Claimant {
    pub(crate) fn new() -> Self {
        let id = NEXT_HOST.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let inner = Arc::new(HostInner {
            id,
            held: Mutex::default(),
        });
        hosts().insert(id, Arc::downgrade(&inner));
        Self { inner }
    }

    /// This executor's id among the claimants of this process.
    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    pub(crate) fn hold(&self, id: &str) -> Held {
        self.inner.held().insert(id.to_owned());
        Held {
            host: Arc::clone(&self.inner),
            id: id.to_owned(),
        }
    }
}

impl Drop for Claimant {
    fn drop(&mut self) {
        hosts().remove(&self.inner.id);
    }
}

/// A call this executor holds; dropping it (the call ended, or its cycle was dropped) lets go
/// of it in this process, so that a claim still on record reads as its owner's gone.
#[derive(Debug)]
pub(crate) struct Held {
    host: Arc<HostInner>,
    pub(crate) id: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.host.held().remove(&self.id);
    }
}

// ---------------------------------------------------------------------------------------
// Tables: where a conversation's claims are kept.

/// Where one conversation's claims are kept.
#[derive(Debug, Clone)]
pub(crate) enum Table {
    /// `<store directory>/calls/`, for a conversation in a file.
    Dir(PathBuf),
    /// This process's table, for a conversation without a file (keyed by its address, and
    /// checked against a weak reference so a new conversation at a reused address is not
    /// taken for an old one).
    Memory(usize, Weak<dyn Conversation>),
}

type MemoryClaims = HashMap<usize, (Weak<dyn Conversation>, HashMap<String, ClaimRecord>)>;

/// The claims of the conversations without a file, in this process.
static MEMORY: LazyLock<tokio::sync::Mutex<MemoryClaims>> = LazyLock::new(Default::default);

impl Table {
    /// The table of `conversation`, whose store directory is `store_dir`.
    pub(crate) fn of(conversation: &Arc<dyn Conversation>, store_dir: Option<&Path>) -> Self {
        match (conversation.path(), store_dir) {
            (Some(_), Some(dir)) => Table::Dir(dir.join(CLAIMS_DIR)),
            _ => Table::Memory(
                Arc::as_ptr(conversation).cast::<()>().addr(),
                Arc::downgrade(conversation),
            ),
        }
    }

    /// Takes the table's lock (`flock` on the directory). Tried at once without waiting (the
    /// table's reads and writes under it run on this thread too); when another holder has it,
    /// waited for in the blocking pool, so that other executors of this process keep running.
    pub(crate) async fn lock(&self) -> std::io::Result<Locked> {
        match self {
            Table::Dir(dir) => {
                let dir = dir.clone();
                let file = match lock_dir(&dir, false)? {
                    Some(file) => file,
                    None => tokio::task::spawn_blocking({
                        let dir = dir.clone();
                        move || lock_dir(&dir, true)
                    })
                    .await
                    .map_err(std::io::Error::other)??
                    .ok_or_else(|| std::io::Error::other("the claims lock was not taken"))?,
                };
                Ok(Locked::Dir { file, dir })
            }
            Table::Memory(key, conversation) => {
                let mut table = MEMORY.lock().await;
                // Tables of conversations that are gone go with them.
                table.retain(|_, (weak, _)| weak.strong_count() > 0);
                let fresh = table
                    .get(key)
                    .is_none_or(|(weak, _)| !Weak::ptr_eq(weak, conversation));
                if fresh {
                    table.insert(*key, (Weak::clone(conversation), HashMap::new()));
                }
                Ok(Locked::Memory { table, key: *key })
            }
        }
    }

    /// The claims on record, read without the lock (a quick look before taking it). The
    /// directory is read on this thread, as the table's reads under the lock are: it holds
    /// the claims of the calls running now (none or a few small files), less work than a
    /// hand-off to the blocking pool and back, which every cycle paid twice.
    pub(crate) async fn peek(&self) -> Vec<ClaimRecord> {
        self.scan().await.0
    }

    /// [`peek`](Self::peek), and whether a claim file was left unreadable (see
    /// [`Locked::torn`]).
    pub(crate) async fn scan(&self) -> (Vec<ClaimRecord>, bool) {
        match self {
            Table::Dir(dir) => scan_dir(dir),
            Table::Memory(key, conversation) => {
                let records = MEMORY
                    .lock()
                    .await
                    .get(key)
                    .filter(|(weak, _)| Weak::ptr_eq(weak, conversation))
                    .map(|(_, claims)| claims.values().cloned().collect())
                    .unwrap_or_default();
                (records, false)
            }
        }
    }
}

/// The directory, open and locked; `None` when `wait` is false and another holder has the
/// lock.
fn lock_dir(dir: &Path, wait: bool) -> std::io::Result<Option<std::fs::File>> {
    std::fs::create_dir_all(dir)?;
    let file = std::fs::File::open(dir)?;
    #[cfg(unix)]
    {
        use rustix::fs::FlockOperation;
        let operation = if wait {
            FlockOperation::LockExclusive
        } else {
            FlockOperation::NonBlockingLockExclusive
        };
        match rustix::fs::flock(&file, operation) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) if !wait => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
    #[cfg(not(unix))]
    let _ = wait;
    Ok(Some(file))
}

fn read_dir(dir: &Path) -> Vec<ClaimRecord> {
    scan_dir(dir).0
}

/// The claims in `dir`, and whether a claim file there does not read as one.
fn scan_dir(dir: &Path) -> (Vec<ClaimRecord>, bool) {
    crate::jobs::journal::scan_json_dir(dir, "call claim")
}

/// A table under its lock.
pub(crate) enum Locked {
    Dir {
        /// The directory, open: its lock, and what [`Locked::sync`] syncs.
        file: std::fs::File,
        dir: PathBuf,
    },
    Memory {
        table: tokio::sync::MutexGuard<'static, MemoryClaims>,
        key: usize,
    },
}

impl Locked {
    /// `<id>.json`, the id escaped as store file names escape it ([`flemma_store::escape_id`]:
    /// distinct ids, distinct names), and shortened like them when the id is too long for the
    /// file system (`flemma_store::shorten`: a readable prefix and a hash of the whole id).
    fn file_name(id: &str) -> String {
        let name = format!("{}.json", flemma_store::escape_id(id));
        flemma_store::shorten(&name, flemma_store::MAX_FILE_NAME).into_owned()
    }

    fn file(dir: &Path, id: &str) -> PathBuf {
        dir.join(Self::file_name(id))
    }

    /// The name a claim of `id` had before names were escaped one id to one name (every byte
    /// outside `[A-Za-z0-9._-]` written `--`, `_` before a leading `.`), where that differs:
    /// a claim a host recorded then is still found and removed.
    fn legacy_file(dir: &Path, id: &str) -> Option<PathBuf> {
        let mut escaped = String::with_capacity(id.len());
        for c in id.chars() {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                escaped.push(c);
            } else {
                escaped.push_str("--");
            }
        }
        if escaped.starts_with('.') {
            escaped.insert(0, '_');
        }
        let name = format!("{escaped}.json");
        let name = flemma_store::shorten(&name, flemma_store::MAX_FILE_NAME);
        (*name != *Self::file_name(id)).then(|| dir.join(&*name))
    }

    /// The record in `path`, when it is a claim of `id` (an old name may hold another id's).
    fn read_record(path: &Path, id: &str) -> Option<ClaimRecord> {
        let bytes = std::fs::read(path).ok()?;
        let record: ClaimRecord = serde_json::from_slice(&bytes).ok()?;
        (record.tool_id == id).then_some(record)
    }

    /// Whether the claim file of `id` is there but does not read as a claim: what a crash of
    /// the machine can leave of a claim recorded just before it (the file's name made durable,
    /// its bytes not), its host gone with it. Claims are written whole and renamed into
    /// place, so no live host's claim reads like that.
    pub(crate) fn torn(&self, id: &str) -> bool {
        match self {
            Locked::Dir { dir, .. } => {
                let path = Self::file(dir, id);
                std::fs::read(&path)
                    .is_ok_and(|bytes| serde_json::from_slice::<ClaimRecord>(&bytes).is_err())
            }
            Locked::Memory { .. } => false,
        }
    }

    /// Removes the claim files that do not read as a claim ([`torn`](Self::torn)), but those
    /// of the calls `in_progress`. Under the lock no host is writing a claim, and a claim is
    /// written to another name first, so what is removed is what a crash left.
    pub(crate) fn drop_torn(&mut self, in_progress: &HashSet<String>) {
        let Locked::Dir { dir, .. } = self else {
            return;
        };
        let kept: HashSet<String> = in_progress
            .iter()
            .flat_map(|id| {
                let legacy = Self::legacy_file(dir, id)
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
                std::iter::once(Self::file_name(id)).chain(legacy)
            })
            .collect();
        let Ok(entries) = std::fs::read_dir(&*dir) else {
            return;
        };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let torn = std::path::Path::new(name)
                .extension()
                .is_some_and(|e| e == "json")
                && !kept.contains(name)
                && std::fs::read(&path)
                    .is_ok_and(|bytes| serde_json::from_slice::<ClaimRecord>(&bytes).is_err());
            if torn && let Err(error) = remove_if_present(&path) {
                tracing::warn!(path = %path.display(), %error, "unreadable call claim not removed");
            }
        }
    }

    pub(crate) fn all(&self) -> Vec<ClaimRecord> {
        match self {
            Locked::Dir { dir, .. } => read_dir(dir),
            Locked::Memory { table, key } => table
                .get(key)
                .map(|(_, claims)| claims.values().cloned().collect())
                .unwrap_or_default(),
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<ClaimRecord> {
        match self {
            Locked::Dir { dir, .. } => Self::read_record(&Self::file(dir, id), id).or_else(|| {
                Self::legacy_file(dir, id).and_then(|path| Self::read_record(&path, id))
            }),
            Locked::Memory { table, key } => table.get(key)?.1.get(id).cloned(),
        }
    }

    /// Records a claim (atomically: a temporary file renamed over it).
    pub(crate) fn put(&mut self, record: ClaimRecord) -> std::io::Result<()> {
        match self {
            Locked::Dir { dir, .. } => {
                let path = Self::file(dir, &record.tool_id);
                let tmp = dir.join(format!(
                    ".{}.{}.tmp",
                    Self::file_name(&record.tool_id),
                    std::process::id()
                ));
                let bytes = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
                std::fs::write(&tmp, bytes)?;
                std::fs::rename(&tmp, &path)
            }
            Locked::Memory { table, key } => {
                if let Some((_, claims)) = table.get_mut(key) {
                    claims.insert(record.tool_id.clone(), record);
                }
                Ok(())
            }
        }
    }

    /// Makes the names of the claims recorded so far durable (`fsync` of the claims
    /// directory), before their calls' blocks are cleared: a crash of the machine then never
    /// leaves a call's block in progress without its claim, whatever order the file system
    /// keeps between files. Their bytes are not synced: a claim a crash left empty reads as
    /// [`torn`](Self::torn), which answers its call the same way.
    pub(crate) fn sync(&self) -> std::io::Result<()> {
        match self {
            Locked::Dir { file, .. } => file.sync_all(),
            Locked::Memory { .. } => Ok(()),
        }
    }

    pub(crate) fn remove(&mut self, id: &str) -> std::io::Result<()> {
        match self {
            Locked::Dir { dir, .. } => {
                // A claim of this id under its old name goes too (never another id's).
                if let Some(path) = Self::legacy_file(dir, id)
                    && Self::read_record(&path, id).is_some()
                {
                    remove_if_present(&path)?;
                }
                remove_if_present(&Self::file(dir, id))
            }
            Locked::Memory { table, key } => {
                if let Some((_, claims)) = table.get_mut(key) {
                    claims.remove(id);
                }
                Ok(())
            }
        }
    }
}

/// Removes a file; one that is not there is fine.
fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(host: u64, owner: Option<ProcessRef>) -> ClaimRecord {
        ClaimRecord {
            tool_id: "toolu_1".to_owned(),
            tool: "bash".to_owned(),
            owner,
            host,
            claimed_at: 0.0,
        }
    }

    /// The lock taken at once when free, and waited for (not refused) when another holder
    /// has it: the table is locked only after that holder lets go.
    #[tokio::test(flavor = "current_thread")]
    async fn a_held_lock_is_waited_for() {
        let scratch = tempfile::Builder::new()
            .prefix("flemma-claims-lock-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = scratch.path().join("calls");
        let table = Table::Dir(dir.clone());
        drop(table.lock().await.unwrap_or_else(|e| panic!("{e}")));
        let held = lock_dir(&dir, true)
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("a waiting lock is taken"));
        assert!(
            lock_dir(&dir, false)
                .unwrap_or_else(|e| panic!("{e}"))
                .is_none()
        );
        let released = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let release = std::thread::spawn({
            let released = std::sync::Arc::clone(&released);
            move || {
                std::thread::sleep(std::time::Duration::from_millis(200));
                released.store(true, std::sync::atomic::Ordering::SeqCst);
                drop(held);
            }
        });
        let locked = table.lock().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            released.load(std::sync::atomic::Ordering::SeqCst),
            "locked while held"
        );
        drop(locked);
        release
            .join()
            .unwrap_or_else(|_| panic!("the releasing thread"));
    }

    /// `a b` and `a--b` had one claim file (`a--b.json`): the claim of one read as the
    /// other's. Each has its own now, and a claim under its old name is still found and
    /// removed, never another id's.
    #[tokio::test(flavor = "current_thread")]
    async fn ids_that_escaped_alike_have_claims_of_their_own() {
        let scratch = tempfile::Builder::new()
            .prefix("flemma-claims-names-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = scratch.path().join("calls");
        let table = Table::Dir(dir.clone());
        let mut locked = table.lock().await.unwrap_or_else(|e| panic!("{e}"));
        let claim = |id: &str| ClaimRecord {
            tool_id: id.to_owned(),
            ..record(7, None)
        };
        locked.put(claim("a b")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(locked.get("a--b"), None);
        locked.put(claim("a--b")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(locked.get("a b"), Some(claim("a b")));
        assert_eq!(locked.get("a--b"), Some(claim("a--b")));
        assert_eq!(locked.all().len(), 2);
        locked.remove("a b").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(locked.get("a--b"), Some(claim("a--b")));
        locked.remove("a--b").unwrap_or_else(|e| panic!("{e}"));
        // A claim recorded under the old name (`a:b` was `a--b.json`).
        let old = serde_json::to_vec(&claim("a:b")).unwrap_or_default();
        std::fs::write(dir.join("a--b.json"), old).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(locked.get("a--b"), None);
        assert_eq!(locked.get("a:b"), Some(claim("a:b")));
        locked.remove("a:b").unwrap_or_else(|e| panic!("{e}"));
        assert!(locked.all().is_empty());
        drop(locked);
    }

    #[test]
    fn a_claim_is_live_only_while_its_executor_holds_the_call() {
        let claimant = Claimant::new();
        let me = ProcessRef::current();
        let claim = record(claimant.inner.id, me);
        assert!(!claim.is_live());
        let held = claimant.hold("toolu_1");
        assert!(claim.is_live());
        drop(held);
        assert!(!claim.is_live());
        let held = claimant.hold("toolu_1");
        drop(claimant);
        // The executor went away with the call held.
        assert!(!claim.is_live());
        drop(held);
    }

    #[test]
    fn a_claim_of_a_process_that_is_gone_or_was_replaced_is_not_live() {
        let Some(me) = ProcessRef::current() else {
            return;
        };
        if !cfg!(target_os = "linux") {
            return;
        }
        // The same pid with another start time: the pid went to another process.
        let reused = ProcessRef {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!record(0, Some(reused)).is_live());
        // The parent process (the test runner's shell or cargo) lives.
        #[cfg(unix)]
        if let Some(parent) = i32::try_from(std::os::unix::process::parent_id())
            .ok()
            .and_then(ProcessRef::of)
        {
            assert!(record(0, Some(parent)).is_live());
        }
    }
}
