//! Atomic writes with backups.
//!
//! A write creates the parent directories, writes the content to a temporary file in the same
//! directory and syncs it; then, holding an exclusive lock on the directory, runs the backup
//! strategy and renames the temporary file over the destination; then syncs the directory.
//! Readers see the old or the new file, never a mix; a crash leaves at most a stray temporary
//! file; two writers of one path (threads or processes) take turns for the backup and the
//! rename, so a `version` backup never loses a run.
//!
//! The lock is the directory itself (`flock` on a descriptor of it), so no lock file is left
//! beside the target, in the store or in a user's project; every writer of a path agrees on
//! it, whichever store, conversation or process it comes from. Where a directory cannot be
//! opened or locked (Windows, some network file systems, a directory without read permission)
//! the lock is a file in the system temporary directory instead: `flemma-locks/<hash of the
//! directory>.lock`, one per directory, left in place.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::StoreError;

/// What happens to an existing file before it is overwritten.
///
/// Runs while the writer holds the path's lock. Returning an error aborts the write and leaves
/// the old file in place.
pub trait BackupStrategy: Send + Sync + std::fmt::Debug {
    /// Preserves `path` (which exists) somewhere; returns where, if anywhere.
    ///
    /// # Errors
    ///
    /// Any I/O error; the write is then aborted.
    fn backup(&self, path: &Path) -> io::Result<Option<PathBuf>>;
}

/// No backup: the new content replaces the old.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoBackup;

impl BackupStrategy for NoBackup {
    fn backup(&self, _path: &Path) -> io::Result<Option<PathBuf>> {
        Ok(None)
    }
}

/// `version`: keep the old file as the first free `<stem>.<n>.<ext>` (`<path>.<n>` without an
/// extension), n = 1, 2, …; the canonical path always holds the newest run.
///
/// The old file is hard-linked to its versioned name (copied where links are not supported),
/// so the canonical path never disappears while the new content is written.
#[derive(Debug, Default, Clone, Copy)]
pub struct VersionBackup;

impl VersionBackup {
    /// The n-th versioned name of `path`.
    pub fn versioned(path: &Path, n: u32) -> PathBuf {
        if let (Some(stem), Some(ext)) = (path.file_stem(), path.extension()) {
            path.with_file_name(format!(
                "{}.{n}.{}",
                stem.to_string_lossy(),
                ext.to_string_lossy()
            ))
        } else {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".{n}"));
            PathBuf::from(name)
        }
    }
}

impl BackupStrategy for VersionBackup {
    fn backup(&self, path: &Path) -> io::Result<Option<PathBuf>> {
        for n in 1..=u32::MAX {
            let target = Self::versioned(path, n);
            match fs::hard_link(path, &target) {
                Ok(()) => return Ok(Some(target)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(_) => {
                    // No hard links here: copy without clobbering.
                    if target.exists() {
                        continue;
                    }
                    copy_new(path, &target)?;
                    return Ok(Some(target));
                }
            }
        }
        Err(io::Error::other("no free version number"))
    }
}

fn copy_new(from: &Path, to: &Path) -> io::Result<()> {
    let mut source = File::open(from)?;
    let mut target = OpenOptions::new().write(true).create_new(true).open(to)?;
    let copied = io::copy(&mut source, &mut target).and_then(|_| target.sync_all());
    if copied.is_err() {
        // No half-made version left behind.
        drop(target);
        let _ = fs::remove_file(to);
    }
    copied
}

/// The directory `path` is written in (`.` for a bare file name), created when missing.
fn create_parent(path: &Path) -> Result<PathBuf, StoreError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|source| StoreError::CreateDir {
        dir: dir.clone(),
        source,
    })?;
    Ok(dir)
}

fn temp_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// An exclusive lock serialising the writers of one directory, released on drop.
#[derive(Debug)]
pub(crate) struct DirLock {
    file: File,
    /// `file` is the directory itself (not the fallback lock file).
    is_dir: bool,
}

