//! `write` (spec §12.3).

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn previews() {
    let tool = WriteTool::new().unwrap();
    assert_eq!(
        show(
            &tool,
            &json!({"label": "saving log", "path": "output.txt", "content": "x".repeat(2355)})
        ),
        "write: output.txt  (2.3KB) — saving log"
    );
    assert_eq!(
        show(&tool, &json!({"label": "l", "path": "a", "content": "é"})),
        "write: a  (2B) — l"
    );
}

#[tokio::test]
async fn write_creates_parent_directories_and_counts_bytes() {
    let dir = TempDir::new();
    let write = WriteTool::new().unwrap();
    let call = |path: &str, content: &str| {
        run(
            &write,
            dir.path(),
            json!({"label": "l", "path": path, "content": content}),
        )
    };
    assert_eq!(
        call("deep/er/new.txt", "hello").await,
        ok("Successfully wrote 5 bytes to deep/er/new.txt")
    );
    assert_eq!(dir.read("deep/er/new.txt"), "hello");
    assert_eq!(
        call("one.txt", "x").await,
        ok("Successfully wrote 1 byte to one.txt")
    );
    assert_eq!(
        call("empty.txt", "").await,
        ok("Successfully wrote 0 bytes to empty.txt")
    );
    assert_eq!(dir.read("empty.txt"), "");
    // Bytes, not characters.
    assert_eq!(
        call("e.txt", "é✓").await,
        ok("Successfully wrote 5 bytes to e.txt")
    );
    // Overwrites, and leaves no temporary file behind.
    assert_eq!(
        call("one.txt", "second").await,
        ok("Successfully wrote 6 bytes to one.txt")
    );
    assert_eq!(dir.read("one.txt"), "second");
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["deep", "e.txt", "empty.txt", "one.txt"]);
}

#[tokio::test]
async fn write_resolves_against_the_conversation_directory_and_writes_through_links() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("work")).unwrap();
    let ctx = context(dir.path(), &dir.path().join("work"), "write");
    let write = WriteTool::new().unwrap();
    let out = write
        .execute(json!({"path": "here.txt", "content": "x"}), &ctx)
        .await;
    assert_eq!(out, ok("Successfully wrote 1 byte to here.txt"));
    assert_eq!(dir.read("here.txt"), "x");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(dir.path().join("here.txt"), dir.path().join("link.txt"))
            .unwrap();
        let out = write
            .execute(json!({"path": "link.txt", "content": "via link"}), &ctx)
            .await;
        assert_eq!(out, ok("Successfully wrote 8 bytes to link.txt"));
        assert!(
            std::fs::symlink_metadata(dir.path().join("link.txt"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(dir.read("here.txt"), "via link");
    }
}

#[tokio::test]
async fn write_errors() {
    let dir = TempDir::new();
    let write = WriteTool::new().unwrap();
    assert_eq!(
        run(&write, dir.path(), json!({"path": "", "content": "x"})).await,
        err("No path provided")
    );
    assert_eq!(
        run(
            &write,
            dir.path(),
            json!({"path": "a.txt", "content": null})
        )
        .await,
        err("No content provided")
    );
    assert_eq!(
        run(&write, dir.path(), json!({"path": "a.txt"})).await,
        err("No content provided")
    );
    // A parent that is a file.
    dir.write("file", "x");
    let out = run(
        &write,
        dir.path(),
        json!({"path": "file/child.txt", "content": "x"}),
    )
    .await;
    let ToolOutput::Failure { error, .. } = &out else {
        panic!("{out:?}")
    };
    assert!(error.starts_with("Cannot write file: "), "{error}");
    assert!(
        error.contains(dir.path().join("file").to_str().unwrap()),
        "{error}"
    );
    assert!(!dir.path().join("a.txt").exists());
}

#[tokio::test]
async fn write_outside_the_sandbox_is_denied() {
    let dir = TempDir::new();
    let ctx = sandboxed(dir.path(), "write");
    let write = WriteTool::new().unwrap();
    assert_eq!(
        write
            .execute(json!({"path": "outside.txt", "content": "x"}), &ctx)
            .await,
        err("Sandbox: write denied \u{2013} path is outside writable directories: outside.txt")
    );
    assert!(!dir.path().join("outside.txt").exists());
    assert_eq!(
        write
            .execute(json!({"path": "allowed/in.txt", "content": "x"}), &ctx)
            .await,
        ok("Successfully wrote 1 byte to allowed/in.txt")
    );
    // `..` cannot climb out.
    assert_eq!(
        write
            .execute(json!({"path": "allowed/../out.txt", "content": "x"}), &ctx)
            .await,
        err("Sandbox: write denied – path is outside writable directories: allowed/../out.txt")
    );
}
