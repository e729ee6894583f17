//! `edit` (spec §12.4).

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn previews() {
    let tool = EditTool::new().unwrap();
    assert_eq!(
        show(
            &tool,
            &json!({"label": "fixing typo", "path": "config.lua", "oldText": "a", "newText": "b"})
        ),
        "edit: config.lua — fixing typo"
    );
    assert_eq!(show(&tool, &json!({"path": "x"})), "edit: x");
}

#[tokio::test]
async fn edit_replaces_one_exact_occurrence() {
    let dir = TempDir::new();
    dir.write("f.txt", "fn main() {\n    println!(\"hi\");\n}\n");
    let edit = EditTool::new().unwrap();
    let out = run(
        &edit,
        dir.path(),
        json!({"label": "l", "path": "f.txt", "oldText": "\"hi\"", "newText": "\"héllo\""}),
    )
    .await;
    assert_eq!(out, ok("Successfully replaced text in f.txt."));
    assert_eq!(
        dir.read("f.txt"),
        "fn main() {\n    println!(\"héllo\");\n}\n"
    );
    // An empty newText deletes; patterns are plain text.
    dir.write("g.txt", "abc a.c (x)*");
    let out = run(
        &edit,
        dir.path(),
        json!({"path": "g.txt", "oldText": "a.c ", "newText": ""}),
    )
    .await;
    assert_eq!(out, ok("Successfully replaced text in g.txt."));
    assert_eq!(dir.read("g.txt"), "abc (x)*");
    let out = run(
        &edit,
        dir.path(),
        json!({"path": "g.txt", "oldText": "(x)*", "newText": "$1"}),
    )
    .await;
    assert_eq!(out, ok("Successfully replaced text in g.txt."));
    assert_eq!(dir.read("g.txt"), "abc $1");
    // Bytes that are not UTF-8 elsewhere in the file survive.
    dir.write("bin.txt", b"\xff\xfe key=1 \x80");
    let out = run(
        &edit,
        dir.path(),
        json!({"path": "bin.txt", "oldText": "key=1", "newText": "key=2"}),
    )
    .await;
    assert_eq!(out, ok("Successfully replaced text in bin.txt."));
    assert_eq!(
        std::fs::read(dir.path().join("bin.txt")).unwrap(),
        b"\xff\xfe key=2 \x80"
    );
}

#[tokio::test]
async fn edit_needs_exactly_one_occurrence_and_a_change() {
    let dir = TempDir::new();
    dir.write("f.txt", "aaa\nx  y\n");
    let edit = EditTool::new().unwrap();
    let call = |old: &str, new: &str| {
        run(
            &edit,
            dir.path(),
            json!({"label": "l", "path": "f.txt", "oldText": old, "newText": new}),
        )
    };
    assert_eq!(
        call("x y", "z").await,
        err(
            "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and newlines."
        )
    );
    // Overlapping occurrences count.
    assert_eq!(
        call("aa", "b").await,
        err(
            "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique."
        )
    );
    assert_eq!(
        call("a", "b").await,
        err(
            "Found 3 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique."
        )
    );
    assert_eq!(
        call("x  y", "x  y").await,
        err("No changes made to f.txt. The replacement produced identical content.")
    );
    assert_eq!(dir.read("f.txt"), "aaa\nx  y\n");
}

#[tokio::test]
async fn edit_input_errors_come_in_order() {
    let dir = TempDir::new();
    let edit = EditTool::new().unwrap();
    let call = |input: Value| run(&edit, dir.path(), input);
    assert_eq!(
        call(json!({"path": "", "oldText": "", "newText": null})).await,
        err("No path provided")
    );
    assert_eq!(
        call(json!({"path": "f", "oldText": "", "newText": null})).await,
        err("No oldText provided")
    );
    assert_eq!(
        call(json!({"path": "f", "newText": "x"})).await,
        err("No oldText provided")
    );
    assert_eq!(
        call(json!({"path": "f", "oldText": "a", "newText": null})).await,
        err("No newText provided")
    );
    assert_eq!(
        call(json!({"path": "f", "oldText": "a"})).await,
        err("No newText provided")
    );
    assert_eq!(
        call(json!({"path": "missing.txt", "oldText": "a", "newText": "b"})).await,
        err("File not found: missing.txt")
    );
    std::fs::create_dir_all(dir.path().join("d")).unwrap();
    assert_eq!(
        call(json!({"path": "d", "oldText": "a", "newText": "b"})).await,
        err("Cannot read file: d is a directory")
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn edit_reports_a_file_that_opens_but_cannot_be_read() {
    // `/proc/self/mem` opens, and reading it from offset 0 fails.
    let dir = TempDir::new();
    let edit = EditTool::new().unwrap();
    let out = run(
        &edit,
        dir.path(),
        json!({"path": "/proc/self/mem", "oldText": "a", "newText": "b"}),
    )
    .await;
    let ToolOutput::Failure { error, .. } = &out else {
        panic!("{out:?}")
    };
    assert!(
        error.starts_with("Cannot read file: /proc/self/mem: "),
        "{error}"
    );
}

#[tokio::test]
async fn edit_outside_the_sandbox_is_denied_before_the_file_is_looked_at() {
    let dir = TempDir::new();
    dir.write("outside.txt", "a");
    dir.write("allowed/in.txt", "a");
    let ctx = sandboxed(dir.path(), "edit");
    let edit = EditTool::new().unwrap();
    assert_eq!(
        edit.execute(
            json!({"path": "outside.txt", "oldText": "a", "newText": "b"}),
            &ctx
        )
        .await,
        err("Sandbox: edit denied \u{2013} path is outside writable directories: outside.txt")
    );
    assert_eq!(
        edit.execute(
            json!({"path": "nowhere.txt", "oldText": "a", "newText": "b"}),
            &ctx
        )
        .await,
        err("Sandbox: edit denied – path is outside writable directories: nowhere.txt")
    );
    assert_eq!(dir.read("outside.txt"), "a");
    assert_eq!(
        edit.execute(
            json!({"path": "allowed/in.txt", "oldText": "a", "newText": "b"}),
            &ctx
        )
        .await,
        ok("Successfully replaced text in allowed/in.txt.")
    );
    assert_eq!(dir.read("allowed/in.txt"), "b");
}