impl DirLock {
    /// Locks `dir` itself, or the fallback lock file where the directory cannot be locked.
    #[cfg(test)]
    fn acquire(dir: &Path) -> io::Result<Self> {
        Self::take(dir, Wait::Block)?
            .ok_or_else(|| io::Error::other("the directory lock was not taken"))
    }

    /// Locks `dir` itself, or the fallback lock file where the directory cannot be locked;
    /// with [`Wait::No`], `None` at once when another writer holds the lock.
    pub(crate) fn take(dir: &Path, wait: Wait) -> io::Result<Option<Self>> {
        if let Ok(file) = File::open(dir) {
            match lock_with(&file, wait) {
                Ok(true) => return Ok(Some(Self { file, is_dir: true })),
                Ok(false) => return Ok(None),
                // Directories cannot be locked here: the fallback.
                Err(_) => {}
            }
        }
        Self::fallback_with(dir, wait)
    }

    /// Locks `dir`'s fallback lock file, [`fallback_lock_path`].
    #[cfg(test)]
    fn fallback(dir: &Path) -> io::Result<Self> {
        Self::fallback_with(dir, Wait::Block)?
            .ok_or_else(|| io::Error::other("the fallback lock was not taken"))
    }

    /// [`fallback`](Self::fallback), `None` when it is held and `wait` is [`Wait::No`].
    fn fallback_with(dir: &Path, wait: Wait) -> io::Result<Option<Self>> {
        let path = fallback_lock_path(dir);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        if !lock_with(&file, wait)? {
            return Ok(None);
        }
        Ok(Some(Self {
            file,
            is_dir: false,
        }))
    }

    /// Releases the lock; the directory, still open, when it was the lock (its sync then
    /// needs no second open).
    fn release(self) -> Option<File> {
        if !self.is_dir {
            return None;
        }
        // Closing the descriptor would release the lock too; it is kept for the sync.
        self.file.unlock().is_ok().then_some(self.file)
    }
}

/// Makes a rename in `dir` durable: syncs `open` (the directory, still open from its lock)
/// or `dir` opened again.
fn sync_dir(dir: &Path, open: Option<File>) {
    if let Some(dir) = open.or_else(|| File::open(dir).ok()) {
        let _ = dir.sync_all();
    }
}

/// `file.lock()`, retried when a signal interrupts the wait.
fn lock(file: &File) -> io::Result<()> {
    loop {
        match file.lock() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}

/// Whether a writer waits for a directory lock another writer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Waits for it.
    Block,
    /// Gives up at once (the `try_` writes).
    No,
}

/// Locks `file` as `wait` says; `false` when another holder has it and `wait` is
/// [`Wait::No`].
fn lock_with(file: &File, wait: Wait) -> io::Result<bool> {
    match wait {
        Wait::Block => lock(file).map(|()| true),
        Wait::No => match file.try_lock() {
            Ok(()) => Ok(true),
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(error)) => Err(error),
        },
    }
}

/// The lock file standing in for `dir` where the directory itself cannot be locked:
/// `<temp dir>/flemma-locks/<FNV-1a of the canonical directory>.lock`, so that every writer of
/// the directory on this machine picks the same one.
fn fallback_lock_path(dir: &Path) -> PathBuf {
    let dir = fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_owned());
    let hash = crate::path::fnv1a(dir.as_os_str().as_encoded_bytes());
    std::env::temp_dir()
        .join("flemma-locks")
        .join(format!("{hash:016x}.lock"))
}

