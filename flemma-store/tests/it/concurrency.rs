//! Concurrent writers of one path take turns: with `version` backups no run is lost.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};

use flemma_store::{VersionBackup, write_atomic};
use pretty_assertions::assert_eq;

use crate::{TempDir, entries, read};

const THREADS: usize = 8;
const WRITES: usize = 50;

#[test]
fn eight_threads_fifty_writes_keep_every_run() {
    let tmp = TempDir::new("concurrency");
    let path = tmp.join("out.txt");
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let path = path.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                for i in 0..WRITES {
                    let content = format!("thread {t} write {i}");
                    assert_eq!(
                        write_atomic(&path, content.as_bytes(), &VersionBackup).unwrap(),
                        path
                    );
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }

    let expected: BTreeSet<String> = (0..THREADS)
        .flat_map(|t| (0..WRITES).map(move |i| format!("thread {t} write {i}")))
        .collect();
    let mut found = BTreeSet::new();
    found.insert(read(&path));
    for n in 1..THREADS * WRITES {
        let version = tmp.join(format!("out.{n}.txt"));
        assert!(version.is_file(), "missing {}", version.display());
        assert!(
            found.insert(read(&version)),
            "duplicate run in {}",
            version.display()
        );
    }
    assert_eq!(found, expected);

    // Each thread's runs are versioned in its own order.
    for t in 0..THREADS {
        let order: Vec<usize> = (1..THREADS * WRITES)
            .map(|n| read(&tmp.join(format!("out.{n}.txt"))))
            .chain(std::iter::once(read(&path)))
            .filter_map(|c| {
                c.strip_prefix(&format!("thread {t} write "))
                    .map(|i| i.parse().unwrap())
            })
            .collect();
        assert_eq!(order, (0..WRITES).collect::<Vec<_>>(), "thread {t}");
    }

    // The canonical file, the 399 versions and nothing else: no lock file, no temporary.
    let names = entries(tmp.path());
    let stray: Vec<&String> = names
        .iter()
        .filter(|n| {
            *n != "out.txt"
                && !(n.starts_with("out.")
                    && crate::has_ext(n, "txt")
                    && n[4..n.len() - 4].parse::<usize>().is_ok())
        })
        .collect();
    assert!(stray.is_empty(), "left behind: {stray:?}");
    assert_eq!(names.len(), THREADS * WRITES);
}

/// Compare-and-swap writers of one path, each computing its change from what it read: every
/// change that was installed was computed from the text it replaced (a counter incremented
/// by eight threads ends at the number of installs), and a refused change leaves no
/// temporary file behind.
#[test]
fn compare_and_swap_writers_lose_no_install() {
    use flemma_store::{Replaced, replace_if_unchanged};
    let tmp = TempDir::new("cas");
    let path = tmp.join("counter.txt");
    std::fs::write(&path, "0").unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let path = path.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let mut installed = 0;
                for _ in 0..WRITES {
                    let old = std::fs::read_to_string(&path).unwrap();
                    let next = (old.parse::<u64>().unwrap() + 1).to_string();
                    match replace_if_unchanged(&path, old.as_bytes(), next.as_bytes()).unwrap() {
                        Replaced::Done(_) => installed += 1,
                        Replaced::Changed => {}
                        other => panic!("{other:?}"),
                    }
                }
                installed
            })
        })
        .collect();
    let installed: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(installed > 0);
    assert_eq!(read(&path), installed.to_string());
    assert_eq!(entries(tmp.path()), ["counter.txt"]);
}
