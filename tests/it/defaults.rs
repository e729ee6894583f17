//! Issue 34, safe defaults for an embedder: an application written as the book's
//! "Embedding the loop" (the book) shows (no sandbox call, the default `$standard`, which approves
//! `write`) cannot write outside the conversation's writable set, with bubblewrap or without
//! any backend; no sandbox at all is the host's explicit choice of the option.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma::core::sandbox::SandboxBackends;
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::{MemoryConversation, ToolRegistry, register_builtins};
use flemma::runtime::{Session, Stop};
use serde_json::json;

/// `base/proj/x.chat` (a repository) asking for a `write` of `base/outside/canary.txt`;
/// outside the temporary directories.
fn layout(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let base = outside_the_temporary_directories()
        .join(format!("flemma-defaults-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("proj/.git")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    let base = base.canonicalize().unwrap();
    let chat = base.join("proj/x.chat");
    std::fs::write(&chat, "@You:\nSave a note.\n").unwrap();
    (base.clone(), chat, base.join("outside/canary.txt"))
}

/// A scratch directory outside `/tmp` and `$TMPDIR`, which every conversation may write: the
/// target's when the checkout is elsewhere, else `/var/tmp`.
fn outside_the_temporary_directories() -> PathBuf {
    let temporary: Vec<PathBuf> = ["/tmp".into(), std::env::temp_dir()]
        .iter()
        .filter_map(|p: &PathBuf| p.canonicalize().ok())
        .collect();
    [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
    ]
    .into_iter()
    .filter_map(|p| p.canonicalize().ok())
    .find(|p| !temporary.iter().any(|t| p.starts_with(t)))
    .unwrap_or_else(|| panic!("no scratch directory outside /tmp and $TMPDIR"))
}

async fn run(
    chat: &Path,
    canary: &Path,
    configure: impl FnOnce(flemma::runtime::SessionBuilder) -> flemma::runtime::SessionBuilder,
) -> String {
    let tools = ToolRegistry::new();
    register_builtins(&tools).unwrap();
    let conversation =
        Arc::new(MemoryConversation::new(std::fs::read_to_string(chat).unwrap()).with_path(chat));
    let model = Arc::new(ScriptedProvider::new([
        Turn::tool_use(
            "write",
            json!({"path": canary.display().to_string(), "content": "pwned"}),
        ),
        Turn::text("Saved."),
    ]));
    let session = configure(
        Session::builder(conversation.clone(), tools, model).flush_interval(Duration::ZERO),
    )
    .build();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    conversation.text()
}

#[tokio::test]
async fn the_default_session_writes_only_inside_its_writable_set() {
    for (name, backends) in [
        ("default", None),
        ("no-backend", Some(SandboxBackends::new())),
    ] {
        let (base, chat, canary) = layout(name);
        let text = run(&chat, &canary, |builder| match backends {
            Some(backends) => builder.executor(|e| e.sandbox_backends(backends)),
            None => builder,
        })
        .await;
        assert!(!canary.exists(), "{name}: the write ran\n{text}");
        assert!(text.contains("Sandbox: write denied"), "{name}: {text}");
        let _ = std::fs::remove_dir_all(base);
    }
}

#[tokio::test]
async fn no_sandbox_is_the_hosts_explicit_choice() {
    let (base, chat, canary) = layout("disabled");
    let mut config = flemma::config::Config::new();
    config
        .set(flemma::config::Layer::Setup, "sandbox.enabled", false)
        .unwrap();
    let text = run(&chat, &canary, |builder| {
        builder.executor(|e| e.config(config))
    })
    .await;
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "pwned", "{text}");
    let _ = std::fs::remove_dir_all(base);
}