/// Writes `content` to `path` atomically, after running `backup` on the old file.
///
/// This blocks: it syncs the new file and then its directory (two `fsync`s, milliseconds on
/// most disks, more on a busy one), and may wait for another writer of the same directory.
/// Async code runs it on a blocking thread (`Store::write_result_async` and the other `_async`
/// methods of [`Store`](crate::Store), with the `tokio` feature).
///
/// The content goes to a temporary file beside `path` (`.<name>.<pid>.<n>.tmp`), removed on
/// failure and left behind only by a crash. The backup and the rename happen under an
/// exclusive lock on `path`'s directory, so concurrent writers of one directory wait for each
/// other only for those two steps. No lock file is created beside `path`: the directory itself
/// is locked (`flock`), or, where directories cannot be opened or locked (Windows, some network
/// file systems, a directory without read permission), the file
/// `<temp dir>/flemma-locks/<hash of the directory>.lock`, which is left in place.
///
/// # Errors
///
/// [`StoreError::CreateDir`], [`StoreError::Open`], [`StoreError::Write`],
/// [`StoreError::Lock`] and [`StoreError::Backup`]; in every case the old file is intact.
///
/// ```
/// use flemma_store::{VersionBackup, write_atomic};
/// let dir = std::env::temp_dir().join(format!("flemma-store-doc-{}", std::process::id()));
/// let path = dir.join("out.txt");
/// write_atomic(&path, b"first", &VersionBackup)?;
/// write_atomic(&path, b"second", &VersionBackup)?;
/// assert_eq!(std::fs::read_to_string(&path)?, "second");
/// assert_eq!(std::fs::read_to_string(dir.join("out.1.txt"))?, "first");
/// // The target and its version: no lock file.
/// assert_eq!(std::fs::read_dir(&dir)?.count(), 2);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_atomic(
    path: &Path,
    content: &[u8],
    backup: &dyn BackupStrategy,
) -> Result<PathBuf, StoreError> {
    write_atomic_metadata(path, content, backup).map(|_| path.to_owned())
}

/// [`write_atomic`], returning the metadata of the file it installed, read from that file
/// (not from its path) right after the rename: a writer that replaces the file later changes
/// what the path's metadata say (its inode, its change time), never these. `None` when they
/// could not be read (the file is installed all the same).
///
/// # Errors
///
/// As [`write_atomic`].
///
/// ```
/// use flemma_store::{NoBackup, write_atomic_metadata};
/// let dir = std::env::temp_dir().join(format!("flemma-store-meta-{}", std::process::id()));
/// let path = dir.join("out.txt");
/// let written = write_atomic_metadata(&path, b"hello", &NoBackup)?.ok_or("no metadata")?;
/// assert_eq!(written.len(), 5);
/// # #[cfg(unix)]
/// # {
/// use std::os::unix::fs::MetadataExt as _;
/// assert_eq!(written.ino(), std::fs::metadata(&path)?.ino());
/// # }
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_atomic_metadata(
    path: &Path,
    content: &[u8],
    backup: &dyn BackupStrategy,
) -> Result<Option<fs::Metadata>, StoreError> {
    let dir = create_parent(path)?;
    let temp = temp_path(path);
    let result = replace(
        path,
        &dir,
        &temp,
        content,
        Before::Backup(backup),
        Wait::Block,
    );
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    let (metadata, open) = backed_up(path, result?)?;
    // Make the rename durable.
    sync_dir(&dir, open);
    Ok(metadata)
}

/// What [`replace_if_unchanged`] did.
#[derive(Debug)]
#[non_exhaustive]
pub enum Replaced {
    /// The new content is installed and durable; the installed file's metadata (as
    /// [`write_atomic_metadata`] gives them), `None` when they could not be read.
    Done(Option<fs::Metadata>),
    /// The file no longer held the expected content: nothing was written (the temporary file
    /// is removed).
    Changed,
    /// Another writer held the directory's lock ([`try_replace_if_unchanged`] only): nothing
    /// was written (the temporary file is removed).
    Busy,
}

