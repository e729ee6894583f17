//! A store's writes go through its [`StoreWrites`]: every whole write (results, materialised
//! results, `flemma.save_to`, and their async forms) and nothing else.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flemma_store::{BackupStrategy, ResultBody, SaveOutcome, Store, StoreError, StoreWrites};
use pretty_assertions::assert_eq;

use crate::{TempDir, options, tid, tn};

/// Keeps the writes in memory: nothing reaches the disk.
#[derive(Debug, Default)]
struct Memory(Mutex<Vec<(PathBuf, String)>>);

impl StoreWrites for Memory {
    fn write(
        &self,
        path: &Path,
        content: &[u8],
        _backup: &dyn BackupStrategy,
    ) -> Result<PathBuf, StoreError> {
        let text = String::from_utf8_lossy(content).into_owned();
        self.0.lock().unwrap().push((path.to_owned(), text));
        Ok(path.to_owned())
    }
}

fn store(tmp: &TempDir, writes: &Arc<Memory>) -> Store {
    let mut options = options();
    options.materialize = true;
    Store::new(&options, Some(&tmp.join("example.chat")), "1")
        .unwrap()
        .with_writes(Arc::clone(writes) as Arc<dyn StoreWrites>)
}

#[test]
fn every_whole_write_goes_through_the_writes() {
    let tmp = TempDir::new("writes_trait");
    let writes = Arc::new(Memory::default());
    let store = store(&tmp, &writes);
    let (id, name) = (tid("toolu_01"), tn("bash"));
    store.write_result(&id, Some(&name), "full").unwrap();
    let body = ResultBody::Success { output: "done" };
    store.materialize(&id, Some(&name), &body).unwrap();
    let SaveOutcome::Saved { path, .. } = store.save_to("out.txt", "saved", None) else {
        panic!("not saved");
    };
    assert_eq!(path, tmp.join("out.txt"));
    let result = tmp.join(".flemma/example.chat/tool_bash_toolu_01.txt");
    assert_eq!(
        *writes.0.lock().unwrap(),
        [
            (result.clone(), "full".to_owned()),
            (result, "done".to_owned()),
            (tmp.join("out.txt"), "saved".to_owned()),
        ]
    );
    // Nothing on disk: the store directory was never made.
    assert!(!tmp.join(".flemma").exists());
    assert!(!tmp.join("out.txt").exists());
}

#[cfg(feature = "tokio")]
#[test]
fn the_async_writes_go_through_the_writes() {
    let tmp = TempDir::new("writes_trait_async");
    let writes = Arc::new(Memory::default());
    let store = store(&tmp, &writes);
    let (id, name) = (tid("toolu_01"), tn("bash"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(store.write_result_async(&id, Some(&name), "full".to_owned()))
        .unwrap();
    let saved = rt.block_on(store.save_to_async("out.txt", "saved".to_owned(), None));
    assert!(matches!(saved, SaveOutcome::Saved { .. }));
    let written: Vec<String> = writes
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!(written, ["full", "saved"]);
    assert!(!tmp.join("out.txt").exists());
}

/// Notes the files streaming writes install.
#[derive(Debug, Default)]
struct Told(Mutex<Vec<PathBuf>>);

impl StoreWrites for Told {
    fn write(
        &self,
        path: &Path,
        content: &[u8],
        backup: &dyn BackupStrategy,
    ) -> Result<PathBuf, StoreError> {
        flemma_store::write_atomic(path, content, backup)
    }

    fn installed(&self, path: &Path) {
        self.0.lock().unwrap().push(path.to_owned());
    }
}

#[test]
fn a_streaming_write_tells_the_writes_once_installed_and_not_before() {
    let tmp = TempDir::new("writes_installed");
    let told = Arc::new(Told::default());
    let store = Store::new(&options(), Some(&tmp.join("example.chat")), "1")
        .unwrap()
        .with_writes(Arc::clone(&told) as Arc<dyn StoreWrites>);
    let (id, name) = (tid("toolu_02"), tn("bash"));
    let mut writer = store.result_writer(&id, Some(&name)).unwrap();
    writer.write(b"streamed").unwrap();
    assert!(told.0.lock().unwrap().is_empty());
    let path = writer.commit().unwrap();
    assert_eq!(*told.0.lock().unwrap(), std::slice::from_ref(&path));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "streamed");
    // A writer dropped without committing installs nothing and tells nothing.
    let mut dropped = store.result_writer(&tid("toolu_03"), Some(&name)).unwrap();
    dropped.write(b"lost").unwrap();
    drop(dropped);
    assert_eq!(told.0.lock().unwrap().len(), 1);
}
