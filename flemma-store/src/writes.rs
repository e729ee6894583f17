//! [`StoreWrites`]: where a store's bytes go. [`FileWrites`], atomic writes of files
//! ([`write_atomic`]), is today's implementation; a store kept elsewhere (object storage) is
//! one more.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::write::{BackupStrategy, write_atomic};

/// The writes of a [`Store`](crate::Store): every whole result it stores (truncation
/// overflow, materialisation, `flemma.save_to`) goes through [`StoreWrites::write`].
///
/// A write blocks until its content is durable; the store's `_async` methods (feature
/// `tokio`) run it on Tokio's blocking pool, so an implementation may block (on a disk's
/// `fsync`, on a network request) but must not need the async runtime. Streaming writes
/// ([`Store::result_writer`](crate::Store::result_writer)) are files, whatever the
/// implementation; it is told of each once it is installed ([`StoreWrites::installed`]).
///
/// ```
/// use std::path::{Path, PathBuf};
/// use std::sync::{Arc, Mutex};
/// use flemma_store::{BackupStrategy, Store, StoreError, StoreWrites};
/// use flemma_ids::{ToolName, ToolUseId};
///
/// /// Keeps the writes in memory.
/// #[derive(Debug, Default)]
/// struct Memory(Mutex<Vec<(PathBuf, Vec<u8>)>>);
///
/// impl StoreWrites for Memory {
///     fn write(&self, path: &Path, content: &[u8], _backup: &dyn BackupStrategy)
///         -> Result<PathBuf, StoreError> {
///         self.0.lock().unwrap().push((path.to_owned(), content.to_owned()));
///         Ok(path.to_owned())
///     }
/// }
///
/// let memory = Arc::new(Memory::default());
/// let options = flemma_config::Config::new().options()?.tools.store;
/// let store = Store::new(&options, Some("/chats/notes.chat".as_ref()), "1")?
///     .with_writes(Arc::clone(&memory) as Arc<dyn StoreWrites>);
/// let path = store.write_result(&ToolUseId::new("toolu_01")?, Some(&ToolName::new("bash")?), "out")?;
/// assert_eq!(path, Path::new("/chats/.flemma/notes.chat/tool_bash_toolu_01.txt"));
/// assert_eq!(memory.0.lock().unwrap()[0].1, b"out");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait StoreWrites: Send + Sync + fmt::Debug {
    /// Writes `content` to `path` atomically (a reader sees the old content or the new, never
    /// a torn one), after running `backup` on the old content; returns where it went.
    ///
    /// # Errors
    ///
    /// When it could not be written; the old content is intact then.
    fn write(
        &self,
        path: &Path,
        content: &[u8],
        backup: &dyn BackupStrategy,
    ) -> Result<PathBuf, StoreError>;

    /// A streaming write ([`Store::result_writer`](crate::Store::result_writer)) installed
    /// `path`, a file: an implementation that keeps the store elsewhere copies it from there
    /// (or notes it, to copy it later). Nothing by default.
    fn installed(&self, path: &Path) {
        let _ = path;
    }
}

/// Files, written with [`write_atomic`]: the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileWrites;

impl StoreWrites for FileWrites {
    fn write(
        &self,
        path: &Path,
        content: &[u8],
        backup: &dyn BackupStrategy,
    ) -> Result<PathBuf, StoreError> {
        write_atomic(path, content, backup)
    }
}
