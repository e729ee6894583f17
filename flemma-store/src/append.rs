//! Appending to a file in place, under the lock [`write_atomic`](crate::write_atomic) takes,
//! when it still holds the expected content: the cheap write of text that is re-sent after a
//! crash anyway (a streamed response's lines), where an atomic rewrite would copy, sync and
//! rename the whole file for a few bytes.
//!
//! The bytes already in the file are never touched: a crash (or a kill) during an append
//! leaves the old content followed by a prefix of the appended bytes, never less than the old
//! content. Nothing is synced: [`sync_data`] makes the appended bytes durable when the caller
//! reaches a point that must survive a crash.
//!
//! [`rewrite_tail_if_unchanged`] changes such unsynced bytes in place and syncs once, for the
//! durable point itself: the bytes before them are never touched either.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::write::{DirLock, Wait};

/// What [`append_if_unchanged`] did.
#[derive(Debug)]
#[non_exhaustive]
pub enum Appended {
    /// The bytes were written; the file's metadata after the write (from the written
    /// descriptor, under the lock).
    Done(std::fs::Metadata),
    /// The file no longer held the expected content (or was replaced meanwhile): nothing was
    /// appended to it.
    Changed,
    /// Another writer held the directory's lock ([`try_append_if_unchanged`] only): nothing
    /// was appended.
    Busy,
}

/// Appends `tail` to `path` when the file holds exactly `expected`, without syncing.
///
/// The check and the append happen under the lock of `path`'s directory that
/// [`write_atomic`](crate::write_atomic) takes, so two writers of this crate never append to
/// or replace a file the other just changed. When the file was replaced by a rename while the
/// bytes were written (an editor, which takes no lock), the append went to the old file and
/// [`Appended::Changed`] is returned: the file at `path` was not changed by this call. A
/// failed write is cut back to `expected`.
///
/// # Errors
///
/// [`StoreError::Open`] when the file cannot be opened (a missing file included),
/// [`StoreError::Lock`] and [`StoreError::Write`].
///
/// ```
/// use flemma_store::{Appended, append_if_unchanged};
/// let dir = std::env::temp_dir().join(format!("flemma-store-append-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("log.txt");
/// std::fs::write(&path, "one\n")?;
/// assert!(matches!(append_if_unchanged(&path, b"one\n", b"two\n")?, Appended::Done(_)));
/// // The file is no longer `one\n`: nothing is appended.
/// assert!(matches!(append_if_unchanged(&path, b"one\n", b"three\n")?, Appended::Changed));
/// assert_eq!(std::fs::read_to_string(&path)?, "one\ntwo\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn append_if_unchanged(
    path: &Path,
    expected: &[u8],
    tail: &[u8],
) -> Result<Appended, StoreError> {
    append_with(path, expected, tail, Wait::Block)
}

/// [`append_if_unchanged`] that does not wait for another writer of the directory: when the
/// directory's lock is held, it answers [`Appended::Busy`] at once, nothing appended. For a
/// caller that must not block its thread on another process (an async runtime's own
/// thread); it calls [`append_if_unchanged`] elsewhere then.
///
/// # Errors
///
/// As [`append_if_unchanged`].
///
/// ```
/// use flemma_store::{Appended, try_append_if_unchanged};
/// let dir = std::env::temp_dir().join(format!("flemma-store-try-append-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("log.txt");
/// std::fs::write(&path, "one\n")?;
/// let held = std::fs::File::open(&dir)?;
/// held.lock()?;
/// assert!(matches!(try_append_if_unchanged(&path, b"one\n", b"two\n")?, Appended::Busy));
/// drop(held);
/// assert!(matches!(try_append_if_unchanged(&path, b"one\n", b"two\n")?, Appended::Done(_)));
/// assert_eq!(std::fs::read_to_string(&path)?, "one\ntwo\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn try_append_if_unchanged(
    path: &Path,
    expected: &[u8],
    tail: &[u8],
) -> Result<Appended, StoreError> {
    append_with(path, expected, tail, Wait::No)
}

fn append_with(
    path: &Path,
    expected: &[u8],
    tail: &[u8],
    wait: Wait,
) -> Result<Appended, StoreError> {
    splice(path, expected, expected.len(), tail, false, wait)
}

/// Replaces what follows the first `keep` bytes of `path` with `tail` and makes the file
/// durable (`fdatasync`), in place, when the file holds exactly `expected`: the durable
/// change of text that was appended without a sync, where an atomic rewrite would copy,
/// sync and rename the whole file and sync its directory.
///
/// The first `keep` bytes (at most `expected.len()`) are never touched: a crash or a kill
/// during the call leaves them followed by what came after them, cut short or not, or by a
/// prefix of `tail`. So a caller uses it only where those bytes were all it had made
/// durable before (a [`sync_data`] or an atomic rewrite): what followed was already allowed
/// to be lost to a crash. The check happens under the directory lock, as for
/// [`append_if_unchanged`]; a failed write puts `expected` back as far as it can.
///
/// # Errors
///
/// As [`append_if_unchanged`].
///
/// ```
/// use flemma_store::{Appended, rewrite_tail_if_unchanged};
/// let dir = std::env::temp_dir().join(format!("flemma-store-tail-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("log.txt");
/// std::fs::write(&path, "one\ntwo (draft)\n")?;
/// let done = rewrite_tail_if_unchanged(&path, b"one\ntwo (draft)\n", 7, b"\n")?;
/// assert!(matches!(done, Appended::Done(_)));
/// assert_eq!(std::fs::read_to_string(&path)?, "one\ntwo\n");
/// // The file is no longer what the change was computed from: nothing is written.
/// let refused = rewrite_tail_if_unchanged(&path, b"one\ntwo (draft)\n", 7, b"\n")?;
/// assert!(matches!(refused, Appended::Changed));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn rewrite_tail_if_unchanged(
    path: &Path,
    expected: &[u8],
    keep: usize,
    tail: &[u8],
) -> Result<Appended, StoreError> {
    splice(path, expected, keep, tail, true, Wait::Block)
}

