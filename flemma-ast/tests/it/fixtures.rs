//! Fixture-driven parser tests.
//!
//! Every `.chat` file under `tests/fixtures/valid/` and `tests/fixtures/invalid/` is parsed and
//! checked: span invariants hold, valid files have no diagnostics and invalid files at least one,
//! printing the document and parsing the output gives an equal document (positions aside), the
//! printed text is a fixed point of parse + print, and the whole-document JSON (the public
//! contract of `flemma parse --json`) matches the snapshot `snapshots/<folder>__<name>.snap`.
//!
//! Regenerate the snapshots with
//! `INSTA_UPDATE=always cargo test -p flemma-ast --test it fixtures`, then review the diff.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use flemma_ast::Document;
use serde_json::Value;

use crate::common;

/// The two fixture folders and whether their files must parse cleanly.
const FOLDERS: [(&str, Expect); 2] = [("valid", Expect::Clean), ("invalid", Expect::Diagnostics)];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// No diagnostics.
    Clean,
    /// At least one diagnostic.
    Diagnostics,
}

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The `.chat` files of a fixture folder, sorted by file name; panics when there are none.
fn fixture_files(folder: &str) -> Vec<PathBuf> {
    let dir = fixtures_root().join(folder);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read fixture folder {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .map(|entry| {
            entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path()
        })
        .filter(|path| path.extension().is_some_and(|ext| ext == "chat"))
        .collect();
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    assert!(
        !files.is_empty(),
        "no .chat fixtures in {}: the fixture test would check nothing",
        dir.display()
    );
    files
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_else(|| panic!("fixture without a name: {}", path.display()))
        .to_string_lossy()
        .into_owned()
}

/// The document's JSON with every position removed (`span`, `line`, `line_count`), so that two
/// documents that differ only in where things stand compare equal. Tool inputs and result meta
/// are user data and are left untouched.
fn without_positions(doc: &Document) -> Value {
    let mut value =
        serde_json::to_value(doc).unwrap_or_else(|e| panic!("document does not serialize: {e}"));
    strip_positions(&mut value);
    value
}

fn strip_positions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !matches!(key.as_str(), "span" | "line" | "line_count"));
            for (key, child) in map.iter_mut() {
                if !matches!(key.as_str(), "input" | "meta") {
                    strip_positions(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_positions),
        _ => {}
    }
}

/// Runs every check on one fixture; panics with the fixture's path on the first failure.
fn check_fixture(folder: &str, expect: Expect, path: &Path) {
    let name = stem(path);
    let shown = format!("tests/fixtures/{folder}/{name}.chat");
    let bytes =
        std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let text = std::str::from_utf8(&bytes).unwrap_or_else(|e| panic!("{shown}: not UTF-8: {e}"));

    let doc = flemma_ast::parse(text);
    common::check_spans(&doc);
    match flemma_ast::parse_bytes(&bytes) {
        Ok(from_bytes) => assert_eq!(from_bytes, doc, "{shown}: parse_bytes differs from parse"),
        Err(e) => panic!("{shown}: parse_bytes failed: {e}"),
    }

    match expect {
        Expect::Clean => assert!(
            doc.diagnostics.is_empty(),
            "{shown}: a valid fixture has diagnostics: {:#?}",
            doc.diagnostics
        ),
        Expect::Diagnostics => assert!(
            !doc.diagnostics.is_empty(),
            "{shown}: an invalid fixture has no diagnostics"
        ),
    }

    let printed = flemma_ast::print(&doc);
    let reparsed = flemma_ast::parse(&printed);
    common::check_spans(&reparsed);
    pretty_assertions::assert_eq!(
        without_positions(&reparsed),
        without_positions(&doc),
        "{shown}: the printed document parses to a different document:\n{printed}"
    );
    pretty_assertions::assert_eq!(
        flemma_ast::print(&reparsed),
        printed,
        "{shown}: printing is not a fixed point of parse + print"
    );

    let json = serde_json::to_string_pretty(&doc)
        .unwrap_or_else(|e| panic!("{shown}: document does not serialize: {e}"));
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_input_file(path);
    settings.set_description(shown);
    settings.bind(|| insta::assert_snapshot!(format!("{folder}__{name}"), json));
}

/// Checks every fixture of a folder, reporting all failing fixtures at once.
fn check_folder(folder: &str, expect: Expect) {
    let failed: Vec<String> = fixture_files(folder)
        .iter()
        .filter(|path| {
            catch_unwind(AssertUnwindSafe(|| check_fixture(folder, expect, path))).is_err()
        })
        .map(|path| stem(path))
        .collect();
    assert!(
        failed.is_empty(),
        "{} {folder} fixture(s) failed (see the panics above): {failed:?}",
        failed.len()
    );
}

#[test]
fn valid_fixtures_parse_cleanly_and_match_snapshots() {
    check_folder(FOLDERS[0].0, FOLDERS[0].1);
}

#[test]
fn invalid_fixtures_report_diagnostics_and_match_snapshots() {
    check_folder(FOLDERS[1].0, FOLDERS[1].1);
}

/// A snapshot whose fixture was renamed or deleted would otherwise linger unchecked.
#[test]
fn every_fixture_snapshot_has_a_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut orphans = Vec::new();
    for entry in entries {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        let Some(base) = file.strip_suffix(".snap") else {
            continue;
        };
        for (folder, _) in FOLDERS {
            if let Some(name) = base.strip_prefix(&format!("{folder}__"))
                && !fixtures_root()
                    .join(folder)
                    .join(format!("{name}.chat"))
                    .is_file()
            {
                orphans.push(file.clone());
            }
        }
    }
    assert!(
        orphans.is_empty(),
        "snapshots without a fixture: {orphans:?}"
    );
}

/// Spec §1.10: a message is aborted when its last segment that is not whitespace-only text is
/// an abort marker. (Not part of the JSON, so it is checked here.)
#[test]
fn aborted_message_detection_fixture() {
    let path = fixtures_root().join("valid/abort_marker_aborted_message_detection.chat");
    let text = std::fs::read_to_string(&path).unwrap();
    let doc = flemma_ast::parse(&text);
    let aborted: Vec<(String, bool)> = doc
        .messages
        .iter()
        .map(|m| (m.role.to_string(), m.is_aborted()))
        .collect();
    let expected = [
        ("Assistant", true),
        ("You", false),
        ("Assistant", false),
        ("You", false),
        ("Assistant", true),
    ]
    .map(|(role, aborted)| (role.to_owned(), aborted));
    assert_eq!(aborted, expected);
}

/// Spec §1.7: only final results (no status, or `error`) carry template segments.
#[test]
fn lifecycle_results_have_no_segments_in_fixtures() {
    for (folder, _) in FOLDERS {
        for path in fixture_files(folder) {
            let text = std::fs::read_to_string(&path).unwrap();
            for message in flemma_ast::parse(&text).messages {
                for result in message.tool_results() {
                    assert_eq!(
                        result.segments().is_empty(),
                        !result.is_final(),
                        "{}: result {} ({:?})",
                        path.display(),
                        result.tool_use_id.as_str(),
                        result.status
                    );
                }
            }
        }
    }
}
