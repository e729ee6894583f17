//! Spec §11.6: `flemma.save_to` redirects — destinations, directory rejection, the sandbox,
//! the stub and the failure notice.

use std::fs;
use std::path::{Path, PathBuf};

use flemma_store::{SaveOutcome, Store, StoreError, WritablePaths};
use pretty_assertions::assert_eq;

use crate::{TempDir, env, options, read};

/// A conversation `notes/example.chat` in `tmp`, with `HOME` = `tmp/home`.
fn chat_store(tmp: &TempDir) -> Store {
    let home = tmp.join("home");
    Store::new(&options(), Some(&tmp.join("notes/example.chat")), "1")
        .unwrap()
        .with_env(env(&[("HOME", home.to_str().unwrap())]))
}

fn saved(outcome: SaveOutcome) -> (PathBuf, String) {
    match outcome {
        SaveOutcome::Saved { path, stub } => (path, stub),
        SaveOutcome::NotSaved { error, .. } => panic!("not saved: {error}"),
    }
}

fn not_saved(outcome: SaveOutcome) -> (String, StoreError) {
    match outcome {
        SaveOutcome::NotSaved { content, error } => (content, error),
        SaveOutcome::Saved { path, .. } => panic!("saved to {}", path.display()),
    }
}

fn notice(content: &str, reason: &str) -> String {
    format!("{content}\n\n[Output not saved: {reason}. Showing the full output instead.]")
}

#[test]
fn relative_destination_is_under_the_chat_directory() {
    let tmp = TempDir::new("save_relative");
    let store = chat_store(&tmp);
    let dest = tmp.join("notes/out/report.txt");
    assert_eq!(store.save_to_destination("out/report.txt").unwrap(), dest);
    let (path, stub) = saved(store.save_to("out/report.txt", "line 1\nline 2", None));
    assert_eq!(path, dest);
    assert_eq!(read(&dest), "line 1\nline 2");
    assert_eq!(
        stub,
        format!(
            "line 1\nline 2\n\n[Output saved: {} \u{2014} 13B, 2 lines]",
            dest.display()
        )
    );
    // `..` climbs from the chat directory.
    assert_eq!(
        store.save_to_destination("../up.txt").unwrap(),
        tmp.join("up.txt")
    );
    assert_eq!(
        store.save_to_destination("./a/../b.txt").unwrap(),
        tmp.join("notes/b.txt")
    );
}

/// Writes into a user's project leave the target and its versions there, nothing else (no lock
/// file, no temporary file); the store directory is not even created.
#[test]
fn a_user_directory_gets_only_the_target_and_its_versions() {
    let tmp = TempDir::new("save_user_dir");
    let store = chat_store(&tmp);
    fs::create_dir_all(tmp.join("notes/src")).unwrap();
    fs::write(tmp.join("notes/src/main.rs"), "fn main() {}").unwrap();
    for run in ["one", "two", "three"] {
        saved(store.save_to("src/report.txt", run, None));
    }
    assert_eq!(
        crate::entries(&tmp.join("notes/src")),
        ["main.rs", "report.1.txt", "report.2.txt", "report.txt"]
    );
    assert_eq!(read(&tmp.join("notes/src/report.1.txt")), "one");
    assert_eq!(read(&tmp.join("notes/src/report.txt")), "three");
    // The chat's directory holds what it held: the new `src` and nothing of the store.
    assert_eq!(crate::entries(&tmp.join("notes")), ["src"]);
}

#[test]
fn home_and_absolute_destinations() {
    let tmp = TempDir::new("save_home_abs");
    let store = chat_store(&tmp);
    let (path, _) = saved(store.save_to("~/r.txt", "home", None));
    assert_eq!(path, tmp.join("home/r.txt"));
    assert_eq!(read(&path), "home");

    let absolute = tmp.join("abs/r.txt");
    let (path, _) = saved(store.save_to(absolute.to_str().unwrap(), "abs", None));
    assert_eq!(path, absolute);
    assert_eq!(read(&absolute), "abs");

    // Variables expand, then `~`.
    let store = Store::new(&options(), Some(&tmp.join("notes/example.chat")), "1")
        .unwrap()
        .with_env(env(&[
            ("HOME", tmp.join("home").to_str().unwrap()),
            ("OUT", "~/out"),
        ]));
    assert_eq!(
        store.save_to_destination("$OUT/x.txt").unwrap(),
        tmp.join("home/out/x.txt")
    );
}

#[test]
fn a_chat_path_with_tilde_resolves_relative_destinations_under_home() {
    let tmp = TempDir::new("save_tilde_chat");
    let store = Store::new(&options(), Some(Path::new("~/notes/example.chat")), "1")
        .unwrap()
        .with_env(env(&[("HOME", tmp.path().to_str().unwrap())]));
    assert_eq!(
        store.save_to_destination("out/r.txt").unwrap(),
        tmp.join("notes/out/r.txt")
    );
}

