//! Claims: one execution per call, however many hosts open the conversation.
//!
//! Before a host runs an approved call it claims it: under a lock, it reads the conversation
//! again, checks that the call's block is still `(approved)` and empty and that no live host
//! holds a claim on it, and records its own claim. The claim names its owner: the process
//! (pid and start time, so a pid the kernel gave to another process is not taken for it) and
//! the executor within it. The claim is removed, under the same lock, once the call's final
//! result is in the conversation (or the call went to the background, where the job journal
//! takes over).
//!
//! A conversation in a file keeps its claims beside the job journal, one JSON file per call
//! in `<store directory>/calls/`, locked with `flock` on that directory; a conversation without
//! a file keeps them in a table of this process.
//!
//! Every cycle looks at the claims left: a live other host's claim makes the cycle report
//! [`Next::Running`](super::Next::Running) (the conversation is not ready to send); a claim
//! whose owner is gone (its process died, or its executor or cycle was dropped) while its
//! result block is still the empty in-progress block is answered with an error result,
//! [`CALL_LOST`](crate::messages::CALL_LOST), so an interrupted call is never sent as an empty
//! success. A gone owner's claim on a block that is still `(approved)` is dropped: the host died
//! before it started the call (it clears the suffix, then runs), so the call runs now.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use flemma_ast::writer::{self, ResultBody};
use flemma_ast::{Document, ToolStatus};
use flemma_ids::{ToolName, ToolUseId};
use serde::{Deserialize, Serialize};

use super::{Call, Completed, Executor, ExecutorError, Settings};
use crate::conversation::Conversation;
use crate::events::Event;
use crate::jobs::ProcessRef;
use crate::messages as msg;

/// The directory of a file conversation's claims, under its store directory.
const CLAIMS_DIR: &str = "calls";

/// One claim, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ClaimRecord {
    tool_id: String,
    tool: String,
    /// The process that holds it; `None` where the platform does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<ProcessRef>,
    /// The executor within that process.
    host: u64,
    /// Seconds since the Unix epoch.
    claimed_at: f64,
}

impl ClaimRecord {
    /// Whether its owner still holds it: another process that still runs, or an executor of
    /// this process that still holds the call.
    fn is_live(&self) -> bool {
        let me = ProcessRef::current();
        match self.owner {
            Some(owner) if Some(owner) != me => owner.is_alive(),
            _ => host_holds(self.host, &self.tool_id),
        }
    }
}

/// A call claimed by a host, as [`Executor::claims`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallClaim {
    /// The call.
    pub id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// The process that claimed it, when known.
    pub pid: Option<i32>,
    /// Whether its host still runs it; `false` when the host died or dropped it, so that the
    /// next cycle answers the call with an error.
    pub live: bool,
}

// ---------------------------------------------------------------------------------------
// Hosts: the executors of this process that may hold claims.

