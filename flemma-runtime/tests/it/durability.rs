//! `FileConversation`'s durability contract (the book's decision record 0086,
//! `docs/decisions/0086-durable-transcript.md`): durable changes are atomic rewrites,
//! `Buffered` appends are written in place and never touch the text before them, and a process
//! killed while writing leaves the old text or the new one (a durable change) or the old text and
//! a prefix of the appended lines (a buffered append).
//! A durable change to buffered text only is written in place and synced: killed, it leaves
//! the durable text and a prefix of the buffered text as it was or as it became.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use flemma_ast::TextEdit;
use flemma_core::{Conversation, ConversationError, Durability};
use flemma_runtime::FileConversation;

use crate::scratch::Scratch;

fn scratch(name: &str) -> Scratch {
    Scratch::new(format!("flemma-durability-{name}-{}", std::process::id()))
}

fn ino(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

/// The conversation in `path`, its file work on the blocking pool or, `inline`, on the
/// caller's thread ([`FileConversation::with_inline_io`]): the contract is the same.
fn open(path: &Path, inline: bool) -> FileConversation {
    let chat = FileConversation::new(path);
    if inline { chat.with_inline_io() } else { chat }
}

/// A scratch directory `name` holding `t.chat` (`@You:\nhi\n`), and its conversation.
fn hi_chat(name: &str, inline: bool) -> (Scratch, PathBuf, FileConversation) {
    let dir = scratch(name);
    let path = dir.join("t.chat");
    std::fs::write(&path, "@You:\nhi\n").unwrap();
    let chat = open(&path, inline);
    (dir, path, chat)
}

/// Replaces line `line` (1-based; 0: the last line) with `text`, as `durability` says.
async fn replace_line(chat: &FileConversation, line: u32, text: &str, durability: Durability) {
    let snapshot = chat.snapshot().await.unwrap();
    let line = if line == 0 {
        snapshot.text.lines().count() as u32
    } else {
        line
    };
    chat.apply(
        snapshot.revision,
        &[TextEdit::replace(line, line, vec![text.into()])],
        durability,
    )
    .await
    .unwrap();
}

async fn append(chat: &FileConversation, durability: Durability, line: &str) {
    let snapshot = chat.snapshot().await.unwrap();
    let end = snapshot.text.lines().count() as u32 + 1;
    chat.apply(
        snapshot.revision,
        &[TextEdit::insert(end, vec![line.into()])],
        durability,
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn buffered_appends_are_written_in_place_and_durable_changes_replace_the_file() {
    for inline in [false, true] {
        buffered_appends_are_written_in_place_and_durable_changes_replace_the_file_with(inline)
            .await;
    }
}

async fn buffered_appends_are_written_in_place_and_durable_changes_replace_the_file_with(
    inline: bool,
) {
    let dir = scratch(&format!("in-place-{inline}"));
    let path = dir.join("t.chat");
    std::fs::write(&path, "@You:\nhi\n").unwrap();
    let chat = open(&path, inline);
    let before = ino(&path);
    append(&chat, Durability::Buffered, "@Assistant:").await;
    append(&chat, Durability::Buffered, "hello").await;
    // In place: the same file, nothing beside it.
    assert_eq!(ino(&path), before);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\nhi\n@Assistant:\nhello\n"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    chat.sync().await.unwrap();
    // A durable append is an atomic rewrite: a new file renamed over it.
    append(&chat, Durability::Durable, "@You:").await;
    assert_ne!(ino(&path), before);
    // A buffered change that is not an append is rewritten too.
    let replaced = ino(&path);
    replace_line(&chat, 2, "bye", Durability::Buffered).await;
    assert_ne!(ino(&path), replaced);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\nbye\n@Assistant:\nhello\n@You:\n"
    );
}

/// A durable change that only touches text appended `Buffered` since the last durable point
/// is written in place (the same file, nothing beside it) and synced; one that reaches into
/// the durable text, or made when what is durable is not known (the file was only read), is an
/// atomic rewrite.
#[tokio::test]
async fn a_durable_change_to_buffered_text_only_is_written_in_place() {
    for inline in [false, true] {
        a_durable_change_to_buffered_text_only_is_written_in_place_with(inline).await;
    }
}

async fn a_durable_change_to_buffered_text_only_is_written_in_place_with(inline: bool) {
    let (dir, path, chat) = hi_chat(&format!("tail-{inline}"), inline);
    // The file was read, never made durable here: a rewrite.
    append(&chat, Durability::Buffered, "draft (approved)").await;
    let read_only = ino(&path);
    replace_line(&chat, 0, "draft", Durability::Durable).await;
    assert_ne!(ino(&path), read_only);
    // Durable now; appended to, then the appended line changed: in place.
    let durable = ino(&path);
    append(&chat, Durability::Buffered, "@Assistant:").await;
    append(&chat, Durability::Buffered, "call (approved)").await;
    replace_line(&chat, 0, "call", Durability::Durable).await;
    assert_eq!(ino(&path), durable);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\nhi\ndraft\n@Assistant:\ncall\n"
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    // All of it is durable now: a change to it is a rewrite, with or without appends after.
    append(&chat, Durability::Buffered, "more").await;
    replace_line(&chat, 5, "called", Durability::Durable).await;
    assert_ne!(ino(&path), durable);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\nhi\ndraft\n@Assistant:\ncalled\nmore\n"
    );
    // A change by another writer between the append and the change is never overwritten.
    append(&chat, Durability::Buffered, "mine (approved)").await;
    let snapshot = chat.snapshot().await.unwrap();
    let theirs = format!("{}edited\n", snapshot.text);
    std::fs::write(&path, &theirs).unwrap();
    let last = snapshot.text.lines().count() as u32;
    let edit = TextEdit::replace(last, last, vec!["mine".into()]);
    let stale = chat
        .apply(snapshot.revision, &[edit], Durability::Durable)
        .await;
    assert!(
        matches!(stale, Err(ConversationError::Stale { .. })),
        "{stale:?}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);
}

/// A change made by someone else between a snapshot and an append (same length, so only the
/// content shows it) is never appended to: the append is refused as stale, and the next
/// snapshot has the other writer's text at a new revision.
#[tokio::test]
async fn a_buffered_append_to_a_file_changed_meanwhile_is_refused() {
    for inline in [false, true] {
        a_buffered_append_to_a_file_changed_meanwhile_is_refused_with(inline).await;
    }
}

async fn a_buffered_append_to_a_file_changed_meanwhile_is_refused_with(inline: bool) {
    let dir = scratch(&format!("stale-{inline}"));
    let path = dir.join("t.chat");
    std::fs::write(&path, "@You:\nhi\n").unwrap();
    let chat = open(&path, inline);
    let snapshot = chat.snapshot().await.unwrap();
    std::fs::write(&path, "@You:\nho\n").unwrap();
    let refused = chat
        .apply(
            snapshot.revision,
            &[TextEdit::insert(3, vec!["x".into()])],
            Durability::Buffered,
        )
        .await;
    assert!(
        matches!(refused, Err(ConversationError::Stale { .. })),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "@You:\nho\n");
    let now = chat.snapshot().await.unwrap();
    assert_eq!(now.text.as_str(), "@You:\nho\n");
    assert!(now.revision > snapshot.revision);
}

/// The file changed by another writer after this conversation's own write is seen by the
/// next snapshot (its metadata changed), without a change of this conversation in between.
#[tokio::test]
async fn a_snapshot_sees_a_write_made_after_its_own() {
    for inline in [false, true] {
        a_snapshot_sees_a_write_made_after_its_own_with(inline).await;
    }
}

async fn a_snapshot_sees_a_write_made_after_its_own_with(inline: bool) {
    let dir = scratch(&format!("seen-{inline}"));
    let path = dir.join("t.chat");
    std::fs::write(&path, "@You:\nhi\n").unwrap();
    let chat = open(&path, inline);
    append(&chat, Durability::Buffered, "more").await;
    std::fs::write(&path, "@You:\nhi\nmore\nand the user's line\n").unwrap();
    let now = chat.snapshot().await.unwrap();
    assert_eq!(now.text.as_str(), "@You:\nhi\nmore\nand the user's line\n");
}

/// After a durable rewrite the conversation knows the file it installed without reading it
/// again; a change by another writer right after it, of the same length, in place or by a
/// rename over it, is still seen by the next snapshot and refuses an edit made against the
/// old text.
#[tokio::test]
async fn a_change_right_after_a_durable_rewrite_is_seen() {
    for inline in [false, true] {
        a_change_right_after_a_durable_rewrite_is_seen_with(inline).await;
    }
}

async fn a_change_right_after_a_durable_rewrite_is_seen_with(inline: bool) {
    let dir = scratch(&format!("after-rewrite-{inline}"));
    let path = dir.join("t.chat");
    std::fs::write(&path, "@You:\nhi\n").unwrap();
    let chat = open(&path, inline);
    // In place, as an editor that truncates and writes.
    append(&chat, Durability::Durable, "one").await;
    let ours = chat.snapshot().await.unwrap();
    assert_eq!(ours.text.as_str(), "@You:\nhi\none\n");
    std::fs::write(&path, "@You:\nhi\nONE\n").unwrap();
    let now = chat.snapshot().await.unwrap();
    assert_eq!(now.text.as_str(), "@You:\nhi\nONE\n");
    assert!(now.revision > ours.revision);
    // By a rename over it, as an editor that saves through a temporary file.
    append(&chat, Durability::Durable, "two").await;
    let ours = chat.snapshot().await.unwrap();
    let temp = dir.join("t.chat.tmp");
    std::fs::write(&temp, "@You:\nhi\nONE\nTWO\n").unwrap();
    std::fs::rename(&temp, &path).unwrap();
    let stale = chat
        .apply(
            ours.revision,
            &[TextEdit::insert(5, vec!["three".into()])],
            Durability::Durable,
        )
        .await;
    // The edit was computed against a text the file no longer holds: refused, not written.
    assert!(
        matches!(stale, Err(ConversationError::Stale { .. })),
        "{stale:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\nhi\nONE\nTWO\n"
    );
    assert_eq!(
        chat.snapshot().await.unwrap().text.as_str(),
        "@You:\nhi\nONE\nTWO\n"
    );
}
/// The old text of the crash test: large, so that a kill lands inside a write.
fn old_text() -> String {
    "@You:\n".to_owned() + &"old line of the user's text\n".repeat(40_000)
}

/// The child of [`a_killed_writer_leaves_the_old_or_the_new_text`]: writes until killed,
/// printing a line after each completed change.
#[tokio::test]
#[ignore = "the child process of a_killed_writer_leaves_the_old_or_the_new_text"]
async fn crash_child() {
    let Some(path) = std::env::var_os("FLEMMA_DURABILITY_CHILD") else {
        return;
    };
    let chat = FileConversation::new(PathBuf::from(path));
    let buffered = std::env::var_os("FLEMMA_DURABILITY_BUFFERED").is_some();
    let new = vec!["new line".to_owned(); 40_000];
    if std::env::var_os("FLEMMA_DURABILITY_TAIL").is_some() {
        loop {
            tail_step(&chat).await;
            println!("written");
        }
    }
    loop {
        let snapshot = chat.snapshot().await.unwrap();
        let lines = snapshot.text.lines().count() as u32;
        let edit = if buffered {
            TextEdit::insert(lines + 1, new.clone())
        } else if snapshot.text.contains("new line") {
            // Back to the old text, then forward again: every change rewrites most of it.
            TextEdit::replace(
                2,
                lines,
                old_text().lines().skip(1).map(String::from).collect(),
            )
        } else {
            TextEdit::replace(2, lines, new.clone())
        };
        let durability = if buffered {
            Durability::Buffered
        } else {
            Durability::Durable
        };
        chat.apply(snapshot.revision, &[edit], durability)
            .await
            .unwrap();
        println!("written");
    }
}

/// Runs [`crash_child`] on `path` (in `mode`, an environment variable set to `1`), kills it
/// (SIGKILL) `delay` after its `changes`-th completed change, and returns how many changes it
/// completed.
fn kill_child(
    path: &Path,
    mode: Option<&str>,
    changes: usize,
    delay: std::time::Duration,
) -> usize {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--ignored",
            "--exact",
            "durability::crash_child",
            "--nocapture",
        ])
        .env("FLEMMA_DURABILITY_CHILD", path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(mode) = mode {
        command.env(mode, "1");
    }
    let mut child = command.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut written = 0;
    let mut line = String::new();
    while written < changes {
        line.clear();
        if std::io::BufRead::read_line(&mut out, &mut line).unwrap() == 0 {
            break;
        }
        written += usize::from(line.trim() == "written");
    }
    std::thread::sleep(delay);
    child.kill().unwrap();
    child.wait().unwrap();
    written
}

/// The lines [`tail_step`] appends `Buffered`, then changes `Durable` to [`DONE`].
const DRAFT: &str = "draft line (approved)";
/// What [`DRAFT`] lines become.
const DONE: &str = "done line";

/// One change of the tail mode of [`crash_child`]: appends draft lines `Buffered`, or changes
/// them to done lines `Durable` (in place after the first time: they are all that is not
/// durable).
async fn tail_step(chat: &FileConversation) {
    let snapshot = chat.snapshot().await.unwrap();
    let lines = snapshot.text.lines().count() as u32;
    let (edit, durability) = if snapshot.text.ends_with(&format!("{DRAFT}\n")) {
        let first = lines - 19_999;
        (
            TextEdit::replace(first, lines, vec![DONE.to_owned(); 20_000]),
            Durability::Durable,
        )
    } else {
        (
            TextEdit::insert(lines + 1, vec![DRAFT.to_owned(); 20_000]),
            Durability::Buffered,
        )
    };
    chat.apply(snapshot.revision, &[edit], durability)
        .await
        .unwrap();
}

/// Kills a writer that changes its buffered lines durably in place, at arbitrary points: the
/// text before them is intact, then done lines, then at most a prefix of draft lines (a
/// prefix of the buffered text as it was) — never a draft line before a done line, never a
/// line that is neither.
#[test]
fn a_killed_writer_of_its_buffered_tail_leaves_the_durable_text_and_a_prefix() {
    let dir = scratch("crash-tail");
    let path = dir.join("t.chat");
    // Small, so that most of a change's time is its write.
    let old = "@You:\n".to_owned() + &"old line of the user's text\n".repeat(100);
    for round in 0..24_u64 {
        std::fs::write(&path, &old).unwrap();
        // Killed after a few changes, then at a point further into the next change each
        // round: its reads, its edit, its write.
        let written = kill_child(
            &path,
            Some("FLEMMA_DURABILITY_TAIL"),
            3 + (round % 4) as usize,
            std::time::Duration::from_millis(round * 5 % 23),
        );
        assert!(written > 2, "the child made no change in place");
        let left = std::fs::read_to_string(&path).unwrap();
        let rest = left
            .strip_prefix(old.as_str())
            .unwrap_or_else(|| panic!("the old text was damaged ({} bytes left)", left.len()));
        let mut drafts = false;
        for line in rest.split_inclusive('\n') {
            let whole = line.strip_suffix('\n');
            match whole {
                Some(DONE) => assert!(!drafts, "a done line after a draft line"),
                Some(DRAFT) => drafts = true,
                Some(other) => panic!("a line that is neither: {other:?}"),
                None => assert!(
                    DONE.starts_with(line) || DRAFT.starts_with(line),
                    "a cut line that is neither: {line:?}"
                ),
            }
        }
    }
}

/// Kills a writer (SIGKILL) at arbitrary points of its writes, many times: each time the file
/// holds a whole text — for durable changes the old text or the new one, never a mix; for
/// buffered appends the text before them intact, followed by whole or partial appended lines
/// only.
#[test]
fn a_killed_writer_leaves_the_old_or_the_new_text() {
    let dir = scratch("crash");
    let path = dir.join("t.chat");
    let old = old_text();
    let new = "@You:\n".to_owned() + &"new line\n".repeat(40_000);
    for round in 0..12 {
        let buffered = round % 2 == 1;
        std::fs::write(&path, &old).unwrap();
        // Killed after a few completed changes, at whatever point it then is.
        let mode = buffered.then_some("FLEMMA_DURABILITY_BUFFERED");
        let written = kill_child(&path, mode, 1 + round / 2, std::time::Duration::ZERO);
        assert!(written > 0, "the child wrote nothing");
        let left = std::fs::read_to_string(&path).unwrap();
        if buffered {
            let rest = left
                .strip_prefix(old.as_str())
                .unwrap_or_else(|| panic!("the old text was damaged ({} bytes left)", left.len()));
            assert!(
                rest.split_inclusive('\n')
                    .all(|l| "new line\n".starts_with(l)),
                "not a prefix of appended lines"
            );
        } else {
            assert!(left == old || left == new, "a mix: {} bytes", left.len());
        }
    }
}

/// With the file work on the caller's thread, a write that finds another writer holding the
/// directory's lock waits for it elsewhere: the thread's other tasks go on meanwhile, and the
/// write lands once the lock is released.
#[tokio::test(flavor = "current_thread")]
async fn an_inline_write_waits_for_another_writer_off_the_thread() {
    let dir = scratch("inline-busy");
    let path = dir.join("t.chat");
    std::fs::write(&path, "@You:\nhi\n").unwrap();
    let chat = std::sync::Arc::new(open(&path, true));
    let snapshot = chat.snapshot().await.unwrap();
    let held = std::fs::File::open(&dir).unwrap();
    held.lock().unwrap();
    // Another thread stands for the other writer: it lets go after 300 ms. Were the write to
    // wait on the runtime's one thread, nothing else would run until then, and the check
    // below fails (it does not hang).
    let other = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let released = std::time::Instant::now();
        held.unlock().unwrap();
        released
    });
    let write = tokio::spawn({
        let chat = std::sync::Arc::clone(&chat);
        async move {
            chat.apply(
                snapshot.revision,
                &[TextEdit::insert(3, vec!["more".into()])],
                Durability::Durable,
            )
            .await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let ticked = std::time::Instant::now();
    write.await.unwrap().unwrap();
    let released = other.join().unwrap();
    assert!(
        ticked < released,
        "the runtime's thread was held by the write until the other writer let go"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "@You:\nhi\nmore\n");
}