/// A compare-and-swap of a whole file: writes `content` to `path` atomically and durably, as
/// [`write_atomic`] does, only when the file still holds exactly `expected` when the new
/// content is renamed over it (compared under the directory lock every writer of this crate
/// takes, so no writer of this crate slips in between). A file that does not exist is
/// written (there is nothing to compare; the change recreates it).
///
/// # Errors
///
/// As [`write_atomic`], but for backups (there are none).
///
/// ```
/// use flemma_store::{Replaced, replace_if_unchanged};
/// let dir = std::env::temp_dir().join(format!("flemma-store-cas-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("chat.txt");
/// std::fs::write(&path, "one\n")?;
/// assert!(matches!(replace_if_unchanged(&path, b"one\n", b"two\n")?, Replaced::Done(_)));
/// // The file is no longer `one\n`: nothing is written.
/// assert!(matches!(replace_if_unchanged(&path, b"one\n", b"three\n")?, Replaced::Changed));
/// assert_eq!(std::fs::read_to_string(&path)?, "two\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn replace_if_unchanged(
    path: &Path,
    expected: &[u8],
    content: &[u8],
) -> Result<Replaced, StoreError> {
    replace_with(path, expected, content, Wait::Block)
}

/// [`replace_if_unchanged`] that does not wait for another writer of the directory: when the
/// directory's lock is held, it answers [`Replaced::Busy`] at once (nothing written, the
/// temporary file removed). For a caller that must not block its thread on another process
/// (an async runtime's own thread); it calls [`replace_if_unchanged`] elsewhere then.
///
/// # Errors
///
/// As [`replace_if_unchanged`].
///
/// ```
/// use flemma_store::{Replaced, try_replace_if_unchanged};
/// let dir = std::env::temp_dir().join(format!("flemma-store-try-cas-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("chat.txt");
/// std::fs::write(&path, "one\n")?;
/// assert!(matches!(try_replace_if_unchanged(&path, b"one\n", b"two\n")?, Replaced::Done(_)));
/// // Another writer holds the directory: nothing is written.
/// let held = std::fs::File::open(&dir)?;
/// held.lock()?;
/// assert!(matches!(try_replace_if_unchanged(&path, b"two\n", b"three\n")?, Replaced::Busy));
/// assert_eq!(std::fs::read_to_string(&path)?, "two\n");
/// # drop(held);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn try_replace_if_unchanged(
    path: &Path,
    expected: &[u8],
    content: &[u8],
) -> Result<Replaced, StoreError> {
    replace_with(path, expected, content, Wait::No)
}

fn replace_with(
    path: &Path,
    expected: &[u8],
    content: &[u8],
    wait: Wait,
) -> Result<Replaced, StoreError> {
    let dir = create_parent(path)?;
    let temp = temp_path(path);
    let result = replace(path, &dir, &temp, content, Before::Holds(expected), wait);
    if !matches!(result, Ok(Installed::Done(..))) {
        let _ = fs::remove_file(&temp);
    }
    match result? {
        Installed::Done(metadata, open) => {
            // Make the rename durable.
            sync_dir(&dir, open);
            Ok(Replaced::Done(metadata))
        }
        Installed::Changed => Ok(Replaced::Changed),
        Installed::Busy => Ok(Replaced::Busy),
    }
}

