//! Feature `tokio`: the async writes run off the runtime's threads and behave as the blocking
//! ones.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flemma_store::{BackupStrategy, ResultBody, SaveOutcome, Store};
use pretty_assertions::assert_eq;
use tokio::runtime::{Builder, Runtime};

use crate::{TempDir, entries, options, read, tid, tn};

/// One thread: a write that blocked it would block everything else.
fn runtime() -> Runtime {
    Builder::new_current_thread().build().unwrap()
}

fn chat_store(tmp: &TempDir) -> Store {
    let mut options = options();
    options.materialize = true;
    Store::new(&options, Some(&tmp.join("notes/example.chat")), "1").unwrap()
}

fn is_send<T: Send>(value: T) -> T {
    value
}

#[test]
fn writes_as_the_blocking_forms_do() {
    let tmp = TempDir::new("async_writes");
    let store = chat_store(&tmp);
    let (id, name) = (tid("toolu_01"), tn("bash"));
    let rt = runtime();

    let path = rt
        .block_on(is_send(store.write_result_async(
            &id,
            Some(&name),
            "one".to_owned(),
        )))
        .unwrap();
    assert_eq!(path, store.path_for(&id, Some(&name)).unwrap());
    let failed = ResultBody::Error {
        error: "exit 1",
        partial_output: Some("two"),
    };
    let materialized = rt
        .block_on(is_send(store.materialize_async(&id, Some(&name), &failed)))
        .unwrap();
    assert_eq!(materialized, Some(path.clone()));
    assert_eq!(read(&path), failed.render());
    assert_eq!(
        entries(path.parent().unwrap()),
        ["tool_bash_toolu_01.1.txt", "tool_bash_toolu_01.txt"]
    );

    // Off: nothing written.
    let off = Store::new(&options(), Some(&tmp.join("off/example.chat")), "1").unwrap();
    assert_eq!(
        rt.block_on(off.materialize_async(&id, Some(&name), &failed))
            .unwrap(),
        None
    );
    assert!(!tmp.join("off").exists());
}

#[test]
fn save_to_async_gives_the_same_stub_and_leaves_only_the_target() {
    let tmp = TempDir::new("async_save_to");
    let store = chat_store(&tmp);
    let rt = runtime();
    let writable = |path: &Path| path.starts_with(tmp.path());
    let outcome = rt.block_on(is_send(store.save_to_async(
        "out/report.txt",
        "line 1\nline 2".to_owned(),
        Some(&writable),
    )));
    let SaveOutcome::Saved { path, stub } = outcome else {
        panic!("not saved: {outcome:?}");
    };
    let SaveOutcome::Saved { stub: expected, .. } =
        store.save_to("out/report.txt", "line 1\nline 2", None)
    else {
        panic!("the blocking form did not save");
    };
    assert_eq!(stub, expected);
    assert_eq!(path, tmp.join("notes/out/report.txt"));
    assert_eq!(
        entries(&tmp.join("notes/out")),
        ["report.1.txt", "report.txt"]
    );

    // Refused: the content comes back with the notice, as from the blocking form.
    let refuse = |_: &Path| false;
    let outcome = rt.block_on(store.save_to_async("x.txt", "full".to_owned(), Some(&refuse)));
    let SaveOutcome::NotSaved { content, error } = outcome else {
        panic!("saved: {outcome:?}");
    };
    assert!(content.starts_with("full\n\n[Output not saved: save_to destination"));
    assert!(
        matches!(error, flemma_store::StoreError::NotWritable { .. }),
        "{error:?}"
    );
    // A failed write (the destination's parent is a file): the content comes back too.
    std::fs::write(tmp.join("notes/file"), "").unwrap();
    let outcome = rt.block_on(store.save_to_async("file/x.txt", "full".to_owned(), None));
    let SaveOutcome::NotSaved { content, error } = outcome else {
        panic!("saved: {outcome:?}");
    };
    let cause = std::error::Error::source(&error).unwrap();
    assert_eq!(
        content,
        format!("full\n\n[Output not saved: {error}: {cause}. Showing the full output instead.]")
    );
}

/// A backup that tells when it started and then waits to be let go.
#[derive(Debug)]
struct Gate {
    started: Mutex<Sender<()>>,
    go: Mutex<Receiver<()>>,
}

impl BackupStrategy for Gate {
    fn backup(&self, _path: &Path) -> io::Result<Option<PathBuf>> {
        let _ = self.started.lock().unwrap().send(());
        match self
            .go
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(10))
        {
            Ok(()) => Ok(None),
            Err(_) => Err(io::Error::other(
                "never let go: the write blocked the runtime",
            )),
        }
    }
}

/// While a write waits in its backup, the runtime's only thread keeps running other tasks:
/// here the one that lets the write go on.
#[test]
fn a_write_in_progress_does_not_block_the_runtime() {
    let tmp = TempDir::new("async_not_blocking");
    let (started_tx, started) = channel();
    let (go, go_rx) = channel();
    let gate = Arc::new(Gate {
        started: Mutex::new(started_tx),
        go: Mutex::new(go_rx),
    });
    let store = chat_store(&tmp).with_backup(gate);
    // The first write has nothing to back up: the gate stays out of it.
    store.write_result(&tid("i"), None, "old").unwrap();
    let rt = runtime();
    let written = rt.block_on(async move {
        let writer = tokio::spawn(async move {
            store
                .write_result_async(&tid("i"), None, "new".to_owned())
                .await
        });
        // Wait, on the runtime, for the write to reach its backup, then let it go.
        while started.try_recv().is_err() {
            tokio::task::yield_now().await;
        }
        go.send(()).unwrap();
        writer.await.unwrap()
    });
    assert_eq!(read(&written.unwrap()), "new");
}

#[test]
fn a_panicking_backup_panics_the_awaiting_task() {
    #[derive(Debug)]
    struct Panics;
    impl BackupStrategy for Panics {
        fn backup(&self, _path: &Path) -> io::Result<Option<PathBuf>> {
            panic!("backup panicked");
        }
    }
    let tmp = TempDir::new("async_panic");
    let store = chat_store(&tmp).with_backup(Arc::new(Panics));
    store.write_result(&tid("i"), None, "old").unwrap();
    let rt = runtime();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(store.write_result_async(&tid("i"), None, "new".to_owned()))
    }));
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"backup panicked"));
    assert_eq!(read(&store.path_for(&tid("i"), None).unwrap()), "old");
}
