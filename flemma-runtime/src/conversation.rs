//! The shipped [`Conversation`](flemma_core::Conversation)s: [`MemoryConversation`] and
//! [`FileConversation`] (the contract, [`Snapshot`](flemma_core::Snapshot),
//! [`Durability`](flemma_core::Durability) and
//! [`ConversationError`](flemma_core::ConversationError) are flemma-core's).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use flemma_ast::TextEdit;
use flemma_core::Revision;
pub(crate) use flemma_core::{Conversation, ConversationError, Durability, Snapshot};

/// A conversation held in memory.
///
/// ```
/// use flemma_core::{Conversation, Durability};
/// use flemma_runtime::MemoryConversation;
/// use flemma_ast::TextEdit;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let chat = MemoryConversation::new("@You:\nhello\n");
/// let snap = chat.snapshot().await?;
/// let world = [TextEdit::insert(3, vec!["world".into()])];
/// chat.apply(snap.revision, &world, Durability::Durable).await?;
/// assert_eq!(chat.text(), "@You:\nhello\nworld\n");
/// // Edits against an old revision are refused.
/// assert!(chat.apply(snap.revision, &[], Durability::Durable).await.is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct MemoryConversation {
    state: Mutex<Memory>,
    path: Option<PathBuf>,
    /// Its id when it has no path, unique.
    id: String,
}

/// A conversation id no other conversation was given, in this process or another: a UUID
/// (version 8) from the SHA-256 of the process id, the time and a counter.
pub(crate) fn unique_id() -> String {
    use sha2::Digest as _;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let count = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut hasher = sha2::Sha256::new();
    hasher.update(std::process::id().to_le_bytes());
    hasher.update(now.to_le_bytes());
    hasher.update(count.to_le_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid_v8(bytes)
}

/// `bytes` as a UUID of version 8 (RFC 9562 §5.8), with its version and variant bits set.
pub(crate) fn uuid_v8(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let mut id = String::with_capacity(36);
    for (at, byte) in bytes.iter().enumerate() {
        if matches!(at, 4 | 6 | 8 | 10) {
            id.push('-');
        }
        for nibble in [byte >> 4, byte & 0x0f] {
            id.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    id
}

/// The text, its revision, and where its lines start (so edits near the end of a large
/// transcript do not scan it from the beginning).
#[derive(Debug)]
struct Memory {
    snapshot: Snapshot,
    lines: flemma_ast::LineIndex,
}

impl MemoryConversation {
    /// A conversation holding `text` at revision 0.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            state: Mutex::new(Memory {
                lines: flemma_ast::LineIndex::new(&text),
                snapshot: Snapshot {
                    text: Arc::new(text),
                    revision: Revision(0),
                },
            }),
            path: None,
            id: unique_id(),
        }
    }

    /// Gives the conversation a file name (for `__filename` and the store) without reading
    /// or writing it. The path is made absolute and resolved now
    /// ([`flemma_config::conversation_path`]; the file need not exist).
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(flemma_config::conversation_path(&path.into()));
        self
    }

    /// The current text.
    pub fn text(&self) -> String {
        self.lock().snapshot.text.as_str().to_owned()
    }

    /// Replaces the text (a user's edit); the revision moves on.
    pub fn set_text(&self, text: impl Into<String>) {
        let text = text.into();
        let mut state = self.lock();
        state.lines = flemma_ast::LineIndex::new(&text);
        state.snapshot.text = Arc::new(text);
        state.snapshot.revision = Revision(state.snapshot.revision.0 + 1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait::async_trait]
impl Conversation for MemoryConversation {
    async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
        Ok(self.lock().snapshot.clone())
    }

    async fn apply(
        &self,
        revision: Revision,
        edits: &[TextEdit],
        // Held in memory: no storage to ask anything of.
        _durability: Durability,
    ) -> Result<Snapshot, ConversationError> {
        let mut guard = self.lock();
        let Memory { snapshot, lines } = &mut *guard;
        if snapshot.revision != revision {
            return Err(ConversationError::Stale {
                expected: revision,
                actual: snapshot.revision,
            });
        }
        if !edits.is_empty() {
            if let Some(text) = Arc::get_mut(&mut snapshot.text) {
                // Nobody else holds this text: edit it where it is.
                lines
                    .apply_edits(text, edits)
                    .map_err(ConversationError::Edit)?;
            } else {
                let mut text = snapshot.text.as_str().to_owned();
                lines
                    .apply_edits(&mut text, edits)
                    .map_err(ConversationError::Edit)?;
                snapshot.text = Arc::new(text);
            }
            snapshot.revision = Revision(snapshot.revision.0 + 1);
        }
        Ok(snapshot.clone())
    }

    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// A memory conversation with a path is the file's conversation (its id is the file's,
    /// [`file_conversation_id`](crate::transcript::file_conversation_id)); one without has
    /// an id of its own, so that two of them never share a store, a job journal or a hook's
    /// `session_id`.
    fn default_id(&self) -> Option<&str> {
        self.path.is_none().then_some(self.id.as_str())
    }
}