/// What an install does, under the directory lock, before it renames over an existing file.
#[derive(Clone, Copy)]
enum Before<'a> {
    /// Backs the file up.
    Backup(&'a dyn BackupStrategy),
    /// Compares the file with the text a change was computed from: the install is refused
    /// ([`Installed::Changed`]) when it holds anything else.
    Holds(&'a [u8]),
}

/// What [`install`] did.
enum Installed {
    /// Renamed over the path; the installed file's metadata, when they could be read, and the
    /// directory's descriptor the lock was held on (to sync the rename through).
    Done(Option<fs::Metadata>, Option<File>),
    /// Refused by [`Before::Holds`]: nothing renamed.
    Changed,
    /// Another writer held the directory's lock and the install was not to wait for it:
    /// nothing renamed.
    Busy,
}

/// The metadata of an install under [`Before::Backup`] (which never gives
/// [`Installed::Changed`]: a backup refuses with its error; should it ever, that is a failed
/// write, not a silent one).
fn backed_up(
    path: &Path,
    installed: Installed,
) -> Result<(Option<fs::Metadata>, Option<File>), StoreError> {
    match installed {
        Installed::Done(metadata, open) => Ok((metadata, open)),
        Installed::Changed | Installed::Busy => Err(StoreError::Write {
            path: path.to_owned(),
            source: io::Error::other("the file changed under the write"),
        }),
    }
}

/// Writes and syncs `temp`, then, under the directory lock, backs `path` up (or compares it)
/// and renames `temp` over it. The caller removes `temp` on failure and when refused.
fn replace(
    path: &Path,
    dir: &Path,
    temp: &Path,
    content: &[u8],
    before: Before<'_>,
    wait: Wait,
) -> Result<Installed, StoreError> {
    let write_error = |source| StoreError::Write {
        path: path.to_owned(),
        source,
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
    file.write_all(content).map_err(write_error)?;
    install(path, dir, temp, &file, before, wait)
}

/// Syncs `file` (the open `temp`), then, under the directory lock, backs `path` up and
/// renames `temp` over it; the installed file's metadata (after the rename, which changes
/// its change time), `None` when they cannot be read, and the directory, still open when it
/// was the lock, for the caller's sync of the rename. The caller removes `temp` on failure.
fn install(
    path: &Path,
    dir: &Path,
    temp: &Path,
    file: &File,
    before: Before<'_>,
    wait: Wait,
) -> Result<Installed, StoreError> {
    let write_error = |source| StoreError::Write {
        path: path.to_owned(),
        source,
    };
    // The replacement keeps the permissions of the file it replaces.
    if let Ok(meta) = fs::metadata(path) {
        file.set_permissions(meta.permissions())
            .map_err(write_error)?;
    }
    file.sync_all().map_err(write_error)?;

    let lock = DirLock::take(dir, wait).map_err(|source| StoreError::Lock {
        dir: dir.to_owned(),
        source,
    })?;
    let Some(lock) = lock else {
        return Ok(Installed::Busy);
    };
    if path.exists() {
        match before {
            Before::Backup(backup) => {
                backup.backup(path).map_err(|source| StoreError::Backup {
                    path: path.to_owned(),
                    source,
                })?;
            }
            Before::Holds(expected) => {
                if fs::read(path).map_err(write_error)? != expected {
                    return Ok(Installed::Changed);
                }
            }
        }
    }
    fs::rename(temp, path).map_err(write_error)?;
    // The file itself, still open: what now stands at `path` unless another writer (one that
    // does not take the lock) replaced it in the meantime, which then shows as a difference.
    // It is installed: not knowing its metadata is no failure of the write.
    let metadata = file.metadata().ok();
    Ok(Installed::Done(metadata, lock.release()))
}

/// An atomic write whose content arrives in pieces: a command's output streamed to the store
/// as it is produced, so that it never has to be held in memory.
///
/// The content goes to the same temporary file [`write_atomic`] uses; [`commit`](Self::commit)
/// installs it exactly as [`write_atomic`] does (backup, rename under the directory lock, sync),
/// and dropping the writer without committing removes the temporary file, leaving the old file
/// (if any) untouched.
///
/// ```
/// use flemma_store::{AtomicWriter, NoBackup};
/// let dir = std::env::temp_dir().join(format!("flemma-store-writer-{}", std::process::id()));
/// let path = dir.join("out.txt");
/// let mut writer = AtomicWriter::create(&path, std::sync::Arc::new(NoBackup))?;
/// writer.write(b"hello ")?;
/// writer.write(b"world   ")?;
/// writer.truncate(11)?;
/// assert_eq!(writer.commit()?, path);
/// assert_eq!(std::fs::read_to_string(&path)?, "hello world");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AtomicWriter {
    path: PathBuf,
    dir: PathBuf,
    temp: PathBuf,
    file: Option<File>,
    backup: std::sync::Arc<dyn BackupStrategy>,
    /// Told of the destination once it is installed.
    installed: Option<std::sync::Arc<dyn crate::StoreWrites>>,
}

impl AtomicWriter {
    /// Creates the parent directories and the temporary file beside `path`.
    ///
    /// # Errors
    ///
    /// [`StoreError::CreateDir`] and [`StoreError::Open`].
    pub fn create(
        path: &Path,
        backup: std::sync::Arc<dyn BackupStrategy>,
    ) -> Result<Self, StoreError> {
        let dir = create_parent(path)?;
        let temp = temp_path(path);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|source| StoreError::Open {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            path: path.to_owned(),
            dir,
            temp,
            file: Some(file),
            backup,
            installed: None,
        })
    }

    /// Tells `writes` of the destination once [`commit`](Self::commit) installed it
    /// ([`StoreWrites::installed`](crate::StoreWrites::installed)).
    pub(crate) fn telling(mut self, writes: std::sync::Arc<dyn crate::StoreWrites>) -> Self {
        self.installed = Some(writes);
        self
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&mut self) -> Result<&mut File, StoreError> {
        let path = &self.path;
        self.file.as_mut().ok_or_else(|| StoreError::Write {
            path: path.clone(),
            source: io::Error::other("writer already committed"),
        })
    }

    /// Appends `bytes`.
    ///
    /// # Errors
    ///
    /// [`StoreError::Write`].
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path.clone();
        self.file()?
            .write_all(bytes)
            .map_err(|source| StoreError::Write { path, source })
    }

    /// Cuts the content written so far to `len` bytes; later writes append at the end.
    ///
    /// # Errors
    ///
    /// [`StoreError::Write`].
    pub fn truncate(&mut self, len: u64) -> Result<(), StoreError> {
        use std::io::Seek as _;
        let path = self.path.clone();
        let file = self.file()?;
        file.set_len(len)
            .and_then(|()| file.seek(io::SeekFrom::End(0)).map(drop))
            .map_err(|source| StoreError::Write { path, source })
    }

    /// Installs the content at the destination (backup, then rename) and returns it.
    ///
    /// # Errors
    ///
    /// As [`write_atomic`]; the temporary file is removed and the old file is intact.
    pub fn commit(mut self) -> Result<PathBuf, StoreError> {
        let Some(file) = self.file.take() else {
            return Err(StoreError::Write {
                path: self.path.clone(),
                source: io::Error::other("writer already committed"),
            });
        };
        let result = install(
            &self.path,
            &self.dir,
            &self.temp,
            &file,
            Before::Backup(&*self.backup),
            Wait::Block,
        )
        .and_then(|installed| backed_up(&self.path, installed));
        if result.is_err() {
            let _ = fs::remove_file(&self.temp);
        }
        let (_, open) = result?;
        sync_dir(&self.dir, open);
        // Installed: nothing for `drop` to remove.
        self.temp = PathBuf::new();
        if let Some(writes) = &self.installed {
            writes.installed(&self.path);
        }
        Ok(self.path.clone())
    }
}

