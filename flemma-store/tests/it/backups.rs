//! Spec §11.4: writes and backups — `version` naming, `false` (no backup), custom strategies
//! and unknown names.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flemma_config::Backup;
use flemma_store::{BackupStrategy, NoBackup, Store, VersionBackup, write_atomic};
use pretty_assertions::assert_eq;

use crate::{TempDir, entries, has_ext, options, read, tid, tn};

#[test]
fn version_names() {
    let v = |p: &str, n| VersionBackup::versioned(Path::new(p), n);
    assert_eq!(v("/s/out.txt", 1), PathBuf::from("/s/out.1.txt"));
    assert_eq!(v("/s/out.txt", 12), PathBuf::from("/s/out.12.txt"));
    assert_eq!(v("/s/a.tar.gz", 3), PathBuf::from("/s/a.tar.3.gz"));
    assert_eq!(v("/s/out", 2), PathBuf::from("/s/out.2"));
}

#[test]
fn version_keeps_every_run() {
    let tmp = TempDir::new("version_keeps");
    let path = tmp.join("d/out.txt");
    for content in ["a", "b", "c"] {
        assert_eq!(
            write_atomic(&path, content.as_bytes(), &VersionBackup).unwrap(),
            path
        );
    }
    assert_eq!(read(&path), "c");
    assert_eq!(read(&tmp.join("d/out.1.txt")), "a");
    assert_eq!(read(&tmp.join("d/out.2.txt")), "b");
    assert!(!tmp.join("d/out.3.txt").exists());
    assert!(!entries(&tmp.join("d")).iter().any(|n| has_ext(n, "tmp")));
}

#[test]
fn version_without_extension() {
    let tmp = TempDir::new("version_noext");
    let path = tmp.join("out");
    for content in ["a", "b", "c"] {
        write_atomic(&path, content.as_bytes(), &VersionBackup).unwrap();
    }
    assert_eq!(read(&path), "c");
    assert_eq!(read(&tmp.join("out.1")), "a");
    assert_eq!(read(&tmp.join("out.2")), "b");
}

#[test]
fn version_takes_the_first_free_number() {
    let tmp = TempDir::new("version_first_free");
    let path = tmp.join("out.txt");
    for content in ["a", "b", "c", "d"] {
        write_atomic(&path, content.as_bytes(), &VersionBackup).unwrap();
    }
    // out.1 = a, out.2 = b, out.3 = c; free number 2.
    std::fs::remove_file(tmp.join("out.2.txt")).unwrap();
    write_atomic(&path, b"e", &VersionBackup).unwrap();
    assert_eq!(read(&tmp.join("out.1.txt")), "a");
    assert_eq!(read(&tmp.join("out.2.txt")), "d");
    assert_eq!(read(&tmp.join("out.3.txt")), "c");
    assert_eq!(read(&path), "e");
    assert!(!tmp.join("out.4.txt").exists());
}

#[test]
fn version_of_a_missing_file_is_a_no_op() {
    let tmp = TempDir::new("version_missing");
    let path = tmp.join("missing.txt");
    assert_eq!(VersionBackup.backup(&path).unwrap(), None);
    assert!(entries(tmp.path()).is_empty());
    // And the first write makes no version.
    write_atomic(&path, b"x", &VersionBackup).unwrap();
    assert!(!tmp.join("missing.1.txt").exists());
}

#[test]
fn version_backup_returns_where_it_kept_the_file() {
    let tmp = TempDir::new("version_returns");
    let path = tmp.join("f.txt");
    std::fs::write(&path, "old").unwrap();
    assert_eq!(
        VersionBackup.backup(&path).unwrap(),
        Some(tmp.join("f.1.txt"))
    );
    assert_eq!(read(&tmp.join("f.1.txt")), "old");
    assert_eq!(
        VersionBackup.backup(&path).unwrap(),
        Some(tmp.join("f.2.txt"))
    );
}

#[test]
fn no_backup_overwrites() {
    let tmp = TempDir::new("no_backup");
    let path = tmp.join("out.txt");
    write_atomic(&path, b"first", &NoBackup).unwrap();
    write_atomic(&path, b"second", &NoBackup).unwrap();
    assert_eq!(read(&path), "second");
    assert_eq!(entries(tmp.path()), ["out.txt"]);
}

