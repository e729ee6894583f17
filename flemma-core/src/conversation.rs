//! [`Conversation`]: the transcript the executor reads and edits, wherever it lives.
//!
//! The executor never holds the text between steps: it takes a [`Snapshot`], computes
//! [`TextEdit`]s against it, and applies them with the snapshot's [`Revision`]. When the text
//! changed in between (a user typing, another process writing the file), `apply` refuses with
//! [`ConversationError::Stale`] and the executor recomputes its edits on the new text, so an
//! edit made by someone else is never overwritten.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_ast::TextEdit;

use crate::Revision;

/// The text of a conversation at one revision.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The text.
    pub text: Arc<String>,
    /// Its revision.
    pub revision: Revision,
}

/// How much a change must survive a crash of the machine: what each
/// [`apply`](Conversation::apply) of a [`Conversation`] is asked for.
///
/// The contract of flemma-runtime's `FileConversation`: a `Durable` change is on stable storage
/// when `apply` returns, and a crash (or a kill) during it leaves the old text or the new one,
/// never a mix. A `Buffered` change that only appends text is written in place without a
/// sync: the text before it is never touched, and a crash may keep any prefix of what it
/// appended (none, some or all of it) until the next durable change or
/// [`sync`](Conversation::sync) makes it durable. A `Buffered` change that does more than
/// append is made `Durable`.
///
/// One exception keeps that cheap: a `Durable` change that only touches text appended
/// `Buffered` since the last durable point (the `(approved)` suffix of a placeholder placed
/// that way) is written in place and synced once, without a rewrite. A crash or a kill during
/// it keeps the durable text whole, followed by a prefix of the buffered text as it was or as
/// the change makes it: what a crash could already do to that buffered text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// On stable storage when `apply` returns (the default).
    #[default]
    Durable,
    /// Written, made durable later: text that is written again after a crash anyway (a
    /// streamed response's lines while it streams: after a crash the request is sent again;
    /// the placeholders of Phase 1: the next cycle places them again).
    Buffered,
}

