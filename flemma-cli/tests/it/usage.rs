//! Usage and cost: `flemma run`'s `request N:` lines from a real provider's stream on a local
//! server, the conversation's usage log, `flemma usage`, and who may set prices.

use std::path::Path;

use crate::scratch::Scratch;
use crate::{scratch, text};

/// The recorded Anthropic stream with the counts of a request that read most of its prompt
/// from the cache and wrote some of it for 5 minutes and for an hour; `message_delta` repeats
/// the totals without the split, as Anthropic sends them.
fn cached_stream() -> Vec<u8> {
    let recorded =
        std::fs::read_to_string(crate::peer_dir().join("anthropic_hello_success_stream.txt"))
            .unwrap();
    let start = r#""usage":{"input_tokens":11,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":3"#;
    let delta = r#""usage":{"input_tokens":11,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":12}"#;
    assert!(recorded.contains(start) && recorded.contains(delta));
    recorded
        .replace(
            start,
            r#""usage":{"input_tokens":200,"cache_creation_input_tokens":1500,"cache_read_input_tokens":9800,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":500},"output_tokens":3"#,
        )
        .replace(
            delta,
            r#""usage":{"input_tokens":200,"cache_creation_input_tokens":1500,"cache_read_input_tokens":9800,"output_tokens":310}"#,
        )
        .into_bytes()
}

/// A local Anthropic endpoint answering every request with [`cached_stream`].
async fn server() -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_bytes(cached_stream()),
        )
        .mount(&server)
        .await;
    server
}

/// `flemma run FILE --model MODEL` against `uri`, in FILE's directory (its flemma.toml
/// applies).
async fn run(chat: &Path, uri: String, model: &str) -> std::process::Output {
    run_with(chat, uri, Some(model), &[]).await
}