#[test]
fn unsaved_buffers_keep_relative_destinations_relative() {
    let store = Store::new(&options(), None, "1")
        .unwrap()
        .with_env(env(&[]));
    assert_eq!(
        store.save_to_destination("out/r.txt").unwrap(),
        PathBuf::from("out/r.txt")
    );
    assert_eq!(
        store.save_to_destination("../../r.txt").unwrap(),
        PathBuf::from("../../r.txt")
    );
}

#[test]
fn directories_are_refused() {
    let tmp = TempDir::new("save_directories");
    let store = chat_store(&tmp);
    fs::create_dir_all(tmp.join("notes/existing")).unwrap();
    fs::create_dir_all(tmp.join("home")).unwrap();
    // Another spelling of the chat directory.
    std::os::unix::fs::symlink(tmp.join("notes"), tmp.join("link")).unwrap();
    let store_dir = tmp.join("notes/.flemma/example.chat");
    let cases: Vec<(String, PathBuf)> = vec![
        // The store directory itself (not created yet) and its ancestors.
        (store_dir.to_str().unwrap().to_owned(), store_dir.clone()),
        ("$FLEMMA_TOOLS_STORE_PATH".to_owned(), store_dir.clone()),
        (".flemma".to_owned(), tmp.join("notes/.flemma")),
        (".".to_owned(), tmp.join("notes")),
        (
            tmp.join("link/.flemma").to_str().unwrap().to_owned(),
            tmp.join("link/.flemma"),
        ),
        // `~` alone is the home directory.
        ("~".to_owned(), tmp.join("home")),
        ("/".to_owned(), PathBuf::from("/")),
        // An existing directory.
        ("existing".to_owned(), tmp.join("notes/existing")),
        // A trailing slash.
        ("newdir/".to_owned(), tmp.join("notes/newdir/")),
        ("existing/".to_owned(), tmp.join("notes/existing/")),
    ];
    for (save_to, dest) in cases {
        let (content, error) = not_saved(store.save_to(&save_to, "body", None));
        let reason = format!(
            "save_to target '{}' is a directory \u{2014} append a filename",
            dest.display()
        );
        assert_eq!(error.to_string(), reason, "{save_to}");
        assert!(
            matches!(error, StoreError::SaveToDirectory { .. }),
            "{save_to}"
        );
        assert_eq!(content, notice("body", &reason), "{save_to}");
    }
    assert!(!tmp.join("notes/newdir").exists());
    assert!(!tmp.join("notes/.flemma").exists());
    assert!(crate::entries(&tmp.join("notes/existing")).is_empty());
}

#[test]
fn sandbox_refuses_destinations_outside_writable_paths() {
    let tmp = TempDir::new("save_sandbox");
    let store = chat_store(&tmp);
    let allowed = tmp.join("allowed");
    fs::create_dir_all(&allowed).unwrap();
    let policy = |p: &Path| p.starts_with(&allowed);

    let inside = allowed.join("sub/ok.txt");
    let (path, _) = saved(store.save_to(inside.to_str().unwrap(), "ok", Some(&policy)));
    assert_eq!(path, inside);
    assert_eq!(read(&inside), "ok");

    let outside = tmp.join("other/x.txt");
    let (content, error) =
        not_saved(store.save_to(outside.to_str().unwrap(), "body", Some(&policy)));
    let reason = format!(
        "save_to destination '{}' is not writable under sandbox policy",
        outside.display()
    );
    assert_eq!(error.to_string(), reason);
    assert_eq!(content, notice("body", &reason));
    assert!(!tmp.join("other").exists());

    // Relative to the chat directory, which is not writable.
    let (_, error) = not_saved(store.save_to("r.txt", "body", Some(&policy)));
    assert!(matches!(error, StoreError::NotWritable { .. }), "{error}");
    assert!(!tmp.join("notes/r.txt").exists());

    // Without a sandbox the same write goes through.
    saved(store.save_to("r.txt", "body", None));
}

