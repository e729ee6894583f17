//! Atomic writes with backups (spec §11.4).
//!
//! A write creates the parent directories, takes an exclusive lock on a sidecar lock file, runs
//! the backup strategy, writes the content to a temporary file in the same directory, syncs
//! it, renames it over the destination and syncs the directory. Readers see the old or the new
//! file, never a mix; a crash leaves at most a stray temporary file; two writers of one path
//! (threads or processes) take turns, so a `version` backup never loses a run.

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

/// The lock file guarding writes to `path`: `.<name>.lock` beside it.
fn lock_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.lock"))
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

/// Writes `content` to `path` atomically, after running `backup` on the old file.
///
/// # Errors
///
/// [`StoreError::CreateDir`], [`StoreError::Backup`] (the old file is intact),
/// [`StoreError::Open`] and [`StoreError::Write`] (the old file is intact).
///
/// ```
/// use flemma_store::{VersionBackup, write_atomic};
/// let dir = std::env::temp_dir().join(format!("flemma-store-doc-{}", std::process::id()));
/// let path = dir.join("out.txt");
/// write_atomic(&path, b"first", &VersionBackup)?;
/// write_atomic(&path, b"second", &VersionBackup)?;
/// assert_eq!(std::fs::read_to_string(&path)?, "second");
/// assert_eq!(std::fs::read_to_string(dir.join("out.1.txt"))?, "first");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_atomic(
    path: &Path,
    content: &[u8],
    backup: &dyn BackupStrategy,
) -> Result<PathBuf, StoreError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(|source| StoreError::CreateDir {
        dir: dir.clone(),
        source,
    })?;
    let write_error = |source| StoreError::Write {
        path: path.to_owned(),
        source,
    };
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path(path))
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
    lock.lock().map_err(write_error)?;
    if path.exists() {
        backup.backup(path).map_err(|source| StoreError::Backup {
            path: path.to_owned(),
            source,
        })?;
    }
    let temp = temp_path(path);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|source| StoreError::Open {
                path: path.to_owned(),
                source,
            })?;
        file.write_all(content).map_err(write_error)?;
        // The replacement keeps the permissions of the file it replaces.
        if let Ok(meta) = fs::metadata(path) {
            file.set_permissions(meta.permissions())
                .map_err(write_error)?;
        }
        file.sync_all().map_err(write_error)?;
        drop(file);
        fs::rename(&temp, path).map_err(write_error)?;
        // Make the rename durable.
        if let Ok(dir) = File::open(&dir) {
            let _ = dir.sync_all();
        }
        Ok(path.to_owned())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    drop(lock);
    result
}
