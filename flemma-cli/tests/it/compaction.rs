//! Compaction through the command against a local Anthropic endpoint answering with a real
//! recorded stream: `flemma compact`, and `flemma run` past `compaction.threshold` (and with
//! it off).

use std::path::Path;

use crate::scratch::Scratch;
use crate::{scratch, text};

const CANARY: &str = "canary-of-the-first-message";
/// What the recorded stream answers (the summary, here).
const ANSWER: &str = "Hello! How can I assist you today?";

/// A local Anthropic endpoint answering every request with the recorded hello stream.
async fn endpoint() -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let stream =
        std::fs::read(crate::peer_dir().join("anthropic_hello_success_stream.txt")).unwrap();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_bytes(stream),
        )
        .mount(&server)
        .await;
    server
}

/// A conversation of three long exchanges and a new question, in a directory of its own with
/// `options` as its flemma.toml.
fn project(name: &str, options: &str) -> Scratch {
    let filler = "the details of it ".repeat(40);
    let chat = format!(
        "@You:\nFirst, {CANARY}: {filler}\n\n@Assistant:\nAnswer one: {filler}\n\n\
         @You:\nSecond: {filler}\n\n@Assistant:\nAnswer two: {filler}\n\n\
         @You:\nThird: {filler}\n\n@Assistant:\nAnswer three.\n\n@You:\nAnd now?\n"
    );
    let chat = scratch(&format!("compaction-{name}.chat"), chat.as_bytes());
    std::fs::write(chat.parent().unwrap().join("flemma.toml"), options).unwrap();
    chat
}

async fn flemma(chat: &Path, uri: String, args: &[&str]) -> std::process::Output {
    let chat = chat.to_owned();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        crate::flemma_command()
            .current_dir(chat.parent().unwrap())
            .args(&args)
            .arg(chat.to_str().unwrap())
            .args(["--provider", "anthropic", "--model", "claude-haiku-4-5"])
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("FLEMMA_BASE_URL", uri)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

async fn bodies(server: &wiremock::MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| String::from_utf8(r.body.clone()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flemma_compact_writes_the_models_summary_into_the_file() {
    let server = endpoint().await;
    let chat = project("manual", "[compaction]\nkeep_turns = 1\n");
    let out = flemma(
        &chat,
        server.uri(),
        &["compact", "--instructions", "Keep every name."],
    )
    .await;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains(": compacted 4 messages ("), "{stdout}");
    assert!(stdout.contains("-token summary at line 13\n"), "{stdout}");
    assert!(stderr.contains("summary request: "), "{stderr}");
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains(CANARY) && sent[0].contains("Also: Keep every name."));
    assert!(
        !sent[0].contains("Answer three."),
        "the turn kept is not summarised"
    );

    let written = std::fs::read_to_string(&chat).unwrap();
    let doc = flemma::ast::parse(&written);
    assert!(doc.is_clean(), "{:?}", doc.diagnostics);
    assert_eq!(flemma::ast::print(&doc), written);
    let at = doc.compacted_at().unwrap();
    assert_eq!(doc.messages[at].span.start_line, 13);
    assert_eq!(doc.messages[at].compaction().unwrap().content, ANSWER);
    assert!(written.contains(CANARY), "the text above the block stays");
    // `flemma request` shows what the next send holds: the summary, not the canary.
    let out = crate::flemma_command()
        .current_dir(chat.parent().unwrap())
        .args(["request", chat.to_str().unwrap(), "--provider", "anthropic"])
        .output()
        .unwrap();
    let request = text(&out.stdout);
    assert!(
        request.contains(ANSWER) && !request.contains(CANARY),
        "{request}"
    );

    // Nothing left to summarise above the turn kept: said so, nothing written.
    let out = flemma(&chat, server.uri(), &["compact", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "nothing_to_compact", "{report}");
    assert_eq!(std::fs::read_to_string(&chat).unwrap(), written);
}

/// With a 1,000-token window and a threshold of 0.5, the request of this conversation (its
/// text and the built-in tools' definitions) is past it: the run compacts first, then sends
/// the compacted conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_compacts_past_the_threshold_and_sends_the_smaller_request() {
    let server = endpoint().await;
    let options = "[models.\"claude-haiku-4-5\"]\ncontext_window = 1000\n\
                   [compaction]\nthreshold = 0.5\nkeep_turns = 1\n";
    let chat = project("auto", options);
    let out = flemma(&chat, server.uri(), &["run"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("compacting: 4 messages ("), "{stderr}");
    assert!(stderr.contains("compacted: 4 messages into a "), "{stderr}");
    assert!(stderr.contains("summary request: "), "{stderr}");
    assert!(stderr.contains("request 1: "), "{stderr}");
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    assert!(sent[0].contains(CANARY) && sent[0].contains("Call no tool"));
    assert!(!sent[1].contains(CANARY) && sent[1].contains(ANSWER));
    assert!(sent[1].contains("was compacted"));
    assert!(
        sent[1].len() < sent[0].len(),
        "{} {}",
        sent[1].len(),
        sent[0].len()
    );

    // The same with compaction off (`--set`): one request, the whole conversation.
    let off = endpoint().await;
    let chat = project("off", options);
    let out = flemma(
        &chat,
        off.uri(),
        &["run", "--set", "compaction.enabled=false"],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("compact"), "{stderr}");
    let sent = bodies(&off).await;
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains(CANARY));
    assert_eq!(
        flemma::ast::parse(&std::fs::read_to_string(&chat).unwrap()).compacted_at(),
        None
    );
}