/// This executor as a claimant: its id and the calls it holds now.
#[derive(Debug)]
pub(super) struct Claimant {
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
fn host_holds(host: u64, id: &str) -> bool {
    let found = hosts().get(&host).and_then(Weak::upgrade);
    found.is_some_and(|h| h.held().contains(id))
}

impl HostInner {
    fn held(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Claimant {
    pub(super) fn new() -> Self {
        let id = NEXT_HOST.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let inner = Arc::new(HostInner {
            id,
            held: Mutex::default(),
        });
        hosts().insert(id, Arc::downgrade(&inner));
        Self { inner }
    }

    fn hold(&self, id: &str) -> Held {
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
pub(super) struct Held {
    host: Arc<HostInner>,
    id: String,
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
pub(super) enum Table {
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
    pub(super) fn of(conversation: &Arc<dyn Conversation>, store_dir: Option<&Path>) -> Self {
        match (conversation.path(), store_dir) {
            (Some(_), Some(dir)) => Table::Dir(dir.join(CLAIMS_DIR)),
            _ => Table::Memory(
                Arc::as_ptr(conversation).cast::<()>().addr(),
                Arc::downgrade(conversation),
            ),
        }
    }

    /// Takes the table's lock (`flock` on the directory, in the blocking pool so that other
    /// executors of this process keep running).
    async fn lock(&self) -> std::io::Result<Locked> {
        match self {
            Table::Dir(dir) => {
                let dir = dir.clone();
                let file = tokio::task::spawn_blocking({
                    let dir = dir.clone();
                    move || lock_dir(&dir)
                })
                .await
                .map_err(std::io::Error::other)??;
                Ok(Locked::Dir { _file: file, dir })
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

    /// The claims on record, read without the lock (a quick look before taking it).
    async fn peek(&self) -> Vec<ClaimRecord> {
        match self {
            Table::Dir(dir) => {
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || read_dir(&dir))
                    .await
                    .unwrap_or_default()
            }
            Table::Memory(key, conversation) => MEMORY
                .lock()
                .await
                .get(key)
                .filter(|(weak, _)| Weak::ptr_eq(weak, conversation))
                .map(|(_, claims)| claims.values().cloned().collect())
                .unwrap_or_default(),
        }
    }
}

fn lock_dir(dir: &Path) -> std::io::Result<std::fs::File> {
    std::fs::create_dir_all(dir)?;
    let file = std::fs::File::open(dir)?;
    #[cfg(unix)]
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(file)
}

fn read_dir(dir: &Path) -> Vec<ClaimRecord> {
    crate::jobs::journal::read_json_dir(dir, "call claim")
}

/// A table under its lock.
enum Locked {
    Dir {
        _file: std::fs::File,
        dir: PathBuf,
    },
    Memory {
        table: tokio::sync::MutexGuard<'static, MemoryClaims>,
        key: usize,
    },
}

impl Locked {
    /// `<id>.json`, escaped, and shortened like store file names when the id is too long for
    /// the file system (`flemma_store::shorten`: a readable prefix and a hash of the whole id).
    fn file_name(id: &str) -> String {
        let name = format!("{}.json", crate::jobs::journal::escape(id));
        flemma_store::shorten(&name, flemma_store::MAX_FILE_NAME).into_owned()
    }

    fn file(dir: &Path, id: &str) -> PathBuf {
        dir.join(Self::file_name(id))
    }

    fn all(&self) -> Vec<ClaimRecord> {
        match self {
            Locked::Dir { dir, .. } => read_dir(dir),
            Locked::Memory { table, key } => table
                .get(key)
                .map(|(_, claims)| claims.values().cloned().collect())
                .unwrap_or_default(),
        }
    }

    fn get(&self, id: &str) -> Option<ClaimRecord> {
        match self {
            Locked::Dir { dir, .. } => {
                let bytes = std::fs::read(Self::file(dir, id)).ok()?;
                serde_json::from_slice(&bytes).ok()
            }
            Locked::Memory { table, key } => table.get(key)?.1.get(id).cloned(),
        }
    }

    /// Records a claim (atomically: a temporary file renamed over it).
    fn put(&mut self, record: ClaimRecord) -> std::io::Result<()> {
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

    fn remove(&mut self, id: &str) -> std::io::Result<()> {
        match self {
            Locked::Dir { dir, .. } => match std::fs::remove_file(Self::file(dir, id)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
            Locked::Memory { table, key } => {
                if let Some((_, claims)) = table.get_mut(key) {
                    claims.remove(id);
                }
                Ok(())
            }
        }
    }
}

/// Whether a result block is the empty, status-less block of a call in progress.
fn in_progress(doc: &Document, id: &str) -> bool {
    flemma_ast::find_tool_result_by_id(doc, id)
        .is_some_and(|r| r.node.status.is_none() && r.node.content.trim().is_empty())
}

/// Whether the call `id` is still to run: its block is empty and `(approved)`, or
/// `(pending)` (the host's approver just approved it).
fn still_approved(doc: &Document, index: &flemma_ast::ToolIndex, id: &str) -> bool {
    index.tool_result(doc, id).is_some_and(|r| {
        matches!(
            r.node.status,
            Some(ToolStatus::Approved | ToolStatus::Pending)
        ) && r.node.content.trim().is_empty()
    })
}

// ---------------------------------------------------------------------------------------
// The executor's side.

impl Executor {
    /// Claims the calls about to start; returns those claimed, each with its hold. A call
    /// another live host holds, or whose block is no longer `(approved)`, is left out.
    pub(super) async fn claim_calls(
        &self,
        calls: Vec<Call>,
        settings: &Settings,
    ) -> Result<Vec<(Call, Option<Held>)>, ExecutorError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let mut locked = match settings.claims.lock().await {
            Ok(locked) => locked,
            Err(error) => {
                // Without a usable claims directory the calls run as before claims existed.
                self.emit(Event::Warning(format!(
                    "calls not claimed ({error}); another host may run them too"
                )));
                return Ok(calls.into_iter().map(|c| (c, None)).collect());
            }
        };
        let approved: HashSet<String> = self
            .with_document(|doc, _| {
                let index = flemma_ast::ToolIndex::new(doc);
                calls
                    .iter()
                    .filter(|c| still_approved(doc, &index, c.id.as_str()))
                    .map(|c| c.id.as_str().to_owned())
                    .collect()
            })
            .await?;
        let owner = ProcessRef::current();
        let mut claimed = Vec::with_capacity(calls.len());
        for call in calls {
            let id = call.id.as_str();
            if !approved.contains(id) {
                tracing::debug!(id, "call no longer approved: another host took it");
                continue;
            }
            if let Some(existing) = locked.get(id)
                && existing.is_live()
            {
                tracing::debug!(id, pid = ?existing.owner.map(|o| o.pid), "call claimed by another host");
                continue;
            }
            let record = ClaimRecord {
                tool_id: id.to_owned(),
                tool: call.tool.as_str().to_owned(),
                owner,
                host: self.claimant.inner.id,
                claimed_at: crate::jobs::now_seconds(),
            };
            if let Err(error) = locked.put(record) {
                self.emit(Event::Warning(format!(
                    "call {id} not claimed ({error}); another host may run it too"
                )));
                claimed.push((call, None));
                continue;
            }
            let held = self.claimant.hold(id);
            claimed.push((call, Some(held)));
        }
        Ok(claimed)
    }

    /// Lets go of a call whose final result is written (or that went to the background).
    pub(super) async fn release_claim(&self, held: Option<Held>, settings: &Settings) {
        let Some(held) = held else {
            return;
        };
        match settings.claims.lock().await {
            Ok(mut locked) => {
                let mine = locked
                    .get(&held.id)
                    .is_some_and(|r| r.host == self.claimant.inner.id);
                if mine && let Err(error) = locked.remove(&held.id) {
                    tracing::warn!(id = %held.id, %error, "call claim not removed");
                }
            }
            Err(error) => tracing::warn!(id = %held.id, %error, "call claim not removed"),
        }
        // The record goes first: a claim on record with no hold reads as a gone owner's.
        drop(held);
    }

    /// Whether a claim is not one of the calls this executor runs now.
    fn is_foreign(&self, record: &ClaimRecord) -> bool {
        let mine = self.claimant.inner.id;
        !(record.host == mine && host_holds(mine, &record.tool_id))
    }

    /// Whether another live host (process, or executor of this one) runs a call of this
    /// conversation now.
    pub(super) async fn claimed_elsewhere(&self, settings: &Settings) -> bool {
        let peeked = settings.claims.peek().await;
        peeked.iter().any(|r| self.is_foreign(r) && r.is_live())
    }

    /// Answers the calls whose host is gone with [`msg::CALL_LOST`] and drops gone hosts'
    /// other claims.
    pub(super) async fn settle_claims(
        &self,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let peeked = settings.claims.peek().await;
        if !peeked.iter().any(|r| self.is_foreign(r) && !r.is_live()) {
            return Ok(Vec::new());
        }
        let Ok(mut locked) = settings.claims.lock().await else {
            return Ok(Vec::new());
        };
        let gone: Vec<ClaimRecord> = locked
            .all()
            .into_iter()
            .filter(|r| self.is_foreign(r) && !r.is_live())
            .collect();
        let lost: Vec<ClaimRecord> = self
            .with_document(|doc, _| {
                gone.iter()
                    .filter(|r| in_progress(doc, &r.tool_id))
                    .cloned()
                    .collect()
            })
            .await?;
        let body = ResultBody::Error {
            message: Some(msg::CALL_LOST.to_owned()),
            partial_output: None,
        };
        if !lost.is_empty() {
            let writer = settings.writer;
            self.edit(|doc| {
                let mut edits = Vec::new();
                for record in &lost {
                    // Checked again on the text the edit applies to.
                    if !in_progress(doc, &record.tool_id) {
                        continue;
                    }
                    match writer::write_result(doc, &record.tool_id, &body, writer) {
                        Ok(edit) => edits.push(edit),
                        Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                        Err(error) => return Err(ExecutorError::Edit(error)),
                    }
                }
                Ok(edits)
            })
            .await?;
        }
        for record in &gone {
            if let Err(error) = locked.remove(&record.tool_id) {
                tracing::warn!(id = %record.tool_id, %error, "call claim not removed");
            }
        }
        drop(locked);
        let mut completed = Vec::with_capacity(lost.len());
        for record in lost {
            let id = ToolUseId::sanitized(&record.tool_id);
            let tool = ToolName::read(record.tool.as_str())
                .unwrap_or_else(|_| ToolName::sanitized(&record.tool));
            self.emit(Event::Warning(format!(
                "{tool} ({id}): its host (pid {}) ended before it completed; answered with an error",
                record.owner.map_or_else(|| "?".to_owned(), |o| o.pid.to_string())
            )));
            self.emit(Event::ToolCompleted {
                id: id.clone(),
                tool: tool.clone(),
                success: false,
            });
            completed.push(Completed {
                id,
                tool,
                success: false,
            });
        }
        Ok(completed)
    }

    /// The calls of this conversation that hosts have claimed (read only): those running in
    /// a live host, and those whose host died before it finished them (the next cycle answers
    /// these with an error).
    ///
    /// # Errors
    ///
    /// As [`Executor::cycle`], when the options do not evaluate.
    pub async fn claims(&self) -> Result<Vec<CallClaim>, ExecutorError> {
        let settings = self.settings().await?;
        let mut claims: Vec<CallClaim> = settings
            .claims
            .peek()
            .await
            .into_iter()
            .map(|r| CallClaim {
                live: r.is_live(),
                id: ToolUseId::sanitized(&r.tool_id),
                tool: ToolName::read(r.tool.as_str())
                    .unwrap_or_else(|_| ToolName::sanitized(&r.tool)),
                pid: r.owner.map(|o| o.pid),
            })
            .collect();
        claims.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        Ok(claims)
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