/// Why a conversation could not be read or edited.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConversationError {
    /// The text changed since the revision the edits were computed against.
    #[error("the conversation changed (expected {expected}, now {actual})")]
    Stale {
        /// The revision the edits were computed against.
        expected: Revision,
        /// The current revision.
        actual: Revision,
    },
    /// The edits do not fit the text.
    #[error("the edits do not apply")]
    Edit(#[source] flemma_ast::AstError),
    /// The conversation file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The conversation file is not UTF-8.
    #[error("{} is not UTF-8", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// The conversation file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: flemma_store::StoreError,
    },
    /// Blocking file work could not run.
    #[error("a file task failed")]
    Task(#[source] tokio::task::JoinError),
    /// A conversation kept elsewhere (an object in a bucket, a database row) could not be read
    /// or written.
    #[error("{location}: {message}")]
    Remote {
        /// Where the conversation is (an object's URL).
        location: String,
        /// What failed.
        message: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// A transcript the executor reads and edits: a file, an editor buffer, a row in a database.
///
/// Implementations make `apply` atomic with respect to their own writers: it applies every
/// edit of the batch or none, and only when the text is still at `revision`.
#[async_trait::async_trait]
pub trait Conversation: Send + Sync {
    /// The current text.
    async fn snapshot(&self) -> Result<Snapshot, ConversationError>;

    /// Applies `edits` (computed against `revision`) as one change, stored as `durability`
    /// asks: a [`Durability::Durable`] change is on stable storage when this returns; a
    /// [`Durability::Buffered`] one may be made durable later, by the next durable change or
    /// [`sync`](Self::sync). A conversation that cannot tell the two apart stores every change
    /// durably.
    ///
    /// # Errors
    ///
    /// [`ConversationError::Stale`] when the text is no longer at `revision`; the others
    /// when the edits do not fit or the text cannot be stored.
    async fn apply(
        &self,
        revision: Revision,
        edits: &[TextEdit],
        durability: Durability,
    ) -> Result<Snapshot, ConversationError>;

    /// The conversation's file (`__filename`, the store's location), if it has one: an
    /// absolute path (the shipped conversations resolve theirs when opened, with
    /// [`flemma_config::conversation_path`]). The executor and the session resolve a relative
    /// one against the process's working directory at each cycle.
    fn path(&self) -> Option<&Path> {
        None
    }

    /// Where the conversation's result store writes (see [`flemma_store::StoreWrites`]):
    /// `None`, the default, for files beside the conversation's [`path`](Self::path); a
    /// conversation kept elsewhere (an object in a bucket) gives one that copies the results
    /// there too, so that they travel with it.
    fn store_writes(&self) -> Option<Arc<dyn flemma_store::StoreWrites>> {
        None
    }

    /// The journal of the conversation's background jobs, kept for its store directory
    /// `store_dir`. `None`, the default, for files under `store_dir/jobs/` (flemma-runtime's
    /// `FileJournal`); a conversation that several machines run
    /// in turn (an object in a bucket) gives one they share, whose entries name the machine
    /// that runs each job.
    fn job_journal(&self, store_dir: &Path) -> Option<Arc<dyn crate::jobs::JobJournal>> {
        let _ = store_dir;
        None
    }

    /// Where the hosts of this conversation remember the calls they placed for a person's
    /// decision ([`crate::placements`]). `None`, the default, for flemma-runtime's
    /// `FilePlacements` in the user's state directory
    /// (keyed by [`path`](Self::path)), or the process's memory without a path; a conversation
    /// that several machines run in turn gives one they share.
    fn placements(&self) -> Option<Arc<dyn crate::placements::Placements>> {
        None
    }

    /// The conversation's own store id (`bufnr`), used when the host names none; `None` by
    /// default (see flemma-runtime's `transcript::default_conversation_id`).
    fn default_id(&self) -> Option<&str> {
        None
    }

    /// Makes every change applied so far durable (see [`Durability`]): the executor calls it
    /// before a call starts (when no durable change did it already) and at the end of every
    /// cycle, the session when a response goes to the user with no cycle after it. A
    /// conversation whose every change is durable when `apply` returns has nothing to do
    /// (the default).
    ///
    /// # Errors
    ///
    /// When the text cannot be stored.
    async fn sync(&self) -> Result<(), ConversationError> {
        Ok(())
    }

    /// Called before tools start running on the conversation and after the last one ends, so
    /// an editor can keep the user from typing into blocks being rewritten. No-op by default.
    async fn set_locked(&self, locked: bool) {
        let _ = locked;
    }
}

// An `Arc<T>` or a `Box<T>` of a conversation (`T` may be unsized, `dyn Conversation`
// included) is one too, so a host can keep a handle on what it passes.
macro_rules! shared {
    ($($ptr:ident)::+) => {
        #[async_trait::async_trait]
        impl<T: Conversation + ?Sized> Conversation for $($ptr)::+<T> {
            async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
                (**self).snapshot().await
            }

            async fn apply(
                &self,
                revision: Revision,
                edits: &[TextEdit],
                durability: Durability,
            ) -> Result<Snapshot, ConversationError> {
                (**self).apply(revision, edits, durability).await
            }

            async fn sync(&self) -> Result<(), ConversationError> {
                (**self).sync().await
            }

            fn path(&self) -> Option<&Path> {
                (**self).path()
            }

            fn default_id(&self) -> Option<&str> {
                (**self).default_id()
            }

            fn store_writes(&self) -> Option<Arc<dyn flemma_store::StoreWrites>> {
                (**self).store_writes()
            }

            fn job_journal(
                &self,
                store_dir: &Path,
            ) -> Option<Arc<dyn crate::jobs::JobJournal>> {
                (**self).job_journal(store_dir)
            }

            fn placements(&self) -> Option<Arc<dyn crate::placements::Placements>> {
                (**self).placements()
            }

            async fn set_locked(&self, locked: bool) {
                (**self).set_locked(locked).await;
            }
        }

    };
}

shared!(Arc);
shared!(Box);