/// A conversation in a `.chat` file.
///
/// Changes are written back atomically and durably (temporary file, fsync, rename, fsync of
/// the directory), except appends asked for as [`Durability::Buffered`], which are written in
/// place without a sync until [`sync`](Conversation::sync) or the next durable change, and
/// durable changes to text appended that way only, written in place with one `fdatasync`
/// (see [`Durability`] for what a crash leaves in each case).
///
/// The text is read once per change of the file: a snapshot is taken from memory while the
/// file's metadata (size, modification and change times, inode) still match the last read or
/// append; a change the metadata cannot show (same size, within one tick of the file
/// system's clock after this conversation's own write) is seen at the latest by the next
/// `apply`, which compares the file's content under the lock and refuses as
/// [`ConversationError::Stale`] — an edit made by someone else is never overwritten. That
/// comparison happens under the lock every [`write_atomic`](flemma_store::write_atomic) of the
/// directory takes, right before the rename (or the append), so two hosts of this library
/// never write over each other's change; other writers (editors do not honour advisory locks)
/// can, in a window the length of one rename.
#[derive(Debug)]
pub struct FileConversation {
    path: PathBuf,
    state: tokio::sync::Mutex<FileState>,
    /// The file work runs on the caller's thread instead of Tokio's blocking pool.
    inline_io: bool,
}

/// What a [`FileConversation`] knows of its file.
#[derive(Debug, Default)]
struct FileState {
    /// The text last read or written.
    snapshot: Option<Snapshot>,
    /// The file's metadata when it held `snapshot`'s text; `None`: read it again to know.
    stamp: Option<Stamp>,
    /// Text was appended without a sync since the last durable write.
    unsynced: bool,
    /// How many bytes at the start of `snapshot`'s text this conversation made durable (a
    /// rewrite, a sync); `None` when it does not know (the file was read since).
    durable: Option<usize>,
}

/// The metadata that changes when a file's content does (a rename over it included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    #[cfg(unix)]
    unix: (u64, u64, i64, i64),
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt as _;
        Self {
            len: metadata.len(),
            modified: metadata.modified().ok(),
            #[cfg(unix)]
            unix: (
                metadata.dev(),
                metadata.ino(),
                metadata.ctime(),
                metadata.ctime_nsec(),
            ),
        }
    }
}

