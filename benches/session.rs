//! Session benchmark (issue 14 target): `cargo bench --bench session --features lua`.
//!
//! - `session/20_turns_1mb`: a scripted loop of 20 turns, each asking for one trivial tool,
//!   then a final answer, on the 1 MB transcript `../shared/tools/gen_chat.py 1000000 7`
//!   (generated once into `target/bench-1000000-7.chat`). Each iteration starts from the
//!   transcript in memory with a fresh session. Throughput is per turn: target ≤ 2 ms of SDK
//!   overhead per turn, the tool and the provider excluded.
//! - `session/20_turns_1mb_no_body`: the same with a provider whose `build_request` writes
//!   no body, which leaves the provider's work (serializing the 1 MB Anthropic request) out.
//! - `session/20_turns_1mb_plain_no_body`: that, on the transcript with its template
//!   expressions and `@./file` references made plain text (the prompt renders 356 Lua
//!   templates and looks up 356 files per request otherwise).
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput};
use flemma::config::{Config, Layer, Options};
use flemma::core::{ToolDefinition, ToolOutput, tool_fn};
use flemma::providers::{
    EventStream, LuaEngine, Prompt, Provider, Request, RequestOptions, ScriptedProvider, SendError,
    Turn,
};
use flemma::runtime::{Executor, MemoryConversation, ToolRegistry};
use flemma::runtime::{Session, Stop};
use serde_json::json;

const TURNS: usize = 20;

fn transcript() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cached = root.join("target/bench-1000000-7.chat");
    if let Ok(text) = std::fs::read_to_string(&cached) {
        return text;
    }
    let output = Command::new("python3")
        .arg(root.join("../shared/tools/gen_chat.py"))
        .args(["1000000", "7"])
        .output()
        .expect("python3 runs gen_chat.py");
    assert!(output.status.success(), "gen_chat.py failed");
    let text = String::from_utf8(output.stdout).expect("gen_chat.py writes UTF-8");
    let _ = std::fs::write(&cached, &text);
    text
}

fn registry() -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(tool_fn(
        ToolDefinition::builder("noop", "Does nothing.")
            .expect("name")
            .build()
            .expect("definition"),
        |_, _| ToolOutput::text("ok"),
    ));
    registry
}

fn script() -> ScriptedProvider {
    let mut turns: Vec<Turn> = (0..TURNS)
        .map(|_| Turn::text("Once more.").with_tool_use("noop", json!({})))
        .collect();
    turns.push(Turn::text("Done."));
    ScriptedProvider::new(turns)
}

/// The scripted provider without request bodies.
#[derive(Debug)]
struct NoBody(ScriptedProvider);

#[flemma::async_trait]
impl Provider for NoBody {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn request_options(&self, options: &Options) -> RequestOptions {
        self.0.request_options(options)
    }
    fn build_request(&self, _prompt: &Prompt<'_>, _options: &RequestOptions) -> Request {
        Request {
            body: String::new(),
        }
    }
    async fn stream(&self, request: Request) -> Result<EventStream, SendError> {
        self.0.stream(request).await
    }
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .configure_from_args();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let base = transcript();
    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools.auto_approve", json!(["noop"]))
        .expect("auto_approve");
    let mut group = c.benchmark_group("session");
    group.throughput(Throughput::Elements(TURNS as u64));
    let plain = base
        .replace("{{", "{ {")
        .replace("{%", "{ %")
        .replace("@./", "at ./");
    for (name, body, text) in [
        ("20_turns_1mb", true, &base),
        ("20_turns_1mb_no_body", false, &base),
        ("20_turns_1mb_plain_no_body", false, &plain),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let provider: Arc<dyn Provider> = if body {
                        Arc::new(script())
                    } else {
                        Arc::new(NoBody(script()))
                    };
                    let chat = Arc::new(MemoryConversation::new(text.clone()));
                    let executor = Executor::builder(chat, registry()).config(config.clone());
                    Session::from_executor(executor, provider)
                        .template_engine(Arc::new(LuaEngine::new()))
                        .build()
                },
                |session| {
                    let stop = runtime.block_on(session.run()).expect("run");
                    assert_eq!(stop, Stop::Finished);
                    session
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
    c.final_summary();
}
