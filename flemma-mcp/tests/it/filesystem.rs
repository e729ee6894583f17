//! `@modelcontextprotocol/server-filesystem` (pinned in `tests/mcp/package.json`), allowed one
//! temporary directory: its tools, a read inside, a refused read outside.

use std::path::PathBuf;
use std::time::Duration;

use flemma_core::ToolOutput;
use flemma_mcp::McpServerConfig;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::content::temp_dir;
use crate::scratch::Scratch;
use crate::support::{call, registry_with};

/// The pinned server-filesystem, as `npm ci` in `tests/mcp` installs it.
fn filesystem_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp/node_modules/.bin/mcp-server-filesystem");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test (or `npm ci` in tests/mcp) to install the MCP test servers",
        bin.display()
    );
    bin
}

/// server-filesystem as server `fs`, allowed `dir` only.
pub(crate) fn filesystem(dir: &std::path::Path) -> McpServerConfig {
    McpServerConfig::stdio("fs", filesystem_bin().to_string_lossy())
        .unwrap()
        .with_args([dir.to_string_lossy()])
        .with_startup_timeout(Duration::from_secs(30))
}

/// A temporary directory, its real path (the server compares real paths).
pub(crate) fn allowed(name: &str) -> (Scratch, PathBuf) {
    let dir = temp_dir(name);
    let real = dir.canonicalize().unwrap();
    (dir, real)
}

#[tokio::test]
async fn its_tools_are_discovered_under_the_server_name() {
    let (_dir, real) = allowed("fs-tools");
    let (registry, _) = registry_with(vec![filesystem(&real)]).await;
    assert!(registry.take_warnings().is_empty());
    assert_eq!(
        registry.names(),
        [
            "fs.create_directory",
            "fs.directory_tree",
            "fs.edit_file",
            "fs.get_file_info",
            "fs.list_allowed_directories",
            "fs.list_directory",
            "fs.list_directory_with_sizes",
            "fs.move_file",
            "fs.read_file",
            "fs.read_media_file",
            "fs.read_multiple_files",
            "fs.read_text_file",
            "fs.search_files",
            "fs.write_file",
        ]
    );
}

#[tokio::test]
async fn a_file_in_the_allowed_directory_is_read() {
    let (_dir, real) = allowed("fs-read");
    std::fs::write(real.join("notes.txt"), "first line\nsecond line\n").unwrap();
    let (registry, _) = registry_with(vec![filesystem(&real)]).await;
    let path = real.join("notes.txt");
    assert_eq!(
        call(&registry, "fs.read_text_file", json!({"path": path})).await,
        ToolOutput::text("first line\nsecond line\n")
    );
    assert_eq!(
        call(
            &registry,
            "fs.read_text_file",
            json!({"path": path, "head": 1})
        )
        .await,
        ToolOutput::text("first line")
    );
    // A media file comes back as an image block: a placeholder without a store.
    std::fs::write(real.join("dot.png"), b"\x89PNG\r\n\x1a\n").unwrap();
    assert_eq!(
        call(
            &registry,
            "fs.read_media_file",
            json!({"path": real.join("dot.png")})
        )
        .await,
        ToolOutput::text("[image/png, 8B]")
    );
}

#[tokio::test]
async fn a_path_outside_the_allowed_directory_is_an_error_result() {
    let (_dir, real) = allowed("fs-outside");
    let (outside_dir, outside) = allowed("fs-outside-other");
    std::fs::write(outside.join("secret.txt"), "not for you").unwrap();
    let (registry, _) = registry_with(vec![filesystem(&real)]).await;
    let out = call(
        &registry,
        "fs.read_text_file",
        json!({"path": outside.join("secret.txt")}),
    )
    .await;
    assert!(!out.is_success(), "{out:?}");
    let text = out.result_text();
    assert!(
        text.contains("Access denied - path outside allowed directories"),
        "{text}"
    );
    assert!(!text.contains("not for you"), "{text}");
    drop(outside_dir);
}