impl FileConversation {
    /// A conversation in `path` (read on first use). The path is made absolute and resolved
    /// now ([`flemma_config::conversation_path`]), so the tools' working directory, the
    /// store and file references follow the conversation, whatever the process's working
    /// directory is later; errors name the resolved path.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: flemma_config::conversation_path(&path.into()),
            state: tokio::sync::Mutex::new(FileState::default()),
            inline_io: false,
        }
    }

    /// Runs the file work (reads, appends, rewrites, syncs) on the thread of the task that
    /// asks for it instead of Tokio's blocking pool, saving two thread hand-offs per step.
    ///
    /// For a host that runs one conversation on a current-thread runtime, as the `flemma`
    /// command does: about 0.35 ms less per tool turn there (the book's "Performance"). A
    /// host that runs many conversations on one runtime keeps the default: with this, a sync
    /// on a slow disk or the rewrite of a large transcript holds up every task of that
    /// thread meanwhile. A write never waits on this thread for another writer: when another
    /// process holds the directory's lock, the write waits for it on the blocking pool, as
    /// without this. What is written, and when it is durable, is the same either way.
    ///
    /// ```
    /// use flemma_runtime::FileConversation;
    ///
    /// let chat = FileConversation::new("notes.chat").with_inline_io();
    /// # let _ = chat;
    /// ```
    #[must_use]
    pub fn with_inline_io(mut self) -> Self {
        self.inline_io = true;
        self
    }

    /// Runs `work` where [`with_inline_io`](Self::with_inline_io) says (a read or a sync:
    /// work that waits for no other writer).
    async fn io<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ConversationError> {
        if self.inline_io {
            Ok(work())
        } else {
            pooled(work).await
        }
    }

    /// The file's text and its metadata before it was read.
    async fn read(&self) -> Result<(String, Stamp), ConversationError> {
        let path = self.path.clone();
        let (bytes, stamp) = self
            .io(move || {
                use std::io::Read as _;
                let mut file = std::fs::File::open(&path)?;
                let stamp = Stamp::of(&file.metadata()?);
                let mut bytes = Vec::with_capacity(usize::try_from(stamp.len).unwrap_or(0) + 1);
                file.read_to_end(&mut bytes)?;
                Ok::<_, std::io::Error>((bytes, stamp))
            })
            .await?
            .map_err(|source| ConversationError::Read {
                path: self.path.clone(),
                source,
            })?;
        let text = String::from_utf8(bytes).map_err(|source| ConversationError::NotUtf8 {
            path: self.path.clone(),
            source,
        })?;
        Ok((text, stamp))
    }

    /// The cached snapshot while the file's metadata match it; else the file read again, at a
    /// new revision when its text changed.
    async fn current(&self, state: &mut FileState) -> Result<Snapshot, ConversationError> {
        // One `stat` on this thread (a hand-off to the blocking pool would cost more than it).
        if let (Some(snapshot), Some(stamp)) = (&state.snapshot, state.stamp)
            && std::fs::metadata(&self.path).is_ok_and(|m| Stamp::of(&m) == stamp)
        {
            return Ok(snapshot.clone());
        }
        let (text, stamp) = self.read().await?;
        let snapshot = match state.snapshot.take() {
            Some(old) if old.text.as_str() == text => old,
            Some(old) => Snapshot {
                text: Arc::new(text),
                revision: Revision(old.revision.0 + 1),
            },
            None => Snapshot {
                text: Arc::new(text),
                revision: Revision(0),
            },
        };
        state.snapshot = Some(snapshot.clone());
        state.stamp = Some(stamp);
        // Read from the file: how much of it is on stable storage is not known.
        state.durable = None;
        Ok(snapshot)
    }

    /// Writes `text`, computed from `current`, as one change: appended in place when that is
    /// all it does and `buffered`; else written in place and synced when it leaves the first
    /// `durable` bytes alone (when they are all that is durable, a crash may lose the rest
    /// anyway); else rewritten durably.
    async fn write(
        &self,
        current: &Snapshot,
        text: &str,
        buffered: bool,
        durable: Option<usize>,
    ) -> Result<Written, ConversationError> {
        let old = &current.text;
        let path = &self.path;
        // Only with text unsynced since a durable point the change leaves alone.
        let kept = durable
            .filter(|&durable| durable < old.len())
            .and_then(|durable| kept_from(old.as_bytes(), text.as_bytes(), durable));
        if let Some(kept) = kept
            && !(buffered && kept == old.len())
        {
            let tail = &text.as_bytes()[kept..];
            let written = self
                .store_write(
                    || {
                        flemma_store::try_rewrite_tail_if_unchanged(
                            path,
                            old.as_bytes(),
                            kept,
                            tail,
                        )
                    },
                    |w| matches!(w, flemma_store::Appended::Busy),
                    || {
                        let (path, old, tail) = (path.clone(), Arc::clone(old), tail.to_vec());
                        move || {
                            flemma_store::rewrite_tail_if_unchanged(
                                &path,
                                old.as_bytes(),
                                kept,
                                &tail,
                            )
                        }
                    },
                )
                .await?;
            return Ok(Written::of_tail(written));
        }
        if buffered && text.len() > old.len() && text.starts_with(old.as_str()) {
            let tail = &text.as_bytes()[old.len()..];
            let appended = self
                .store_write(
                    || flemma_store::try_append_if_unchanged(path, old.as_bytes(), tail),
                    |w| matches!(w, flemma_store::Appended::Busy),
                    || {
                        let (path, old, tail) = (path.clone(), Arc::clone(old), tail.to_vec());
                        move || flemma_store::append_if_unchanged(&path, old.as_bytes(), &tail)
                    },
                )
                .await?;
            return Ok(Written::of_append(appended));
        }
        let written = self
            .store_write(
                || flemma_store::try_replace_if_unchanged(path, old.as_bytes(), text.as_bytes()),
                |w| matches!(w, flemma_store::Replaced::Busy),
                || {
                    let (path, old, bytes) =
                        (path.clone(), Arc::clone(old), text.as_bytes().to_vec());
                    move || flemma_store::replace_if_unchanged(&path, old.as_bytes(), &bytes)
                },
            )
            .await?;
        Ok(Written::of_replace(written))
    }

    /// Runs one write of the store: with [`with_inline_io`](Self::with_inline_io), first on
    /// this thread in the form that does not wait for another writer (`now`); on the
    /// blocking pool in the form that waits (the work `later` makes, with its own copies of
    /// what it writes) otherwise, or when `busy` says another writer held the directory's
    /// lock.
    async fn store_write<R, W>(
        &self,
        now: impl FnOnce() -> Result<R, flemma_store::StoreError>,
        busy: impl FnOnce(&R) -> bool,
        later: impl FnOnce() -> W,
    ) -> Result<R, ConversationError>
    where
        R: Send + 'static,
        W: FnOnce() -> Result<R, flemma_store::StoreError> + Send + 'static,
    {
        let write_error = |source| ConversationError::Write {
            path: self.path.clone(),
            source,
        };
        if self.inline_io {
            let written = now().map_err(write_error)?;
            if !busy(&written) {
                return Ok(written);
            }
        }
        pooled(later()).await?.map_err(write_error)
    }
}

