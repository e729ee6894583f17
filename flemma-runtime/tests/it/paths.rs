//! Paths follow the conversation: a relative conversation path is resolved once, the tools'
//! working directory and paths are absolute, and the sandbox's default writable set is the
//! conversation's project (`urn:flemma:project`), never the process working directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_config::Config;
use flemma_core::sandbox::{PolicyInputs, SandboxPolicy};
use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
use flemma_runtime::{Executor, MemoryConversation, ToolRegistry};
use pretty_assertions::assert_eq;

/// A directory of its own under the temporary directory, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("flemma-paths-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir.canonicalize().unwrap())
    }

    fn mkdir(&self, rel: &str) -> PathBuf {
        let path = self.0.join(rel);
        std::fs::create_dir_all(&path).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tool that reports where its context says it runs.
fn probe_registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(tool_fn(
        ToolDefinition::builder("probe", "Reports its paths.")
            .unwrap()
            .build()
            .unwrap(),
        |_, ctx| {
            ToolOutput::text(format!(
                "cwd={}\nfile={}\nresolved={}\nin_cwd={}",
                ctx.cwd().display(),
                ctx.filename().unwrap().display(),
                ctx.resolve_path("../up.txt").display(),
                ctx.resolve_in_cwd("../up.txt").display(),
            ))
        },
    ));
    registry
}

async fn probe(conversation: MemoryConversation) -> String {
    probe_with(conversation, flemma_config::Config::new()).await
}

async fn probe_with(conversation: MemoryConversation, config: flemma_config::Config) -> String {
    let conversation = Arc::new(conversation);
    let executor = Executor::builder(conversation.clone(), probe_registry())
        .config(config)
        .build();
    executor.cycle().await.unwrap();
    let doc = flemma_ast::parse(&conversation.text());
    let result = doc
        .messages
        .iter()
        .flat_map(flemma_ast::Message::tool_results)
        .next()
        .unwrap();
    result.content.clone()
}

const CALL: &str = "@Assistant:\n**Tool Use:** `probe` (`toolu_01`)\n```json\n{}\n```\n";

#[tokio::test]
async fn a_relative_conversation_path_is_resolved_against_the_process_directory_once() {
    // The test's working directory is the crate's (cargo runs tests there); `sub/` need not
    // exist for the path to resolve.
    let here = std::env::current_dir().unwrap().canonicalize().unwrap();
    let approve = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"probe\"]}}}\n```\n";
    let chat = MemoryConversation::new(format!("{approve}{CALL}")).with_path("sub/x.chat");
    assert_eq!(
        flemma_core::Conversation::path(&chat),
        Some(here.join("sub/x.chat").as_path())
    );
    // The store (where the call's claim goes) in a scratch directory, not in the crate's.
    let s = Scratch::new("relative");
    let mut config = flemma_config::Config::new();
    config
        .set(
            flemma_config::Layer::Runtime,
            "tools.store.path_format",
            serde_json::json!(s.0.join("store").display().to_string()),
        )
        .unwrap();
    assert_eq!(
        probe_with(chat, config).await,
        format!(
            "cwd={}\nfile={}\nresolved={}\nin_cwd={}",
            here.join("sub").display(),
            here.join("sub/x.chat").display(),
            here.join("up.txt").display(),
            here.join("up.txt").display(),
        )
    );
}

#[tokio::test]
async fn a_relative_tool_cwd_is_taken_from_the_conversations_directory() {
    let s = Scratch::new("toolcwd");
    let notes = s.mkdir("notes");
    let frontmatter = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"probe\"], \"probe\": {\"cwd\": \"build/out\"}}}}\n```\n";
    let chat =
        MemoryConversation::new(format!("{frontmatter}{CALL}")).with_path(notes.join("x.chat"));
    assert_eq!(
        probe(chat).await,
        format!(
            "cwd={}\nfile={}\nresolved={}\nin_cwd={}",
            notes.join("build/out").display(),
            notes.join("x.chat").display(),
            s.0.join("up.txt").display(),
            notes.join("build/up.txt").display(),
        )
    );
}

fn policy(rw_paths: &[&str], cwd: &Path, chat: Option<&Path>, home: &Path) -> Vec<PathBuf> {
    let mut options = Config::new().options().unwrap().sandbox;
    options.policy.rw_paths = rw_paths.iter().map(|s| (*s).to_owned()).collect();
    let home = home.to_str().unwrap().to_owned();
    let env = move |name: &str| (name == "HOME").then(|| home.clone());
    let inputs = PolicyInputs {
        cwd,
        chat,
        store: None,
        env: &env,
    };
    SandboxPolicy::resolve(&options, &inputs).rw_paths
}

#[test]
fn the_default_writable_set_names_the_project_not_the_working_directory() {
    let defaults = Config::new().options().unwrap().sandbox.policy.rw_paths;
    assert_eq!(defaults[0], "urn:flemma:project");
    assert!(
        !defaults
            .iter()
            .any(|entry| entry.contains("urn:flemma:cwd"))
    );
}

#[test]
fn urn_flemma_project_is_the_repository_holding_the_conversation_or_its_directory() {
    let s = Scratch::new("project");
    s.mkdir("repo/.git");
    let deep = s.mkdir("repo/notes/deep");
    let loose = s.mkdir("loose");
    let home = s.mkdir("home");
    let root = Path::new("/");
    // Run from `/`: the set is the project, whatever the working directory.
    assert_eq!(
        policy(
            &["urn:flemma:project"],
            root,
            Some(&deep.join("a.chat")),
            &home
        ),
        [s.0.join("repo")]
    );
    assert_eq!(
        policy(
            &["urn:flemma:project"],
            root,
            Some(&loose.join("a.chat")),
            &home
        ),
        std::slice::from_ref(&loose)
    );
    // A dotfiles repository at HOME is not the project of a conversation under it.
    s.mkdir("home/.git");
    let notes = s.mkdir("home/notes");
    assert_eq!(
        policy(
            &["urn:flemma:project"],
            root,
            Some(&notes.join("a.chat")),
            &home
        ),
        [notes]
    );
    // No file: no project (and the working directory only when listed).
    assert_eq!(
        policy(&["urn:flemma:project"], root, None, &home),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        policy(
            &["urn:flemma:cwd"],
            root,
            Some(&loose.join("a.chat")),
            &home
        ),
        [PathBuf::from("/")]
    );
}

#[test]
fn relative_writable_entries_are_taken_from_the_conversations_directory() {
    let s = Scratch::new("relative");
    let notes = s.mkdir("notes");
    let elsewhere = s.mkdir("elsewhere");
    assert_eq!(
        policy(
            &["build", "../shared"],
            &elsewhere,
            Some(&notes.join("a.chat")),
            &s.0
        ),
        [notes.join("build"), s.0.join("shared")]
    );
    // Without a file, from the working directory.
    assert_eq!(
        policy(&["build"], &elsewhere, None, &s.0),
        [elsewhere.join("build")]
    );
}

#[test]
fn a_conversation_opened_by_a_relative_path_has_an_absolute_store() {
    let chat = MemoryConversation::new("@You:\nhi\n").with_path("notes/x.chat");
    let path = flemma_core::Conversation::path(&chat).unwrap().to_owned();
    let store = flemma_store::Store::new(
        &Config::new().options().unwrap().tools.store,
        Some(&path),
        "1",
    )
    .unwrap();
    let dir = store.directory().unwrap();
    assert!(dir.is_absolute(), "{}", dir.display());
    assert_eq!(dir, path.parent().unwrap().join(".flemma/x.chat"));
}