/// [`run`] with more arguments (`--set KEY=VALUE`), and without `--model` for `None`.
async fn run_with(
    chat: &Path,
    uri: String,
    model: Option<&str>,
    extra: &[&str],
) -> std::process::Output {
    let chat = chat.to_owned();
    let mut extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    if let Some(model) = model {
        extra.extend(["--model".to_owned(), model.to_owned()]);
    }
    tokio::task::spawn_blocking(move || {
        crate::flemma_command()
            .current_dir(chat.parent().unwrap())
            .args(["run", chat.to_str().unwrap(), "--provider", "anthropic"])
            .args(&extra)
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("FLEMMA_BASE_URL", uri)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn usage_json(chat: &Path) -> serde_json::Value {
    let out = crate::flemma_command()
        .current_dir(chat.parent().unwrap())
        .args(["usage", chat.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The cost of one [`cached_stream`] request of `claude-haiku-4-5` at the built-in table's
/// prices, each kind of token at its own price.
fn expected_cost() -> f64 {
    let table = flemma::providers::ModelTable::builtin();
    let p = &table.get("anthropic", "claude-haiku-4-5").unwrap().prices;
    (200.0 * p.input.unwrap()
        + 9_800.0 * p.cache_read.unwrap()
        + 1_000.0 * p.cache_write.unwrap()
        + 500.0 * p.cache_write_1h.unwrap()
        + 310.0 * p.output.unwrap())
        / 1e6
}

/// A directory of its own per test, with a chat in it.
fn project(name: &str, chat: &[u8]) -> Scratch {
    let chat = scratch(&format!("usage-{name}.chat"), chat);
    // No options file from an earlier run of the test.
    let _ = std::fs::remove_file(chat.parent().unwrap().join("flemma.toml"));
    chat
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_shows_each_request_and_the_conversation_totals_every_run() {
    let server = server().await;
    let chat = project("totals", b"@You:\nHello.\n");
    let out = run(&chat, server.uri(), "claude-haiku-4-5").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let cost = expected_cost();
    // 200 + 9,800 + 1,000 + 500 in; below a cent, the cost shows four decimals.
    assert!(2.0 * cost < 0.01, "{cost}");
    let wanted = format!("request 1: 11.5k in (9.8k cached, 1.5k to cache), 310 out, ${cost:.4}");
    assert!(stderr.contains(&wanted), "{wanted}\n{stderr}");
    assert!(stderr.contains("usage: 1 request, 11.5k in"), "{stderr}");
    // A second run of the same conversation adds to its log.
    std::fs::write(&chat, std::fs::read_to_string(&chat).unwrap() + "Again.\n").unwrap();
    let out = run(&chat, server.uri(), "claude-haiku-4-5").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = usage_json(&chat);
    assert_eq!(report["requests"], 2, "{report}");
    assert_eq!(report["usage"]["input"], 23_000, "{report}");
    assert_eq!(report["usage"]["cache_read"], 19_600, "{report}");
    assert_eq!(report["usage"]["cache_write_1h"], 1_000, "{report}");
    assert_eq!(report["usage"]["output"], 620, "{report}");
    let total = report["cost"].as_f64().unwrap();
    assert!((total - 2.0 * cost).abs() < 1e-12, "{total} {cost}");
    assert_eq!(report["models"][0]["model"], "claude-haiku-4-5");
    assert_eq!(report["unpriced_requests"], 0);
    let out = crate::flemma_command()
        .args(["usage", chat.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).ends_with(&format!(
            ": 2 requests, 23k in (19.6k cached, 3k to cache), 620 out, ${:.4}\n",
            2.0 * cost
        )),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_a_price_shows_tokens_and_no_cost() {
    let server = server().await;
    let chat = project("unpriced", b"@You:\nHello.\n");
    let out = run(&chat, server.uri(), "claude-nobody-made").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("request 1: 11.5k in (9.8k cached, 1.5k to cache), 310 out\n"),
        "{stderr}"
    );
    assert!(!stderr.contains('$'), "{stderr}");
    let report = usage_json(&chat);
    assert_eq!(report["cost"], serde_json::Value::Null, "{report}");
    assert_eq!(report["unpriced_requests"], 1, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_flemma_toml_sets_prices() {
    let server = server().await;
    let chat = project("host", b"@You:\nHello.\n");
    std::fs::write(
        chat.parent().unwrap().join("flemma.toml"),
        "[models.\"claude-haiku-4-5\"]\ninput = 0.0\ncache_read = 0.0\ncache_write = 0.0\n\
         cache_write_1h = 0.0\noutput = 100.0\n",
    )
    .unwrap();
    let out = run(&chat, server.uri(), "claude-haiku-4-5").await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // 310 out at $100 per million.
    assert!(stderr.contains("310 out, $0.031\n"), "{stderr}");
    // A price that cannot be is an error of the options file, before anything is sent.
    std::fs::write(
        chat.parent().unwrap().join("flemma.toml"),
        "[models.\"claude-haiku-4-5\"]\ninput = -1.0\n",
    )
    .unwrap();
    let out = run(&chat, server.uri(), "claude-haiku-4-5").await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("[models]"),
        "{}",
        text(&out.stderr)
    );
}

/// The attack: a conversation someone sent sets its own prices (to look cheap, or to slip
/// under a budget). A frontmatter may choose the model, never what it costs: the write is
/// refused and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontmatter_cannot_set_prices() {
    let server = server().await;
    let chat = project(
        "attack",
        b"```json\n{\"flemma\": {\"models\": {\"claude-haiku-4-5\": {\"input\": 0, \"output\": 0, \"cache_read\": 0, \"cache_write\": 0, \"cache_write_1h\": 0}}}}\n```\n@You:\nHello.\n",
    );
    let out = run(&chat, server.uri(), "claude-haiku-4-5").await;
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("models"), "{stderr}");
    assert!(server.received_requests().await.unwrap().is_empty());
    assert!(!stderr.contains("$0\n"), "{stderr}");
}

/// `budget.conversation.max_cost` over runs: each run may send while the conversation's log
/// says less was spent; the run that finds it spent sends nothing and exits 7, saying which
/// budget and how much.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_budget_stops_a_later_run_with_exit_7() {
    let server = server().await;
    let chat = project("budget", b"@You:\nHello.\n");
    let cost = expected_cost();
    // Room for one request and a part of another.
    let limit = format!("budget.conversation.max_cost={}", cost * 1.5);
    for run_number in 1..=3 {
        let before = server.received_requests().await.unwrap().len();
        std::fs::write(&chat, std::fs::read_to_string(&chat).unwrap() + "Again.\n").unwrap();
        let out = run_with(
            &chat,
            server.uri(),
            Some("claude-haiku-4-5"),
            &["--set", &limit],
        )
        .await;
        let stderr = text(&out.stderr);
        let sent = server.received_requests().await.unwrap().len() - before;
        if run_number < 3 {
            // The second run starts below the limit: it sends, and crosses it by that one
            // response at most.
            assert_eq!((out.status.code(), sent), (Some(0), 1), "{stderr}");
        } else {
            assert_eq!((out.status.code(), sent), (Some(7), 0), "{stderr}");
            assert!(
                stderr.contains("budget: conversation budget max_cost $"),
                "{stderr}"
            );
            assert!(stderr.contains("stopped: budget_reached"), "{stderr}");
        }
    }
}

/// A cost budget cannot be kept for a model without a price: nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cost_budget_refuses_a_model_without_a_price() {
    let server = server().await;
    let chat = project("budget-unpriced", b"@You:\nHello.\n");
    let out = run_with(
        &chat,
        server.uri(),
        Some("claude-nobody-made"),
        &["--set", "budget.run.max_cost=5"],
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("'claude-nobody-made' (anthropic) has no price"),
        "{stderr}"
    );
    assert!(server.received_requests().await.unwrap().is_empty());
}

/// The attack: a conversation someone sent raises the host's budget in its frontmatter. The
/// write is refused (the conversation stops on it) and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frontmatter_cannot_raise_the_hosts_budget() {
    let server = server().await;
    let chat = project(
        "budget-attack",
        b"```json\n{\"flemma\": {\"budget\": {\"run\": {\"max_cost\": 1000}}}}\n```\n@You:\nHello.\n",
    );
    std::fs::write(
        chat.parent().unwrap().join("flemma.toml"),
        "[budget.run]\nmax_cost = 0.000001\n",
    )
    .unwrap();
    let out = run(&chat, server.uri(), "claude-haiku-4-5").await;
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("budget.run.max_cost"), "{stderr}");
    assert!(server.received_requests().await.unwrap().is_empty());
}

/// The attack: a conversation names a model whose name steers the terminal. It is recorded as
/// given (the log is JSON) and shown with its controls escaped, in `flemma usage` and in the
/// budget's line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_name_cannot_steer_the_terminal() {
    let server = server().await;
    let chat = project(
        "escape",
        b"```json\n{\"flemma\": {\"model\": \"evil\\u001b[2J\\u001b]0;owned\\u0007\"}}\n```\n@You:\nHello.\n",
    );
    let out = run_with(&chat, server.uri(), None, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = usage_json(&chat);
    assert_eq!(
        report["models"][0]["model"],
        "evil\u{1b}[2J\u{1b}]0;owned\u{7}"
    );
    let out = crate::flemma_command()
        .args(["usage", chat.to_str().unwrap()])
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(shown.contains("evil"), "{shown}");
    // The budget's line names the model too.
    std::fs::write(&chat, std::fs::read_to_string(&chat).unwrap() + "Again.\n").unwrap();
    let out = run_with(
        &chat,
        server.uri(),
        Some("claude-haiku-4-5"),
        &["--set", "budget.run.max_cost=1"],
    )
    .await;
    let stderr = text(&out.stderr);
    // The frontmatter's model wins over `--model`; it has no price.
    assert!(stderr.contains("has no price"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\u{7}'),
        "{stderr:?}"
    );
}

/// `flemma run --json`: the model's text stays in the file, stdout has one JSON summary of how
/// the run ended and what each request used; a budget reached is in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_summarizes_the_run() {
    let server = server().await;
    let chat = project("json", b"@You:\nHello.\n");
    let out = run_with(&chat, server.uri(), Some("claude-haiku-4-5"), &["--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["stop"], "finished", "{summary}");
    assert_eq!(summary["exit_code"], 0);
    assert_eq!(summary["usage"]["requests"], 1);
    assert_eq!(summary["requests"][0]["model"], "claude-haiku-4-5");
    assert_eq!(summary["requests"][0]["usage"]["cache_read"], 9_800);
    let cost = summary["requests"][0]["cost"].as_f64().unwrap();
    assert!((cost - expected_cost()).abs() < 1e-12, "{cost}");
    assert_eq!(summary["budget"], serde_json::Value::Null);
    assert!(
        std::fs::read_to_string(&chat)
            .unwrap()
            .contains("Hello! How can I assist you today?")
    );
    // A budget reached: its scope and limit, exit 7.
    std::fs::write(&chat, std::fs::read_to_string(&chat).unwrap() + "Again.\n").unwrap();
    let out = run_with(
        &chat,
        server.uri(),
        Some("claude-haiku-4-5"),
        &["--json", "--set", "budget.conversation.max_tokens=100"],
    )
    .await;
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["stop"], "budget_reached", "{summary}");
    assert_eq!(summary["budget"]["scope"], "conversation");
    assert_eq!(summary["budget"]["limit"]["kind"], "tokens");
    assert_eq!(summary["budget"]["limit"]["spent"], 11_810);
    assert_eq!(summary["usage"]["requests"], 0);
}