/// [`rewrite_tail_if_unchanged`] that does not wait for another writer of the directory: when
/// the directory's lock is held, it answers [`Appended::Busy`] at once, nothing written.
///
/// # Errors
///
/// As [`rewrite_tail_if_unchanged`].
pub fn try_rewrite_tail_if_unchanged(
    path: &Path,
    expected: &[u8],
    keep: usize,
    tail: &[u8],
) -> Result<Appended, StoreError> {
    splice(path, expected, keep, tail, true, Wait::No)
}

/// Writes `tail` after the first `keep` bytes of `path` (cutting what followed them) when the
/// file holds exactly `expected`; syncs the data when `sync`.
fn splice(
    path: &Path,
    expected: &[u8],
    keep: usize,
    tail: &[u8],
    sync: bool,
    wait: Wait,
) -> Result<Appended, StoreError> {
    let keep = keep.min(expected.len());
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let write_error = |source| StoreError::Write {
        path: path.to_owned(),
        source,
    };
    let lock = DirLock::take(&dir, wait).map_err(|source| StoreError::Lock {
        dir: dir.clone(),
        source,
    })?;
    let Some(lock) = lock else {
        return Ok(Appended::Busy);
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
    if !holds(&mut file, expected).map_err(write_error)? {
        return Ok(Appended::Changed);
    }
    let at = keep as u64;
    let cut = if keep < expected.len() {
        file.set_len(at)
    } else {
        Ok(())
    };
    let written = cut
        .and_then(|()| file.seek(io::SeekFrom::Start(at)))
        .and_then(|_| file.write_all(tail))
        .and_then(|()| if sync { file.sync_data() } else { Ok(()) });
    if let Err(source) = written {
        // No half-written tail left behind: the expected bytes again, as far as they go.
        let _ = file
            .set_len(at)
            .and_then(|()| file.seek(io::SeekFrom::Start(at)))
            .and_then(|_| file.write_all(&expected[keep..]));
        return Err(write_error(source));
    }
    let metadata = file.metadata().map_err(write_error)?;
    if !same_file(path, &metadata) {
        return Ok(Appended::Changed);
    }
    drop(lock);
    Ok(Appended::Done(metadata))
}

/// Whether `file` holds exactly `expected` (one read of the whole file).
fn holds(file: &mut File, expected: &[u8]) -> io::Result<bool> {
    if file.metadata()?.len() != expected.len() as u64 {
        return Ok(false);
    }
    let mut content = Vec::with_capacity(expected.len() + 1);
    file.read_to_end(&mut content)?;
    Ok(content == expected)
}

/// Whether `path` still names the file `metadata` describes.
#[cfg(unix)]
fn same_file(path: &Path, metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path)
        .is_ok_and(|now| now.ino() == metadata.ino() && now.dev() == metadata.dev())
}

/// Whether `path` still names the file `metadata` describes (not checked here).
#[cfg(not(unix))]
fn same_file(_path: &Path, _metadata: &std::fs::Metadata) -> bool {
    true
}

/// Makes what was written to `path` durable (`fdatasync`): the point after which appends made
/// with [`append_if_unchanged`] survive a crash.
///
/// # Errors
///
/// [`StoreError::Open`] and [`StoreError::Write`].
pub fn sync_data(path: &Path) -> Result<(), StoreError> {
    let file = File::open(path).map_err(|source| StoreError::Open {
        path: path.to_owned(),
        source,
    })?;
    file.sync_data().map_err(|source| StoreError::Write {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_only_to_the_expected_content_and_creates_no_file() {
        let scratch = tempfile::Builder::new()
            .prefix("flemma-store-unit-append-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let dir = scratch.path();
        let path = dir.join("t.chat");
        std::fs::write(&path, "a\n").unwrap_or_else(|e| panic!("{e}"));
        let done = append_if_unchanged(&path, b"a\n", b"b\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(done, Appended::Done(m) if m.len() == 4));
        // Same length, other bytes: refused.
        let refused =
            append_if_unchanged(&path, b"x\ny\n", b"c\n").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(refused, Appended::Changed));
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some("a\nb\n")
        );
        sync_data(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(std::fs::read_dir(dir).map(Iterator::count).ok(), Some(1));
        assert!(append_if_unchanged(&dir.join("missing"), b"", b"x").is_err());
    }
}