#[test]
fn store_backup_option() {
    let tmp = TempDir::new("store_backup_option");
    let chat = tmp.join("c.chat");
    let dir = tmp.join(".flemma/c.chat");
    let write = |backup: Backup| {
        let mut options = options();
        options.backup = backup;
        let store = Store::new(&options, Some(&chat), "1").unwrap();
        for content in ["1", "2"] {
            store
                .write_result(&tid("id"), Some(&tn("bash")), content)
                .unwrap();
        }
    };
    // Default: `version`.
    assert_eq!(options().backup, Backup::Strategy("version".into()));
    write(Backup::Strategy("version".into()));
    assert_eq!(read(&dir.join("tool_bash_id.1.txt")), "1");
    assert_eq!(read(&dir.join("tool_bash_id.txt")), "2");
    // `true` reads as the default strategy.
    write(Backup::Enabled(true));
    assert_eq!(read(&dir.join("tool_bash_id.2.txt")), "2");
    assert_eq!(read(&dir.join("tool_bash_id.3.txt")), "1");
    // `false`: overwrite in place.
    write(Backup::Enabled(false));
    assert!(!dir.join("tool_bash_id.4.txt").exists());
    assert_eq!(read(&dir.join("tool_bash_id.txt")), "2");
}

#[test]
fn unknown_backup_strategy() {
    let mut options = options();
    options.backup = Backup::Strategy("x".into());
    let err = Store::new(&options, Some(Path::new("/n/c.chat")), "1").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unknown backup strategy 'x' (known: version)"
    );
}

/// Fails every backup.
#[derive(Debug)]
struct Failing;

impl BackupStrategy for Failing {
    fn backup(&self, _path: &Path) -> io::Result<Option<PathBuf>> {
        Err(io::Error::other("disk full"))
    }
}

/// Records the paths it is asked to back up.
#[derive(Debug, Default)]
struct Recording(Mutex<Vec<(PathBuf, String)>>);

impl BackupStrategy for Recording {
    fn backup(&self, path: &Path) -> io::Result<Option<PathBuf>> {
        let content = std::fs::read_to_string(path)?;
        self.0.lock().unwrap().push((path.to_owned(), content));
        Ok(None)
    }
}

#[test]
fn failing_backup_aborts_the_write() {
    let tmp = TempDir::new("failing_backup");
    let path = tmp.join("out.txt");
    write_atomic(&path, b"old", &NoBackup).unwrap();
    let err = write_atomic(&path, b"new", &Failing).unwrap_err();
    // Spec §11's `Backup failed for '<path>': <err>` is the error followed by its source.
    assert_eq!(
        err.to_string(),
        format!("Backup failed for '{}'", path.display())
    );
    assert_eq!(
        std::error::Error::source(&err).map(ToString::to_string),
        Some("disk full".to_owned())
    );
    assert_eq!(read(&path), "old");
    // No temporary file left, no lock file.
    assert_eq!(entries(tmp.path()), ["out.txt"]);

    // Through a store.
    let chat = tmp.join("c.chat");
    let store = Store::new(&options(), Some(&chat), "1")
        .unwrap()
        .with_backup(Arc::new(Failing));
    let stored = store.write_result(&tid("i"), None, "first").unwrap();
    let err = store.write_result(&tid("i"), None, "second").unwrap_err();
    assert_eq!(
        format!("{err}: {}", std::error::Error::source(&err).unwrap()),
        format!("Backup failed for '{}': disk full", stored.display())
    );
    assert_eq!(read(&stored), "first");
}

#[test]
fn custom_backup_runs_only_on_existing_files_before_the_write() {
    let tmp = TempDir::new("custom_backup");
    let path = tmp.join("out.txt");
    let recording = Arc::new(Recording::default());
    let store = Store::new(
        &crate::options_with_format(&format!("{}/out.txt", tmp.path().display())),
        Some(&tmp.join("c.chat")),
        "1",
    )
    .unwrap()
    .with_backup(recording.clone());
    store.write_result(&tid("i"), None, "one").unwrap();
    assert!(recording.0.lock().unwrap().is_empty());
    store.write_result(&tid("i"), None, "two").unwrap();
    store.write_result(&tid("i"), None, "three").unwrap();
    assert_eq!(
        *recording.0.lock().unwrap(),
        [
            (path.clone(), "one".to_owned()),
            (path.clone(), "two".to_owned())
        ]
    );
    assert_eq!(read(&path), "three");
}
