//! Issue 34: a worker gives each conversation a directory of its own, so the sandbox of one
//! (its directory and its store) never covers another's files, results, claims or job files,
//! whatever their keys.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_core::sandbox::SandboxPolicy;
use flemma_object::object_store::path::Path as ObjectPath;
use flemma_object::{Bucket, local_path};

/// A scratch directory outside `/tmp` and `$TMPDIR`, which every conversation may write: the
/// target's when the checkout is elsewhere, else `/var/tmp`.
fn outside_the_temporary_directories() -> PathBuf {
    let temporary: Vec<PathBuf> = ["/tmp".into(), std::env::temp_dir()]
        .iter()
        .filter_map(|p: &PathBuf| p.canonicalize().ok())
        .collect();
    [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
    ]
    .into_iter()
    .filter_map(|p| p.canonicalize().ok())
    .find(|p| !temporary.iter().any(|t| p.starts_with(t)))
    .unwrap_or_else(|| panic!("no scratch directory outside /tmp and $TMPDIR"))
}

#[test]
fn each_conversation_writes_in_a_directory_of_its_own() {
    // Outside the temporary directories, which every conversation may write.
    let workdir = outside_the_temporary_directories()
        .join(format!("flemma-object-layout-{}", std::process::id()));
    let bucket = Bucket::with_store(
        "chats",
        Arc::new(flemma_object::object_store::memory::InMemory::new()),
    );
    let keys = [
        "team/a.chat",
        "team/b.chat",
        "team/a.chat/nested.chat",
        "team%2Fa.chat",
    ];
    let paths: Vec<PathBuf> = keys
        .iter()
        .map(|k| local_path(&workdir, &bucket, &ObjectPath::from(*k)).unwrap())
        .collect();
    assert_eq!(paths[0], workdir.join("chats/team%2Fa.chat/a.chat"));
    let store = |chat: &Path| {
        chat.parent()
            .unwrap()
            .join(".flemma")
            .join(chat.file_name().unwrap())
    };
    let options = flemma_config::Config::new().options().unwrap().sandbox;
    for (i, path) in paths.iter().enumerate() {
        let policy = SandboxPolicy::for_conversation(&options, Some(path), Some(&store(path)));
        assert!(policy.allows_write(&path.with_file_name("notes.txt"), &workdir));
        for (j, other) in paths.iter().enumerate().filter(|(j, _)| *j != i) {
            for target in [other.clone(), store(other).join("calls/x.json")] {
                assert!(
                    !policy.allows_write(&target, &workdir),
                    "{} may write {} ({})",
                    keys[i],
                    target.display(),
                    keys[j]
                );
            }
        }
    }
    // A long key: one directory name within NAME_MAX.
    let long = "d/".repeat(200) + "x.chat";
    let path = local_path(&workdir, &bucket, &ObjectPath::from(long.as_str())).unwrap();
    let flat = path.parent().unwrap().file_name().unwrap().len();
    assert!(flat <= 200, "{flat}");
    let _ = std::fs::remove_dir_all(&workdir);
}
