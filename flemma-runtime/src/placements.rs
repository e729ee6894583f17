//! Which `(approved)` blocks are approvals: the calls this host placed, and those a person
//! approved through it.
//!
//! The Flemma plugin runs every `(approved)` block in Phase 2 of the tool cycle. A transcript can
//! come from anywhere (a colleague, a repository, a model that forged one), so here an `(approved)`
//! written in the file approves nothing by itself. The executor runs an `(approved)` call when
//!
//! - its own approval chain approved it (in this executor: Phase 1 placed it `(approved)`), or
//! - this host placed the call's `(pending)` placeholder, for the same tool and input, and a
//!   person turned it into `(approved)` in their editor (the Flemma plugin's workflow), or
//! - a person approved it through the host ([`Executor::approve`](crate::Executor::approve),
//!   `flemma approve`, an editor's code action).
//!
//! Every other `(approved)` call goes through the approval chain (hooks included) as if it had
//! no result yet: the chain approves it, denies it, or it becomes `(pending)` and waits for a
//! person. A host-level deny wins over a person's approval too: a call a person approved is
//! checked against the chain again before it runs, and a deny there denies it.
//!
//! The host remembers what it placed in a [`Placements`] ledger: by default
//! [`FilePlacements`] in the user's state directory, outside any project (so a repository or
//! an archive someone sent cannot carry forged entries), and [`MemoryPlacements`] for a
//! conversation without a file. An entry lives while its placeholder waits: the executor
//! removes it when the call runs, when the cycle settles the placeholder (rejected, denied, a
//! pasted result) and when the host's approver decides the call.
//! [`TranscriptApprovals::Trusted`] restores the Flemma plugin's behaviour.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub(crate) use flemma_core::placements::{
    PlacedBy, Placement, Placements, entry_name, input_digest, sha256_hex,
};
use flemma_ids::ToolUseId;
use serde_json::Value;

/// Whether an `(approved)` in a transcript is an approval by itself (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TranscriptApprovals {
    /// Only on calls this host placed or a person approved through it; every other
    /// `(approved)` call is decided by the approval chain. The default.
    #[default]
    Placed,
    /// Every `(approved)` block runs, as in the Flemma plugin: for a host whose transcripts only
    /// its own users ever write.
    Trusted,
}

/// A ledger of files: one JSON file per call in one directory.
#[derive(Debug, Clone)]
pub struct FilePlacements {
    dir: PathBuf,
}

impl FilePlacements {
    /// The ledger in `dir` (created when the first entry is written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The ledger of the conversation in the file `chat` (absolute):
    /// `$XDG_STATE_HOME/flemma/placed/<digest of the path>/`, or under `~/.local/state` when
    /// `XDG_STATE_HOME` is not set; `None` when neither it nor `HOME` is.
    pub fn for_conversation(chat: &Path) -> Option<Self> {
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let state = env("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| env("HOME").map(|home| Path::new(&home).join(".local/state")))?;
        let key = sha256_hex(chat.as_os_str().as_encoded_bytes());
        Some(Self::new(state.join("flemma/placed").join(&key[..32])))
    }

    /// The ledger's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry(&self, id: &ToolUseId) -> PathBuf {
        self.dir.join(entry_name(id))
    }
}

#[async_trait::async_trait]
impl Placements for FilePlacements {
    async fn record(&self, placement: &Placement) -> std::io::Result<()> {
        let text = serde_json::to_vec(placement).map_err(std::io::Error::other)?;
        flemma_store::write_atomic(&self.entry(&placement.id), &text, &flemma_store::NoBackup)
            .map(|_| ())
            .map_err(std::io::Error::other)
    }

