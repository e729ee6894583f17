//! What is not a regular file (issue 17: `read` of a named pipe blocked forever): `read`,
//! `write` and `edit` refuse named pipes, sockets, devices and directories at once, with the
//! path and what it is, and leave them as they were.

use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::{EditTool, ReadTool, TempDir, Tool, ToolOutput, Value, WriteTool, err, json, run};

/// Makes a named pipe.
fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo failed: {status}");
}

/// Runs `tool` on `input` in `dir`; fails when it does not answer within a few seconds, after
/// opening every named pipe in `dir` once for writing (so that a tool blocked opening one
/// for reading goes on, and the test ends).
async fn promptly(tool: &impl Tool, dir: &Path, input: Value) -> ToolOutput {
    if let Ok(out) = tokio::time::timeout(Duration::from_secs(5), run(tool, dir, input)).await {
        return out;
    }
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_fifo() {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc_nonblock())
                .open(entry.path());
        }
    }
    panic!("the tool did not answer within 5 s");
}

fn libc_nonblock() -> i32 {
    i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap()
}

#[tokio::test]
async fn a_named_pipe_is_refused() {
    let dir = TempDir::new();
    let fifo = dir.path().join("p.fifo");
    mkfifo(&fifo);
    let refused = "p.fifo is a named pipe (FIFO), not a regular file";
    let read = ReadTool::new().unwrap();
    assert_eq!(
        promptly(&read, dir.path(), json!({"path": "p.fifo"})).await,
        err(format!("Cannot read file: {refused}"))
    );
    let edit = EditTool::new().unwrap();
    assert_eq!(
        promptly(
            &edit,
            dir.path(),
            json!({"path": "p.fifo", "oldText": "a", "newText": "b"})
        )
        .await,
        err(format!("Cannot read file: {refused}"))
    );
    let write = WriteTool::new().unwrap();
    assert_eq!(
        promptly(
            &write,
            dir.path(),
            json!({"path": "p.fifo", "content": "x"})
        )
        .await,
        err(format!("Cannot write file: {refused}"))
    );
    // Still a named pipe: not replaced by a regular file.
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[tokio::test]
async fn a_socket_is_refused() {
    let dir = TempDir::new();
    let path = dir.path().join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let refused = "s.sock is a socket, not a regular file";
    let read = ReadTool::new().unwrap();
    assert_eq!(
        promptly(&read, dir.path(), json!({"path": "s.sock"})).await,
        err(format!("Cannot read file: {refused}"))
    );
    let edit = EditTool::new().unwrap();
    assert_eq!(
        promptly(
            &edit,
            dir.path(),
            json!({"path": "s.sock", "oldText": "a", "newText": "b"})
        )
        .await,
        err(format!("Cannot read file: {refused}"))
    );
    let write = WriteTool::new().unwrap();
    assert_eq!(
        promptly(
            &write,
            dir.path(),
            json!({"path": "s.sock", "content": "x"})
        )
        .await,
        err(format!("Cannot write file: {refused}"))
    );
    assert!(std::fs::metadata(&path).unwrap().file_type().is_socket());
}

/// `/dev/zero` and `/dev/urandom` never end: `read` does not read them, nor sends them on as
/// a file reference, whether named directly or through a link.
#[tokio::test]
async fn read_refuses_devices() {
    let dir = TempDir::new();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
    let read = ReadTool::new().unwrap();
    for path in ["/dev/zero", "/dev/urandom", "zero"] {
        assert_eq!(
            promptly(&read, dir.path(), json!({"path": path})).await,
            err(format!(
                "Cannot read file: {path} is a character device, not a regular file"
            ))
        );
    }
}

/// `edit` does not read a device, `write` does not replace one. The devices are the test's
/// own (a link in its directory to `/dev/zero`, which is refused before anything is done).
#[tokio::test]
async fn write_and_edit_refuse_devices() {
    let dir = TempDir::new();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
    let refused = "zero is a character device, not a regular file";
    let edit = EditTool::new().unwrap();
    assert_eq!(
        promptly(
            &edit,
            dir.path(),
            json!({"path": "zero", "oldText": "a", "newText": "b"})
        )
        .await,
        err(format!("Cannot read file: {refused}"))
    );
    let write = WriteTool::new().unwrap();
    assert_eq!(
        promptly(&write, dir.path(), json!({"path": "zero", "content": "x"})).await,
        err(format!("Cannot write file: {refused}"))
    );
    assert!(
        std::fs::metadata("/dev/zero")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

#[tokio::test]
async fn a_directory_is_named_as_one() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("d")).unwrap();
    let read = ReadTool::new().unwrap();
    assert_eq!(
        run(&read, dir.path(), json!({"path": "d"})).await,
        err("Cannot read file: d is a directory")
    );
    let edit = EditTool::new().unwrap();
    assert_eq!(
        run(
            &edit,
            dir.path(),
            json!({"path": "d", "oldText": "a", "newText": "b"})
        )
        .await,
        err("Cannot read file: d is a directory")
    );
    let write = WriteTool::new().unwrap();
    assert_eq!(
        run(&write, dir.path(), json!({"path": "d", "content": "x"})).await,
        err("Cannot write file: d is a directory")
    );
    assert!(dir.path().join("d").is_dir());
}

/// `grep` searches regular files only: a named pipe in the tree, or as the path searched, is
/// passed over without being opened.
#[tokio::test]
async fn grep_passes_over_a_named_pipe() {
    let dir = TempDir::new();
    dir.write("a.txt", "needle\n");
    mkfifo(&dir.path().join("p.fifo"));
    let grep: std::sync::Arc<dyn flemma_core::Tool> =
        std::sync::Arc::new(flemma_builtins::Grep::new().unwrap());
    let ctx = super::context(dir.path(), dir.path(), "grep");
    let search = |path: Value| {
        let (grep, ctx) = (grep.clone(), ctx.clone());
        async move {
            let input = json!({"pattern": "needle", "path": path, "glob": null, "limit": null});
            tokio::time::timeout(Duration::from_secs(5), grep.execute(input, &ctx)).await
        }
    };
    let all = search(Value::Null).await;
    let fifo = search(json!("p.fifo")).await;
    // Lets a blocked search go before failing.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc_nonblock())
        .open(dir.path().join("p.fifo"));
    assert_eq!(
        all.unwrap(),
        ToolOutput::text("./a.txt:1:needle\n\n[1 match]")
    );
    assert_eq!(fifo.unwrap(), ToolOutput::text("No matches found."));
}