#[test]
fn sandbox_follows_symlinks_out_of_writable_paths() {
    let tmp = TempDir::new("save_symlink");
    let store = chat_store(&tmp);
    let allowed = tmp.join("allowed");
    let outside = tmp.join("outside");
    fs::create_dir_all(&allowed).unwrap();
    fs::create_dir_all(&outside).unwrap();
    let policy = |p: &Path| p.starts_with(&allowed);

    // A directory link.
    std::os::unix::fs::symlink(&outside, allowed.join("dirlink")).unwrap();
    let dest = allowed.join("dirlink/x.txt");
    let (_, error) = not_saved(store.save_to(dest.to_str().unwrap(), "body", Some(&policy)));
    assert_eq!(
        error.to_string(),
        format!(
            "save_to destination '{}' is not writable under sandbox policy",
            dest.display()
        )
    );
    let dest = allowed.join("dirlink/deeper/x.txt");
    not_saved(store.save_to(dest.to_str().unwrap(), "body", Some(&policy)));
    assert!(crate::entries(&outside).is_empty());

    // A file link.
    fs::write(outside.join("target.txt"), "precious").unwrap();
    std::os::unix::fs::symlink(outside.join("target.txt"), allowed.join("filelink.txt")).unwrap();
    let dest = allowed.join("filelink.txt");
    let (_, error) = not_saved(store.save_to(dest.to_str().unwrap(), "body", Some(&policy)));
    assert!(matches!(error, StoreError::NotWritable { .. }), "{error}");
    assert_eq!(read(&outside.join("target.txt")), "precious");
}

#[test]
fn closures_are_writable_paths() {
    let allowed = PathBuf::from("/a");
    let policy = |p: &Path| p.starts_with(&allowed);
    assert!(policy.is_writable(Path::new("/a/b")));
    assert!(!policy.is_writable(Path::new("/b")));
}

fn store_with_preview(tmp: &TempDir, lines: u64, bytes: u64) -> Store {
    let mut options = options();
    options.preview.lines = lines;
    options.preview.bytes = bytes;
    Store::new(&options, Some(&tmp.join("example.chat")), "1").unwrap()
}

#[test]
fn stub_preview() {
    let tmp = TempDir::new("save_stub");
    let lines: Vec<String> = (1..=20).map(|i| format!("line {i}")).collect();
    let content = lines.join("\n");
    let content = content.as_str();
    let dest = tmp.join("out.txt");
    let notice = format!(
        "[Output saved: {} \u{2014} {}B, 20 lines]",
        dest.display(),
        content.len()
    );

    // Default: 10 lines.
    let (_, stub) = saved(store_with_preview(&tmp, 10, 2048).save_to("out.txt", content, None));
    let head: Vec<String> = (1..=10).map(|i| format!("line {i}")).collect();
    assert_eq!(stub, format!("{}\n\n{notice}", head.join("\n")));

    // lines = 0: only the notice.
    let (_, stub) = saved(store_with_preview(&tmp, 0, 2048).save_to("out.txt", content, None));
    assert_eq!(stub, notice);

    // The byte limit keeps whole lines: "line 1\nline 2" is 13 bytes.
    let (_, stub) = saved(store_with_preview(&tmp, 10, 15).save_to("out.txt", content, None));
    assert_eq!(stub, format!("line 1\nline 2\n\n{notice}"));

    // Sizes above a kilobyte.
    let big = "x".repeat(51_200);
    let (path, stub) = saved(store_with_preview(&tmp, 0, 2048).save_to("big.txt", &big, None));
    assert_eq!(
        stub,
        format!(
            "[Output saved: {} \u{2014} 50.0KB, 1 lines]",
            path.display()
        )
    );
    assert_eq!(read(&path), big);
    // The configured backup (`version`) kept the earlier saves.
    assert_eq!(read(&tmp.join("out.1.txt")), content);
}

#[test]
fn failure_keeps_the_full_content() {
    let tmp = TempDir::new("save_failure");
    let store = chat_store(&tmp);
    fs::create_dir_all(tmp.join("notes")).unwrap();
    fs::write(tmp.join("notes/file"), "a file").unwrap();
    let content = "all\nof\nit";
    let (kept, error) = not_saved(store.save_to("file/sub/x.txt", content, None));
    let reason = format!(
        "Failed to create directory '{}'",
        tmp.join("notes/file/sub").display()
    );
    assert_eq!(error.to_string(), reason);
    // The model reads the cause too (spec §11.4: `Failed to write '<path>': <err>`).
    let cause = std::error::Error::source(&error).unwrap().to_string();
    assert!(cause.contains("Not a directory"), "{cause}");
    assert_eq!(kept, notice(content, &format!("{reason}: {cause}")));
    assert_eq!(read(&tmp.join("notes/file")), "a file");
}

#[test]
fn config_errors_inside_save_to_keep_the_content() {
    let tmp = TempDir::new("save_config_error");
    let store = Store::new(
        &crate::options_with_format("/s/{{ nope }}"),
        Some(&tmp.join("example.chat")),
        "1",
    )
    .unwrap();
    let (kept, error) = not_saved(store.save_to("out.txt", "body", None));
    let reason = error.to_string();
    assert!(
        reason.starts_with("Invalid store path format '/s/{{ nope }}': "),
        "{reason}"
    );
    assert_eq!(kept, notice("body", &reason));
    assert!(!tmp.join("out.txt").exists());
}
