//! Ids too long for a file name: the store shortens the name deterministically (a readable
//! prefix and a hash of the whole name) and keeps it within `NAME_MAX`, backups and temporary
//! files included.

use std::path::Path;

use flemma_store::{MAX_FILE_NAME, Store, VersionBackup, shorten};
use pretty_assertions::assert_eq;

use crate::{TempDir, entries, options, read, tid, tn};

/// `NAME_MAX` on Linux and macOS file systems.
const NAME_MAX: usize = 255;

fn file_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

fn chat_store(dir: &TempDir) -> Store {
    Store::new(&options(), Some(&dir.join("c.chat")), "1")
        .unwrap()
        .with_backup(std::sync::Arc::new(VersionBackup))
}

#[test]
fn a_300_character_id_is_stored_under_a_short_name_that_lookups_find() {
    let dir = TempDir::new("long-id");
    let store = chat_store(&dir);
    let id = tid(&"a".repeat(300));
    let content = "line\n".repeat(200_000);
    let written = store
        .write_result(&id, Some(&tn("bash")), &content)
        .unwrap();
    assert_eq!(read(&written), content);
    // The lookup by id renders the same name.
    assert_eq!(store.path_for(&id, Some(&tn("bash"))).unwrap(), written);
    let name = file_name(&written);
    assert!(name.len() <= MAX_FILE_NAME, "{} bytes: {name}", name.len());
    assert!(name.starts_with("tool_bash_aaaa"), "{name}");
    assert!(
        Path::new(&name).extension().is_some_and(|e| e == "txt"),
        "{name}"
    );
    // A second write keeps a version backup, also within NAME_MAX.
    store
        .write_result(&id, Some(&tn("bash")), "second")
        .unwrap();
    assert_eq!(read(&written), "second");
    let names = entries(written.parent().unwrap());
    assert_eq!(names.len(), 2, "{names:?}");
    for name in &names {
        assert!(name.len() <= NAME_MAX, "{name}");
    }
    let backup = VersionBackup::versioned(&written, 1);
    assert_eq!(read(&backup), content);
}

#[test]
fn unicode_ids_are_shortened_on_a_character_boundary() {
    let dir = TempDir::new("unicode-id");
    let store = chat_store(&dir);
    // Each `é` escapes to `----` (two bytes, two `--`): 600 bytes of name from 150 characters.
    for id in [
        "é".repeat(150),
        format!("x{}", "日本".repeat(100)),
        "🦀".repeat(80),
    ] {
        let id = tid(&id);
        let written = store.write_result(&id, Some(&tn("bash")), "out").unwrap();
        assert_eq!(read(&written), "out");
        assert_eq!(store.path_for(&id, Some(&tn("bash"))).unwrap(), written);
        let name = file_name(&written);
        assert!(name.len() <= MAX_FILE_NAME, "{} bytes: {name}", name.len());
    }
}

#[test]
fn ids_sharing_a_long_prefix_get_different_names() {
    let dir = TempDir::new("prefix-id");
    let store = chat_store(&dir);
    let prefix = "p".repeat(400);
    let ids = [
        format!("{prefix}1"),
        format!("{prefix}2"),
        format!("{prefix}12"),
        format!("1{prefix}"),
    ];
    let mut paths = Vec::new();
    for id in &ids {
        let path = store.write_result(&tid(id), Some(&tn("bash")), id).unwrap();
        paths.push(path);
    }
    for (id, path) in ids.iter().zip(&paths) {
        assert_eq!(&read(path), id, "one id's output overwrote another's");
    }
    let mut names: Vec<String> = paths.iter().map(|p| file_name(p)).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), ids.len(), "{names:?}");
}

#[test]
fn short_names_are_unchanged_and_shortening_is_deterministic() {
    assert_eq!(
        shorten("tool_bash_toolu_01.txt", MAX_FILE_NAME),
        "tool_bash_toolu_01.txt"
    );
    let long = format!("tool_bash_{}.txt", "z".repeat(300));
    let once = shorten(&long, MAX_FILE_NAME);
    assert_eq!(once, shorten(&long, MAX_FILE_NAME));
    assert_eq!(once.len(), MAX_FILE_NAME);
    assert!(
        once.ends_with(".txt") && once.starts_with("tool_bash_zzz"),
        "{once}"
    );
    // The hash covers the whole name: a change past the prefix changes it.
    let other = format!("tool_bash_{}y.txt", "z".repeat(299));
    assert_ne!(once, shorten(&other, MAX_FILE_NAME));
}

#[test]
fn a_long_flattened_state_path_is_shortened_too() {
    // `$state` flattens the chat's absolute path into one directory name, which can pass
    // NAME_MAX for a deep project.
    let dir = TempDir::new("state-long");
    let deep = dir.join(format!("{}/{}/c.chat", "d".repeat(200), "e".repeat(200)));
    let mut options = options();
    "$state".clone_into(&mut options.path_format);
    let home = dir.path().to_string_lossy().into_owned();
    let store = Store::new(&options, Some(&deep), "1")
        .unwrap()
        .with_env(crate::env(&[("HOME", home.as_str())]));
    let written = store
        .write_result(&tid("toolu_01"), Some(&tn("bash")), "ok")
        .unwrap();
    assert_eq!(read(&written), "ok");
    for component in written.components() {
        assert!(
            component.as_os_str().len() <= NAME_MAX,
            "{}",
            written.display()
        );
    }
}
