//! Spec §11.5: materialisation of finished results.

use flemma_config::StoreOptions;
use flemma_store::{ResultBody, Store};
use pretty_assertions::assert_eq;

use crate::{TempDir, jid, options, read, tid, tn};

fn chat_store(tmp: &TempDir, options: &StoreOptions) -> Store {
    Store::new(options, Some(&tmp.join("example.chat")), "1").unwrap()
}

fn enabled(mut options: StoreOptions) -> StoreOptions {
    options.materialize = true;
    options
}

const OUT: ResultBody<'static> = ResultBody::Success { output: "out" };

#[test]
fn disabled_writes_nothing() {
    let tmp = TempDir::new("materialize_disabled");
    // The configured default is off, and the store remembers it.
    assert!(!options().materialize);
    let store = chat_store(&tmp, &options());
    assert!(!store.materializes());
    assert_eq!(
        store
            .materialize(&tid("toolu_01"), Some(&tn("bash")), &OUT)
            .unwrap(),
        None
    );
    let failed = ResultBody::Error {
        error: "boom",
        partial_output: Some("partial"),
    };
    assert_eq!(
        store
            .materialize(&jid("j"), Some(&tn("bash")), &failed)
            .unwrap(),
        None
    );
    assert!(crate::entries(tmp.path()).is_empty());
}

#[test]
fn enabled_writes_outputs_and_errors() {
    let tmp = TempDir::new("materialize_enabled");
    let store = chat_store(&tmp, &enabled(options()));
    assert!(store.materializes());
    let dir = tmp.join(".flemma/example.chat");

    let path = store
        .materialize(
            &tid("toolu_01"),
            Some(&tn("bash")),
            &ResultBody::Success {
                output: "the output",
            },
        )
        .unwrap()
        .unwrap();
    assert_eq!(path, dir.join("tool_bash_toolu_01.txt"));
    assert_eq!(read(&path), "the output");

    for partial_output in [None, Some("")] {
        let body = ResultBody::Error {
            error: "exit 1",
            partial_output,
        };
        let path = store
            .materialize(&jid("bash:8"), Some(&tn("bash")), &body)
            .unwrap()
            .unwrap();
        assert_eq!(path, dir.join("job_bash--3a8.txt"));
        assert_eq!(read(&path), "exit 1");
    }

    let body = ResultBody::Error {
        error: "Command failed",
        partial_output: Some("line 1\nline 2"),
    };
    let path = store
        .materialize(&tid("s1"), Some(&tn("flemma.jobs.status")), &body)
        .unwrap()
        .unwrap();
    assert_eq!(path, dir.join("tool_flemma__jobs__status_s1.txt"));
    assert_eq!(read(&path), body.render());
    assert_eq!(
        read(&path),
        "Command failed\n\nPartial output:\nline 1\nline 2"
    );
}

#[test]
fn render_borrows_unless_it_appends() {
    use std::borrow::Cow;
    assert!(matches!(OUT.render(), Cow::Borrowed("out")));
    let bare = ResultBody::Error {
        error: "e",
        partial_output: None,
    };
    assert!(matches!(bare.render(), Cow::Borrowed("e")));
    let partial = ResultBody::Error {
        error: "e",
        partial_output: Some("p"),
    };
    assert!(matches!(partial.render(), Cow::Owned(text) if text == "e\n\nPartial output:\np"));
}

#[test]
fn config_errors_are_returned_not_raised() {
    let tmp = TempDir::new("materialize_config_error");
    let broken = crate::options_with_format("{{ missing }}/x.txt");
    let store = chat_store(&tmp, &enabled(broken.clone()));
    let err = store.materialize(&tid("i"), None, &OUT).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Invalid store path format '{{ missing }}/x.txt': "),
        "{err}"
    );
    // Disabled: the broken format is never even rendered.
    let store = chat_store(&tmp, &broken);
    assert_eq!(store.materialize(&tid("i"), None, &OUT).unwrap(), None);
}
