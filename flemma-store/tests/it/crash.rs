//! Crash safety: a writer killed with SIGKILL at any moment leaves the old content or the new
//! one, never a torn mix.
//!
//! The writer is this test binary re-run with [`CHILD_VAR`] set, running only
//! [`crash_child`] (ignored, so that it does not count as a test; the parent runs it with
//! `--ignored --exact`), which announces itself on stdout and then rewrites one file with large
//! generations in a loop until killed.

use std::fs;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use flemma_store::{NoBackup, write_atomic};

/// Set (to the file to rewrite) in the child; the child's first generation is in
/// [`START_VAR`].
const CHILD_VAR: &str = "FLEMMA_STORE_IT_CRASH_CHILD";
const START_VAR: &str = "FLEMMA_STORE_IT_CRASH_START";
const ROUNDS: u64 = 200;
/// The child's line on stdout once it is about to write.
const READY: &str = "flemma-store crash child ready";
const MB: usize = 1 << 20;

/// The marker byte of a generation: `A`-`Z`.
fn marker(generation: u64) -> u8 {
    b'A' + (generation % 26) as u8
}

/// A generation's length depends on its marker only: 1 MB to 4 MB.
fn length(marker: u8) -> usize {
    MB + usize::from(marker - b'A') * 3 * MB / 25
}

fn generation(generation: u64) -> Vec<u8> {
    let m = marker(generation);
    vec![m; length(m)]
}

/// `Ok(marker)` when `bytes` is exactly one generation's full content.
fn check(bytes: &[u8]) -> Result<u8, String> {
    let Some(&first) = bytes.first() else {
        return Err("empty file".into());
    };
    if !first.is_ascii_uppercase() {
        return Err(format!("unexpected first byte {first}"));
    }
    if let Some(at) = bytes.iter().position(|&b| b != first) {
        return Err(format!(
            "mixed content: {:?} then {:?} at byte {at}",
            char::from(first),
            char::from(bytes[at])
        ));
    }
    if bytes.len() != length(first) {
        return Err(format!(
            "generation {:?} has {} bytes, expected {}",
            char::from(first),
            bytes.len(),
            length(first)
        ));
    }
    Ok(first)
}

/// The child process of [`killed_writers_leave_old_or_new_content`], not a test: run on its
/// own (`--ignored`), it fails.
#[test]
#[ignore = "the writer process of killed_writers_leave_old_or_new_content, which runs it"]
fn crash_child() {
    let Some(path) = std::env::var_os(CHILD_VAR) else {
        panic!(
            "crash_child is run by killed_writers_leave_old_or_new_content, with {CHILD_VAR} set"
        );
    };
    let path = PathBuf::from(path);
    let mut next: u64 = std::env::var(START_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // Written straight to stdout, past the test harness's capture.
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{READY}").unwrap();
    stdout.flush().unwrap();
    // A bound, in case the parent dies without killing us.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        write_atomic(&path, &generation(next), &NoBackup).unwrap();
        next += 1;
    }
}

fn remove_temporaries(dir: &Path) -> usize {
    let mut removed = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name().to_string_lossy().ends_with(".tmp") {
            fs::remove_file(entry.path()).unwrap();
            removed += 1;
        }
    }
    removed
}

#[test]
fn killed_writers_leave_old_or_new_content() {
    let tmp = crate::TempDir::new("crash");
    let path = tmp.join("out.txt");
    write_atomic(&path, &generation(0), &NoBackup).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut previous = marker(0);
    let mut changed = 0;
    let mut torn_temporaries = 0;
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args([
                "crash::crash_child",
                "--exact",
                "--ignored",
                "--test-threads=1",
            ])
            .env(CHILD_VAR, &path)
            // Start on a marker other than the one on disk.
            .env(
                START_VAR,
                (u64::from(previous - b'A') + 1 + round).to_string(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        // The harness prints `test crash::crash_child ... ` before it, on the same line.
        while !line.contains(READY) {
            line.clear();
            let read = stdout.read_line(&mut line).unwrap();
            assert!(
                read > 0,
                "round {round}: the writer ended before starting ({:?})",
                child.wait()
            );
        }
        // 0 to 25 ms after the writer starts: in the middle of its first write, between two,
        // in a later one.
        std::thread::sleep(Duration::from_micros((round * 7_919) % 25_000));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        drop(stdout);
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the writer ended on its own ({status})"
        );
        let bytes = fs::read(&path).unwrap();
        let current = check(&bytes).unwrap_or_else(|e| panic!("round {round}: {e}"));
        if current != previous {
            changed += 1;
        }
        previous = current;
        torn_temporaries += remove_temporaries(tmp.path());
    }
    // The test means something only if writers were killed after some writes completed
    // and in the middle of others.
    assert!(changed > 0, "no writer ever completed a write");
    assert!(
        torn_temporaries > 0,
        "no writer was ever killed mid-write ({changed} rounds changed the file)"
    );
}
