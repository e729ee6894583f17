//! The request-size curve of a long conversation, with and without compaction (issue 40):
//! `cargo bench --bench compaction`.
//!
//! A scripted agent loop of 200 tool turns: each response is a 400-character text and one
//! `read_log` call, whose result is 1,600 characters (about 500 tokens a turn). The model's
//! context window is set to 32,000 tokens, `compaction.threshold` is 0.8 and
//! `compaction.keep_turns` 2. Without compaction every request carries every turn (about
//! 100,000 tokens at the end: past the window, a real provider would refuse it); with it, the
//! session compacts before each request estimated past 25,600 tokens, and the summary
//! (1,200 characters, written by the scripted model) stands for the turns above it.
//!
//! Prints, for every 10th request, the request body's size in bytes both ways (an Anthropic
//! body: the text, its JSON escapes and the tool's definition), then the compactions and the
//! total bytes sent. This is a measurement of sizes, not of time: the figures are exact for
//! this script and do not vary from run to run.
#![allow(
    clippy::expect_used,
    clippy::print_stdout,
    missing_docs,
    reason = "a benchmark binary prints its table and may abort on setup errors"
)]

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use flemma::config::Options;
use flemma::core::{ToolDefinition, ToolOutput, tool_fn};
use flemma::providers::{
    EventStream, ModelTable, Prompt, Provider, Request, RequestOptions, ScriptedProvider,
    SendError, StopReason, StreamEvent, Turn,
};
use flemma::runtime::compaction::SUMMARY_INSTRUCTIONS;
use flemma::runtime::{MemoryConversation, Session, Stop, ToolRegistry};
use serde_json::json;

const TURNS: usize = 200;
const WINDOW: u64 = 32_000;

/// The script's responses, and a summary for each summary request; every body's size.
#[derive(Debug)]
struct Curve {
    turns: ScriptedProvider,
    /// (was a summary request, body bytes), in order.
    sent: Mutex<Vec<(bool, usize)>>,
}

#[flemma::async_trait]
impl Provider for Curve {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn request_options(&self, options: &Options) -> RequestOptions {
        self.turns.request_options(options)
    }

    fn build_request(&self, prompt: &Prompt<'_>, options: &RequestOptions) -> Request {
        self.turns.build_request(prompt, options)
    }

    async fn stream(&self, request: Request) -> Result<EventStream, SendError> {
        let summary = request.body.contains(&SUMMARY_INSTRUCTIONS[..80]);
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((summary, request.body.len()));
        if !summary {
            return self.turns.stream(request).await;
        }
        let text = format!(
            "The user asked for the log to be read in order. {}",
            "Turns read so far found nothing unusual; the next line is next. ".repeat(18)
        );
        Ok(EventStream::from_events([
            StreamEvent::Text { text },
            StreamEvent::Done {
                stop: StopReason::EndTurn,
            },
        ]))
    }
}

fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(tool_fn(
        ToolDefinition::builder("read_log", "Read a page of the log.")
            .expect("name")
            .build()
            .expect("definition"),
        |input, _ctx| {
            let page = input["page"].as_u64().unwrap_or(0);
            let mut text = String::new();
            for i in 0..20 {
                let _ = writeln!(
                    text,
                    "page {page:03} line {i:02}: request served in 12 ms, status 200, cache hit"
                );
            }
            ToolOutput::text(text)
        },
    ));
    registry
}

fn script() -> Vec<Turn> {
    let mut turns: Vec<Turn> = (1..=TURNS)
        .map(|n| {
            Turn::text(format!(
                "Page {n} next. {}",
                "Nothing unusual on the page before; reading on. ".repeat(8)
            ))
            .with_tool_use("read_log", json!({"page": n}))
        })
        .collect();
    turns.push(Turn::text("The log is read: nothing unusual."));
    turns
}

/// Runs the loop; the sizes of the requests it sent (summary requests marked) and the
/// compactions.
fn run(compaction: bool) -> (Vec<(bool, usize)>, usize) {
    let frontmatter = json!({"flemma": {
        "tools": {"auto_approve": ["read_log"], "autopilot": {"max_turns": TURNS + 10}},
        "compaction": {"enabled": compaction, "threshold": 0.8, "keep_turns": 2},
    }});
    let chat = Arc::new(MemoryConversation::new(format!(
        "```json\n{frontmatter}\n```\n@You:\nRead the whole log, page by page, and tell me what is unusual.\n"
    )));
    let curve = Arc::new(Curve {
        turns: ScriptedProvider::new(script()),
        sent: Mutex::new(Vec::new()),
    });
    let table = ModelTable::empty()
        .with_overrides(&json!({"scripted": {"context_window": WINDOW}}))
        .expect("a table");
    let session = Session::builder(chat.clone(), registry(), curve.clone())
        .models(Arc::new(table))
        .build();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let stop = runtime.block_on(session.run());
    assert_eq!(stop.expect("the run"), Stop::Finished);
    let sent = curve
        .sent
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let compacted = flemma::ast::parse(&chat.text())
        .messages
        .iter()
        .filter(|m| m.compaction().is_some())
        .count();
    (sent, compacted)
}

fn main() {
    // `cargo test --benches` runs bench binaries with `--bench` absent: keep that quick.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let (plain, none) = run(false);
    let (compacted, blocks) = run(true);
    assert_eq!(none, 0);
    let main_of = |sent: &[(bool, usize)]| -> Vec<usize> {
        sent.iter().filter(|(s, _)| !s).map(|(_, b)| *b).collect()
    };
    let (a, b) = (main_of(&plain), main_of(&compacted));
    println!("request   body bytes without   body bytes with compaction");
    for i in (0..a.len()).filter(|i| i % 10 == 0 || *i == a.len() - 1) {
        println!(
            "{:>7}   {:>18}   {:>26}",
            i + 1,
            a[i],
            b.get(i).copied().unwrap_or(0),
        );
    }
    let summaries: Vec<usize> = compacted
        .iter()
        .filter(|(s, _)| *s)
        .map(|(_, b)| *b)
        .collect();
    println!(
        "compactions: {blocks} (summary requests of {} bytes on average)",
        summaries.iter().sum::<usize>() / summaries.len().max(1)
    );
    println!(
        "largest request: {} bytes without, {} with; all requests: {} bytes without, {} with (summary requests included)",
        a.iter().max().copied().unwrap_or(0),
        b.iter().max().copied().unwrap_or(0),
        a.iter().sum::<usize>(),
        compacted.iter().map(|(_, b)| b).sum::<usize>(),
    );
}
