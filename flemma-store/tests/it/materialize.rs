//! Spec §11.5: materialisation of finished results.

use flemma_store::Store;
use pretty_assertions::assert_eq;

use crate::{TempDir, jid, options, read, tid, tn};

fn chat_store(tmp: &TempDir) -> Store {
    Store::new(&options(), Some(&tmp.join("example.chat")), "1").unwrap()
}

#[test]
fn disabled_writes_nothing() {
    let tmp = TempDir::new("materialize_disabled");
    // The configured default is off.
    assert!(!options().materialize);
    let store = chat_store(&tmp);
    assert_eq!(
        store
            .materialize(false, &tid("toolu_01"), Some(&tn("bash")), Ok("out"))
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .materialize(
                false,
                &jid("j"),
                Some(&tn("bash")),
                Err(("boom", "partial"))
            )
            .unwrap(),
        None
    );
    assert!(crate::entries(tmp.path()).is_empty());
}

#[test]
fn enabled_writes_outputs_and_errors() {
    let tmp = TempDir::new("materialize_enabled");
    let store = chat_store(&tmp);
    let dir = tmp.join(".flemma/example.chat");

    let path = store
        .materialize(true, &tid("toolu_01"), Some(&tn("bash")), Ok("the output"))
        .unwrap()
        .unwrap();
    assert_eq!(path, dir.join("tool_bash_toolu_01.txt"));
    assert_eq!(read(&path), "the output");

    let path = store
        .materialize(true, &jid("bash:8"), Some(&tn("bash")), Err(("exit 1", "")))
        .unwrap()
        .unwrap();
    assert_eq!(path, dir.join("job_bash--8.txt"));
    assert_eq!(read(&path), "exit 1");

    let path = store
        .materialize(
            true,
            &tid("s1"),
            Some(&tn("flemma.jobs.status")),
            Err(("Command failed", "line 1\nline 2")),
        )
        .unwrap()
        .unwrap();
    assert_eq!(path, dir.join("tool_flemma__jobs__status_s1.txt"));
    assert_eq!(
        read(&path),
        "Command failed\n\nPartial output:\nline 1\nline 2"
    );
}

#[test]
fn config_errors_are_returned_not_raised() {
    let tmp = TempDir::new("materialize_config_error");
    let store = Store::new(
        &crate::options_with_format("{{ missing }}/x.txt"),
        Some(&tmp.join("example.chat")),
        "1",
    )
    .unwrap();
    let err = store
        .materialize(true, &tid("i"), None, Ok("out"))
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Invalid store path format '{{ missing }}/x.txt': "),
        "{err}"
    );
    // Disabled: the broken format is never even rendered.
    assert_eq!(
        store
            .materialize(false, &tid("i"), None, Ok("out"))
            .unwrap(),
        None
    );
}