impl Drop for AtomicWriter {
    fn drop(&mut self) {
        if !self.temp.as_os_str().is_empty() {
            self.file = None;
            let _ = fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Barrier};

    use super::*;

    /// A fresh directory under the temporary directory, removed when dropped together with
    /// its fallback lock file (which is not in it).
    struct Scratch(tempfile::TempDir);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = tempfile::Builder::new()
                .prefix(&format!("flemma-store-unit-{name}-"))
                .tempdir()
                .unwrap_or_else(|e| panic!("{e}"));
            Self(dir)
        }

        fn path(&self) -> &Path {
            self.0.path()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_file(fallback_lock_path(self.path()));
        }
    }

    #[test]
    fn atomic_writer_dropped_leaves_the_old_file_and_no_temp() {
        let scratch = Scratch::new("writer");
        // Not there yet: the first write makes it.
        let dir = scratch.path().join("out");
        let path = dir.join("out.txt");
        write_atomic(&path, b"old", &NoBackup).unwrap_or_else(|e| panic!("{e}"));
        let mut writer = AtomicWriter::create(&path, std::sync::Arc::new(VersionBackup))
            .unwrap_or_else(|e| panic!("{e}"));
        writer.write(b"new").unwrap_or_else(|e| panic!("{e}"));
        drop(writer);
        assert_eq!(fs::read_to_string(&path).ok().as_deref(), Some("old"));
        assert_eq!(fs::read_dir(&dir).map(Iterator::count).ok(), Some(1));

        let mut writer = AtomicWriter::create(&path, std::sync::Arc::new(VersionBackup))
            .unwrap_or_else(|e| panic!("{e}"));
        writer.write(b"newer").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(writer.commit().ok(), Some(path.clone()));
        assert_eq!(fs::read_to_string(&path).ok().as_deref(), Some("newer"));
        assert_eq!(
            fs::read_to_string(dir.join("out.1.txt")).ok().as_deref(),
            Some("old")
        );
    }

    #[test]
    fn fallback_lock_path_is_stable_and_outside_the_directory() {
        let dir = std::env::temp_dir().join("flemma-store-unit-fallback-path");
        let path = fallback_lock_path(&dir);
        assert_eq!(path, fallback_lock_path(&dir));
        assert_ne!(path, fallback_lock_path(&dir.join("other")));
        assert!(path.starts_with(std::env::temp_dir().join("flemma-locks")));
        assert!(!path.starts_with(&dir));
    }

    /// Four threads take `lock` of one fresh directory 50 times each; none ever overlaps
    /// another. Returns the directory (still there).
    fn assert_excludes(name: &str, lock: fn(&Path) -> io::Result<DirLock>) -> Scratch {
        let scratch = Scratch::new(name);
        let dir = scratch.path().to_path_buf();
        let inside = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (dir, inside, barrier) =
                    (dir.clone(), Arc::clone(&inside), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..50 {
                        let held = lock(&dir).unwrap_or_else(|e| panic!("{e}"));
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(held);
                    }
                })
            })
            .collect();
        for thread in threads {
            assert!(thread.join().is_ok());
        }
        scratch
    }

    #[test]
    fn fallback_lock_excludes() {
        let dir = assert_excludes("fallback", DirLock::fallback);
        assert!(fallback_lock_path(dir.path()).is_file());
    }

    /// A writer that does not wait gets no lock while another holds it, and the lock once it
    /// is released: the directory's own and the fallback lock file alike.
    #[test]
    fn a_writer_that_does_not_wait_is_told_the_lock_is_held() {
        let scratch = Scratch::new("nowait");
        let dir = scratch.path();
        let held = DirLock::take(dir, Wait::Block).unwrap_or_else(|e| panic!("{e}"));
        assert!(held.is_some());
        assert!(matches!(DirLock::take(dir, Wait::No), Ok(None)));
        drop(held);
        assert!(matches!(DirLock::take(dir, Wait::No), Ok(Some(_))));
        let held = DirLock::fallback(dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(DirLock::fallback_with(dir, Wait::No), Ok(None)));
        drop(held);
        assert!(matches!(DirLock::fallback_with(dir, Wait::No), Ok(Some(_))));
    }

    /// On Unix the directory itself is the lock: no file anywhere, the directory stays empty.
    #[cfg(unix)]
    #[test]
    fn directory_lock_excludes_and_creates_no_file() {
        let dir = assert_excludes("dir", DirLock::acquire);
        assert!(!fallback_lock_path(dir.path()).exists());
        assert_eq!(fs::read_dir(dir.path()).map(Iterator::count).ok(), Some(0));
    }
}