/// The length of the common prefix of `old` and `new` when it covers their first `durable`
/// bytes, else `None`: one comparison of those bytes, then a search for the first difference
/// after them, a block at a time.
fn kept_from(old: &[u8], new: &[u8], durable: usize) -> Option<usize> {
    const BLOCK: usize = 64;
    if old.get(..durable)? != new.get(..durable)? {
        return None;
    }
    let (old, new) = (&old[durable..], &new[durable..]);
    let mut at = 0;
    let shorter = old.len().min(new.len());
    while at + BLOCK <= shorter && old[at..at + BLOCK] == new[at..at + BLOCK] {
        at += BLOCK;
    }
    let rest = old[at..].iter().zip(&new[at..]).take_while(|(a, b)| a == b);
    Some(durable + at + rest.count())
}

/// Runs `work` on Tokio's blocking pool.
async fn pooled<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ConversationError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(ConversationError::Task)
}

/// How [`FileConversation::write`] wrote a change.
enum Written {
    /// Appended in place, not synced; the file's metadata after it.
    Appended(Stamp),
    /// Rewritten atomically and durably; the installed file's metadata, when they could be
    /// read (else the next snapshot reads the file once for them).
    Rewritten(Option<Stamp>),
    /// Its unsynced tail rewritten in place and synced; the file's metadata after it.
    Synced(Stamp),
    /// Not written: the file no longer held the text the change was computed from.
    Changed,
}

impl Written {
    /// What an append did: the file's metadata after it, or [`Written::Changed`].
    fn of_append(appended: flemma_store::Appended) -> Self {
        match appended {
            flemma_store::Appended::Done(metadata) => Self::Appended(Stamp::of(&metadata)),
            // Another writer changed the file since it was read.
            _ => Self::Changed,
        }
    }

    /// What a rewrite of the unsynced tail did: the file's metadata after it, or
    /// [`Written::Changed`].
    fn of_tail(written: flemma_store::Appended) -> Self {
        match written {
            flemma_store::Appended::Done(metadata) => Self::Synced(Stamp::of(&metadata)),
            // Another writer changed the file since it was read.
            _ => Self::Changed,
        }
    }

