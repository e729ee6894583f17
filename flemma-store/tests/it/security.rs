//! Ids are untrusted (they come from the model and from providers): whatever an id holds, its
//! store path stays inside the store directory.

use std::path::{Component, Path};

use flemma_store::{Store, escape_id};

use flemma_ids::ToolUseId;

use crate::{TempDir, options, options_with_format, tn};

const HOSTILE_IDS: &[&str] = &[
    "../../etc/passwd",
    "..",
    ".",
    "a/../../b",
    "../",
    "/etc/passwd",
    "~/x",
    "~",
    "$HOME",
    "${HOME}",
    "{{ __dirname }}",
    "..\\..\\x",
    "a\0b",
    "\n..",
];

/// The hostile ids a tool use id can hold at all: the widest constructor (an id as a
/// transcript header holds it) is used, and ids it refuses (a line break) never reach a store.
fn hostile_tool_use_ids() -> Vec<ToolUseId> {
    let ids: Vec<ToolUseId> = HOSTILE_IDS
        .iter()
        .filter_map(|id| ToolUseId::from_header(id).ok())
        .collect();
    assert_eq!(
        ids.len(),
        HOSTILE_IDS.len() - 1,
        "only \"\\n..\" is refused"
    );
    ids
}

fn assert_inside(path: &Path, dir: &Path, id: &str) {
    assert!(
        path.starts_with(dir) && path != dir,
        "id {id:?} gave {} outside {}",
        path.display(),
        dir.display()
    );
    assert!(
        !path.components().any(|c| c == Component::ParentDir),
        "id {id:?} gave {}",
        path.display()
    );
}

#[test]
fn escaped_ids_are_single_harmless_segments() {
    for id in HOSTILE_IDS {
        let escaped = escape_id(id);
        assert!(!escaped.contains('/'), "{id:?} → {escaped}");
        assert!(escaped != "." && escaped != "..", "{id:?} → {escaped}");
        assert!(
            escaped
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')),
            "{id:?} → {escaped}"
        );
    }
}

#[test]
fn hostile_ids_stay_in_the_default_store_directory() {
    let tmp = TempDir::new("hostile_default");
    let chat = tmp.join("notes/example.chat");
    let store = Store::new(&options(), Some(&chat), "1").unwrap();
    let dir = store.directory().unwrap();
    for id in &hostile_tool_use_ids() {
        let path = store.path_for(id, Some(&tn("bash"))).unwrap();
        assert_inside(&path, &dir, id.as_str());
        assert_eq!(path.parent().unwrap(), dir, "{id:?}");
        let written = store.write_result(id, Some(&tn("bash")), "x").unwrap();
        assert_eq!(written, path);
        assert!(written.is_file());
    }
    // Nothing landed anywhere but the store directory.
    assert_eq!(crate::entries(tmp.path()), ["notes"]);
    assert_eq!(crate::entries(&tmp.join("notes")), [".flemma"]);
    assert_eq!(crate::entries(&tmp.join("notes/.flemma")), ["example.chat"]);
}

#[test]
fn hostile_ids_stay_inside_when_the_id_is_a_whole_segment() {
    let tmp = TempDir::new("hostile_segment");
    let templates = ["{{ id }}/out.txt", "{{ id }}", "a/{{ id }}/{{ id }}"];
    for (i, template) in templates.iter().enumerate() {
        let root = tmp.join(format!("store{i}"));
        let format = format!("{}/{template}", root.display());
        let store = Store::new(
            &options_with_format(&format),
            Some(&tmp.join("x.chat")),
            "1",
        )
        .unwrap();
        for id in &hostile_tool_use_ids() {
            let path = store.path_for(id, None).unwrap();
            assert_inside(&path, &root, id.as_str());
            store.write_result(id, None, "x").unwrap();
        }
    }
    assert_eq!(crate::entries(tmp.path()), ["store0", "store1", "store2"]);
}
