//! The session builds prompts under `templates.file_access`: a file the model `read`s (its
//! result is a template) cannot attach files outside the conversation's project.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::{Session, Stop};
use serde_json::json;

use crate::scratch::Scratch;

/// A repository with the conversation, a file the model reads, and a secret outside it.
fn project(test: &str) -> (Scratch, PathBuf) {
    let base = Scratch::new(format!(
        "flemma-facade-access-{}-{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(base.join("repo/.git")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret.txt"), "outside-secret-u1").unwrap();
    std::fs::write(base.join("repo/inside.txt"), "inside-text-v2").unwrap();
    let secret = base.join("outside/secret.txt");
    std::fs::write(
        base.join("repo/notes.txt"),
        format!(
            "see @//{};type=text/plain and @./inside.txt",
            secret.display().to_string().trim_start_matches('/')
        ),
    )
    .unwrap();
    let repo = base.join("repo");
    (base, repo)
}

/// Runs a session in which the model reads `notes.txt`, with the host's `config`; returns
/// the second request.
async fn second_request(repo: &Path, frontmatter: &str, config: flemma::config::Config) -> String {
    let path = repo.join("talk.chat");
    std::fs::write(
        &path,
        format!("{frontmatter}@You:\nRead notes.txt, please.\n"),
    )
    .unwrap();
    let registry = flemma::runtime::ToolRegistry::new();
    flemma::runtime::register_builtins(&registry).unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        Turn::tool_use(
            "read",
            json!({"label": "notes", "path": "notes.txt", "offset": null, "limit": null}),
        ),
        Turn::text("Done."),
    ]));
    let chat = Arc::new(flemma::runtime::FileConversation::new(&path));
    let session = Session::builder(chat, registry, provider.clone())
        .executor(|executor| executor.config(config))
        .flush_interval(Duration::ZERO)
        .build();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    provider.requests()[1].clone()
}

#[tokio::test]
async fn a_read_file_cannot_attach_a_file_outside_the_project() {
    let (_base, repo) = project("default");
    let host = flemma::config::Config::new;
    let request = second_request(&repo, "", host()).await;
    assert!(!request.contains("outside-secret-u1"), "{request}");
    assert!(request.contains("inside-text-v2"), "{request}");

    // `templates.file_access = "any"` is the spec's behaviour: a host's choice, or a
    // frontmatter's where the host lets frontmatters widen (issue 34).
    let any = "```json\n{\"flemma\": {\"templates\": {\"file_access\": \"any\"}}}\n```\n";
    let mut trusting = host();
    trusting.allow_frontmatter_widening(true);
    let request = second_request(&repo, any, trusting).await;
    assert!(request.contains("outside-secret-u1"), "{request}");
    let mut setup = host();
    setup
        .set(flemma::config::Layer::Setup, "templates.file_access", "any")
        .unwrap();
    let request = second_request(&repo, "", setup).await;
    assert!(request.contains("outside-secret-u1"), "{request}");
}
