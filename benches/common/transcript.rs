//! The 10 MB transcript the benches share: `../shared/tools/gen_chat.py 10000000 7`, generated
//! once into `target/bench-10000000-7.chat`, or the file named by `FLEMMA_BENCH_CHAT`.

use std::path::PathBuf;
use std::process::Command;

/// The transcript's text.
pub(crate) fn transcript() -> String {
    if let Ok(path) = std::env::var("FLEMMA_BENCH_CHAT") {
        return std::fs::read_to_string(path).expect("FLEMMA_BENCH_CHAT is readable");
    }
    // The workspace's root: this crate's directory, or its parent for a member crate's bench
    // that includes this file (flemma-lsp's).
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = if manifest.join("Cargo.lock").exists() {
        manifest
    } else {
        manifest.parent().map_or(manifest.clone(), PathBuf::from)
    };
    let cached = root.join("target/bench-10000000-7.chat");
    if let Ok(text) = std::fs::read_to_string(&cached) {
        return text;
    }
    let output = Command::new("python3")
        .arg(root.join("../shared/tools/gen_chat.py"))
        .args(["10000000", "7"])
        .output()
        .expect("python3 runs gen_chat.py");
    assert!(output.status.success(), "gen_chat.py failed");
    let text = String::from_utf8(output.stdout).expect("gen_chat.py writes UTF-8");
    let _ = std::fs::create_dir_all(root.join("target"));
    let _ = std::fs::write(&cached, &text);
    text
}