    /// What a rewrite did: the installed file's metadata, or [`Written::Changed`].
    fn of_replace(replaced: flemma_store::Replaced) -> Self {
        match replaced {
            flemma_store::Replaced::Done(metadata) => {
                Self::Rewritten(metadata.as_ref().map(Stamp::of))
            }
            // Another writer changed the file since it was read.
            _ => Self::Changed,
        }
    }
}

#[async_trait::async_trait]
impl Conversation for FileConversation {
    async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
        let mut state = self.state.lock().await;
        self.current(&mut state).await
    }

    async fn apply(
        &self,
        revision: Revision,
        edits: &[TextEdit],
        durability: Durability,
    ) -> Result<Snapshot, ConversationError> {
        let mut state = self.state.lock().await;
        // The text the caller's revision names; the file is compared with it under the lock.
        let current = match &state.snapshot {
            Some(snapshot) => snapshot.clone(),
            None => self.current(&mut state).await?,
        };
        if current.revision != revision {
            return Err(ConversationError::Stale {
                expected: revision,
                actual: current.revision,
            });
        }
        if edits.is_empty() {
            return Ok(current);
        }
        let text =
            flemma_ast::apply_edits(&current.text, edits).map_err(ConversationError::Edit)?;
        let buffered = durability == Durability::Buffered;
        let durable = state.unsynced.then_some(state.durable).flatten();
        match self.write(&current, &text, buffered, durable).await? {
            Written::Appended(stamp) => {
                state.stamp = Some(stamp);
                state.unsynced = true;
            }
            Written::Rewritten(stamp) => {
                // Synced, text appended before included. The stamp is the installed file's
                // own: a writer that replaces it afterwards shows as a change.
                state.stamp = stamp;
                state.unsynced = false;
                state.durable = Some(text.len());
            }
            Written::Synced(stamp) => {
                state.stamp = Some(stamp);
                state.unsynced = false;
                state.durable = Some(text.len());
            }
            Written::Changed => {
                // Another writer changed the file since it was read: the next read sees the
                // new text and moves the revision on.
                state.stamp = None;
                state.durable = None;
                return Err(ConversationError::Stale {
                    expected: revision,
                    actual: Revision(revision.0 + 1),
                });
            }
        }
        let snapshot = Snapshot {
            text: Arc::new(text),
            revision: Revision(revision.0 + 1),
        };
        state.snapshot = Some(snapshot.clone());
        Ok(snapshot)
    }

    async fn sync(&self) -> Result<(), ConversationError> {
        let mut state = self.state.lock().await;
        if !state.unsynced {
            return Ok(());
        }
        let path = self.path.clone();
        self.io(move || flemma_store::sync_data(&path))
            .await?
            .map_err(|source| ConversationError::Write {
                path: self.path.clone(),
                source,
            })?;
        state.unsynced = false;
        state.durable = state.snapshot.as_ref().map(|s| s.text.len());
        Ok(())
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::kept_from;
    use proptest::prelude::*;

    /// The common prefix, byte by byte: what `kept_from` computes a block at a time.
    fn naive(a: &[u8], b: &[u8]) -> usize {
        a.iter().zip(b).take_while(|(x, y)| x == y).count()
    }

    proptest! {
        /// `kept_from` is the common prefix when that covers the durable bytes, else `None`,
        /// whatever the lengths and wherever the first difference (around the block size).
        #[test]
        fn kept_from_is_the_common_prefix_past_the_durable_bytes(
            base in proptest::collection::vec(0_u8..3, 0..300),
            cut in 0_usize..300,
            tail in proptest::collection::vec(0_u8..3, 0..200),
            durable in 0_usize..320,
        ) {
            let cut = cut.min(base.len());
            let new: Vec<u8> = base[..cut].iter().chain(&tail).copied().collect();
            let common = naive(&base, &new);
            let expected = (durable <= base.len() && durable <= new.len() && common >= durable)
                .then_some(common);
            prop_assert_eq!(kept_from(&base, &new, durable), expected);
        }
    }
}
