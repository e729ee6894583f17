//! Spec §11.4: failed writes name the path and leave the old file intact.

use std::error::Error as _;
use std::fs;
use std::io::ErrorKind;

use flemma_store::{NoBackup, StoreError, VersionBackup, write_atomic};
use pretty_assertions::assert_eq;

use crate::{TempDir, entries, read};

/// A file name of `len` bytes ending in `.txt`. File names are limited to 255 bytes, for root
/// too: a failure made this way happens as any user (permission bits stop no one as root, as
/// in CI containers).
fn name_of_len(len: usize) -> String {
    format!("{}.txt", "x".repeat(len - 4))
}

/// The old file is there, but the temporary file (`.NAME.PID.N.tmp`, more than 255 bytes)
/// cannot be made: the write fails, naming the path, and the old file is intact. No lock or
/// other file is left beside it.
#[test]
fn the_temporary_file_cannot_be_created() {
    let tmp = TempDir::new("no_temp");
    let name = name_of_len(249);
    let path = tmp.join(&name);
    fs::write(&path, "old").unwrap();

    let err = write_atomic(&path, b"new", &NoBackup).unwrap_err();
    assert!(
        matches!(&err, StoreError::Open { path: p, source } if *p == path && source.kind() == ErrorKind::InvalidFilename),
        "{err:?}"
    );
    // The message names the path; the cause is the source, not repeated.
    assert_eq!(
        err.to_string(),
        format!("Failed to open '{}' for writing", path.display())
    );
    assert!(err.source().is_some());
    assert_eq!(read(&path), "old");
    assert_eq!(entries(tmp.path()), std::slice::from_ref(&name));

    // With `version` too: the temporary file is written before the backup runs, so no
    // version is made either.
    let err = write_atomic(&path, b"new", &VersionBackup).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert_eq!(read(&path), "old");
    assert_eq!(entries(tmp.path()), [name]);
}

/// A new file whose temporary file's name is too long: nothing is created.
#[test]
fn a_new_file_whose_temporary_name_is_too_long() {
    let tmp = TempDir::new("no_temp_new");
    let path = tmp.join(name_of_len(250));
    for backup in [
        &NoBackup as &dyn flemma_store::BackupStrategy,
        &VersionBackup,
    ] {
        let err = write_atomic(&path, b"new", backup).unwrap_err();
        assert!(
            matches!(&err, StoreError::Open { source, .. } if source.kind() == ErrorKind::InvalidFilename),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("Failed to open '{}' for writing", path.display())
        );
    }
    assert!(entries(tmp.path()).is_empty());
}

#[test]
fn parent_is_a_regular_file() {
    let tmp = TempDir::new("parent_file");
    let file = tmp.join("file");
    fs::write(&file, "old").unwrap();
    for backup in [
        &NoBackup as &dyn flemma_store::BackupStrategy,
        &VersionBackup,
    ] {
        let err = write_atomic(&file.join("sub/x.txt"), b"new", backup).unwrap_err();
        assert!(matches!(err, StoreError::CreateDir { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "Failed to create directory '{}'",
                file.join("sub").display()
            )
        );
        let err = write_atomic(&file.join("x.txt"), b"new", backup).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("Failed to create directory '{}'", file.display())
        );
        assert_eq!(read(&file), "old");
    }
    assert_eq!(entries(tmp.path()), ["file"]);
}

#[test]
fn destination_is_a_directory() {
    let tmp = TempDir::new("dest_dir");
    let dest = tmp.join("d");
    fs::create_dir_all(dest.join("inner")).unwrap();
    // Without a backup, the rename over the directory fails.
    let err = write_atomic(&dest, b"new", &NoBackup).unwrap_err();
    assert!(
        matches!(&err, StoreError::Write { source, .. } if source.kind() == ErrorKind::IsADirectory),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("Failed to write '{}'", dest.display())
    );
    assert!(dest.join("inner").is_dir());
    // With `version`, the backup fails first (a directory is not copied) and aborts the write.
    let err = write_atomic(&dest, b"new", &VersionBackup).unwrap_err();
    assert!(
        matches!(&err, StoreError::Backup { source, .. } if source.kind() == ErrorKind::IsADirectory),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!("Backup failed for '{}'", dest.display())
    );
    assert!(dest.join("inner").is_dir());
    // Nothing beside it: no lock, no temporary file, no half-made version.
    assert_eq!(entries(tmp.path()), ["d"]);
}