    async fn get(&self, id: &ToolUseId) -> std::io::Result<Option<Placement>> {
        match std::fs::read(self.entry(id)) {
            Ok(bytes) => Ok(serde_json::from_slice::<Placement>(&bytes)
                .ok()
                .filter(|p| p.id == *id)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn remove(&self, id: &ToolUseId) -> std::io::Result<()> {
        match std::fs::remove_file(self.entry(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// A ledger in memory.
#[derive(Debug, Default)]
pub struct MemoryPlacements {
    entries: Mutex<HashMap<ToolUseId, Placement>>,
}

impl MemoryPlacements {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's ledger, which executors of conversations without a file share: a host
    /// that builds a new executor for each request still knows what the last one placed.
    pub fn shared() -> Arc<Self> {
        static SHARED: OnceLock<Arc<MemoryPlacements>> = OnceLock::new();
        Arc::clone(SHARED.get_or_init(|| Arc::new(Self::new())))
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<ToolUseId, Placement>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait::async_trait]
impl Placements for MemoryPlacements {
    async fn record(&self, placement: &Placement) -> std::io::Result<()> {
        self.entries()
            .insert(placement.id.clone(), placement.clone());
        Ok(())
    }

    async fn get(&self, id: &ToolUseId) -> std::io::Result<Option<Placement>> {
        Ok(self.entries().get(id).cloned())
    }

    async fn remove(&self, id: &ToolUseId) -> std::io::Result<()> {
        self.entries().remove(id);
        Ok(())
    }
}

/// The ledger of a conversation: its own, else [`for_file`].
pub(crate) fn of_conversation(
    conversation: &dyn crate::Conversation,
    chat: Option<&Path>,
) -> Arc<dyn Placements> {
    conversation.placements().unwrap_or_else(|| for_file(chat))
}

/// The default ledger of a conversation in the file `chat` (absolute, resolved): its
/// [`FilePlacements::for_conversation`]; the process's [`MemoryPlacements::shared`] without a
/// file (or without a state directory). An editor's server records a person's approval here,
/// as [`Executor::approve`](crate::Executor::approve) does.
pub fn for_file(chat: Option<&Path>) -> Arc<dyn Placements> {
    match chat.and_then(FilePlacements::for_conversation) {
        Some(files) => Arc::new(files),
        None => MemoryPlacements::shared(),
    }
}

/// A person's approval of the call `id` of `doc`, to record before the approval is written
/// into the transcript; `None` when `doc` has no such call.
pub fn person_approval(doc: &flemma_ast::Document, id: &str) -> Option<Placement> {
    let tool_use = flemma_ast::find_tool_use_by_id(doc, id)?.node;
    Some(Placement::new(
        tool_use.id.clone(),
        tool_use.name.clone(),
        &Value::Object(tool_use.input().clone()),
        PlacedBy::Person,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flemma_ids::ToolName;
    use serde_json::json;

    fn placement(id: &str, input: &Value) -> Placement {
        Placement::new(
            ToolUseId::sanitized(id),
            ToolName::sanitized("bash"),
            input,
            PlacedBy::Host,
        )
    }

    #[tokio::test]
    async fn a_file_ledger_keeps_placements_by_call_and_input() {
        let scratch = tempfile::Builder::new()
            .prefix("flemma-placed-")
            .tempdir()
            .unwrap();
        let dir = scratch.path().join("placed");
        let ledger = FilePlacements::new(&dir);
        let input = json!({"command": "ls"});
        let p = placement("toolu/../1", &input);
        assert_eq!(ledger.get(&p.id).await.unwrap(), None);
        ledger.record(&p).await.unwrap();
        let got = ledger.get(&p.id).await.unwrap().unwrap();
        assert!(got.is_for(&p.tool, &input));
        assert!(!got.is_for(&p.tool, &json!({"command": "rm -rf ~"})));
        assert!(!got.is_for(&ToolName::sanitized("write"), &input));
        // One file in the ledger's own directory, whatever the id holds.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        ledger.remove(&p.id).await.unwrap();
        ledger.remove(&p.id).await.unwrap();
        assert_eq!(ledger.get(&p.id).await.unwrap(), None);
    }

    #[test]
    fn a_conversations_ledger_is_in_the_state_directory_by_its_path() {
        let a = FilePlacements::for_conversation(Path::new("/p/a.chat"));
        let b = FilePlacements::for_conversation(Path::new("/p/b.chat"));
        if let (Some(a), Some(b)) = (a, b) {
            assert_ne!(a.dir(), b.dir());
            assert!(a.dir().to_string_lossy().contains("flemma/placed/"));
        }
    }
}
