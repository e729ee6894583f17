//! Spec §11.4: failed writes name the path and leave the old file intact.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

use flemma_store::{NoBackup, StoreError, VersionBackup, write_atomic};
use pretty_assertions::assert_eq;

use crate::{TempDir, entries, read};

/// Restores a directory's mode on drop, so that a failing test still cleans up.
struct ModeGuard(PathBuf);

impl Drop for ModeGuard {
    fn drop(&mut self) {
        let _ = fs::set_permissions(&self.0, fs::Permissions::from_mode(0o755));
    }
}

#[test]
#[allow(clippy::print_stderr, reason = "explains a skipped assertion")]
fn read_only_directory() {
    let tmp = TempDir::new("read_only");
    let dir = tmp.join("ro");
    let path = dir.join("out.txt");
    write_atomic(&path, b"old", &VersionBackup).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
    let _guard = ModeGuard(dir.clone());

    let probe = dir.join("probe");
    if fs::write(&probe, "").is_ok() {
        // Root (as in CI containers) ignores permission bits: there is nothing to observe.
        let _ = fs::remove_file(&probe);
        eprintln!("read_only_directory: skipped, permission bits do not stop this user (root?)");
        return;
    }

    // Without a backup, the temporary file cannot be created.
    let err = write_atomic(&path, b"new", &NoBackup).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("Failed to open '{}' for writing", path.display())
    );
    assert_eq!(read(&path), "old");

    // With `version` too: the temporary file is written before the backup runs.
    let err = write_atomic(&path, b"new", &VersionBackup).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert_eq!(read(&path), "old");

    // A new file in the directory.
    let fresh = dir.join("fresh.txt");
    let err = write_atomic(&fresh, b"new", &VersionBackup).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("Failed to open '{}' for writing", fresh.display())
    );
    assert_eq!(entries(&dir), ["out.txt"]);
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
    for backup in [
        &NoBackup as &dyn flemma_store::BackupStrategy,
        &VersionBackup,
    ] {
        let err = write_atomic(&dest, b"new", backup).unwrap_err();
        assert!(
            err.to_string().contains(&format!("'{}'", dest.display())),
            "{err}"
        );
        assert!(dest.join("inner").is_dir());
    }
    // Nothing beside it: no lock, no temporary file, no half-made version.
    assert_eq!(entries(tmp.path()), ["d"]);
}
