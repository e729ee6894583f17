//! The placements contract: a [`Placement`] is a call a host placed for a person's decision,
//! tied to its tool and input; [`Placements`] is the ledger a host remembers them in. Which
//! `(approved)` blocks are approvals, and the ledgers of files and of memory, are
//! flemma-runtime's `placements` module.

use std::fmt;

use flemma_ids::{ToolName, ToolUseId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Who placed a call's status, as a [`Placement`] records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PlacedBy {
    /// This host's chain placed the call `(pending)`: a person may approve it by editing.
    Host,
    /// A person approved the call through the host.
    Person,
}

/// A call this host placed for a person's decision, tied to its tool and input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Placement {
    /// The call.
    pub id: ToolUseId,
    /// Its tool.
    pub tool: ToolName,
    /// The SHA-256 of its input's JSON text, in hex ([`input_digest`]).
    pub input: String,
    /// Who placed it.
    pub by: PlacedBy,
}

impl Placement {
    /// The placement of the call `id` of `tool` with `input`.
    pub fn new(id: ToolUseId, tool: ToolName, input: &Value, by: PlacedBy) -> Self {
        Self {
            id,
            tool,
            input: input_digest(input),
            by,
        }
    }

    /// Whether this placement is of a call of `tool` with `input` (an edited input is
    /// another call).
    pub fn is_for(&self, tool: &ToolName, input: &Value) -> bool {
        self.tool == *tool && self.input == input_digest(input)
    }
}

/// The SHA-256 of a call input's JSON text, in hex.
///
/// ```
/// let digest = flemma_core::placements::input_digest(&serde_json::json!({"command": "ls"}));
/// assert_eq!(digest.len(), 64);
/// ```
pub fn input_digest(input: &Value) -> String {
    sha256_hex(input.to_string().as_bytes())
}

/// The SHA-256 of `bytes`, in hex: what the ledgers name their entries and directories by.
///
/// ```
/// let digest = flemma_core::placements::sha256_hex(b"abc");
/// assert_eq!(digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let bytes = Sha256::digest(bytes);
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Where a host remembers the calls it placed for a person (see flemma-runtime's `placements` module).
///
/// flemma-runtime's `placements` module has the ledgers of files and of memory, and says when
/// an `(approved)` block is an approval. A conversation kept elsewhere gives its own
/// ([`Conversation::placements`](crate::Conversation::placements)), so that every host that
/// runs it in turn shares one ledger.
#[async_trait::async_trait]
pub trait Placements: Send + Sync + fmt::Debug {
    /// Records `placement`, replacing one of the same call.
    ///
    /// # Errors
    ///
    /// When it cannot be written.
    async fn record(&self, placement: &Placement) -> std::io::Result<()>;

    /// The placement of the call `id`; `None` when there is none (or it does not decode).
    ///
    /// # Errors
    ///
    /// When the ledger cannot be read.
    async fn get(&self, id: &ToolUseId) -> std::io::Result<Option<Placement>>;

    /// Forgets the call `id` (nothing when there is no entry).
    ///
    /// # Errors
    ///
    /// When the entry cannot be removed.
    async fn remove(&self, id: &ToolUseId) -> std::io::Result<()>;
}

/// The name of the entry of the call `id` in a ledger of files or objects: 32 hex digits of
/// the SHA-256 of the id, then `.json` (an id may hold any character but a line break).
pub fn entry_name(id: &ToolUseId) -> String {
    let name = sha256_hex(id.as_str().as_bytes());
    format!("{}.json", &name[..32])
}
