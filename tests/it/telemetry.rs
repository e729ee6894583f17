//! The tracing spans of a run (issue 41), recorded in process by a `tracing-subscriber` layer:
//! two tool turns, one call denied by a hook, one background job; the tree of the generative-AI spans
//! and their attributes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flemma::core::hooks::{PreToolUseAnswer, on};
use flemma::providers::{ScriptedProvider, ScriptedUsage, Turn};
use flemma::runtime::hooks::hook_fn;
use flemma::runtime::telemetry::TARGET;
use flemma::runtime::{MemoryConversation, Session, Stop};
use serde_json::json;
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

use crate::scratch::Scratch;

/// A span of the generative-AI target as recorded: its parent among them, name and fields.
#[derive(Debug)]
struct Node {
    id: u64,
    parent: Option<u64>,
    name: &'static str,
    fields: BTreeMap<String, String>,
}

/// Records the spans of [`TARGET`], in the order they were created.
#[derive(Debug, Clone, Default)]
struct Recording(Arc<Mutex<Vec<Node>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S> Layer<S> for Recording
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().target() != TARGET {
            return;
        }
        let parent = ctx.span(id).and_then(|span| {
            span.scope()
                .skip(1)
                .find(|p| p.metadata().target() == TARGET)
                .map(|p| p.id().into_u64())
        });
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Node {
            id: id.into_u64(),
            parent,
            name: attrs.metadata().name(),
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut nodes = self.0.lock().unwrap();
        if let Some(node) = nodes.iter_mut().rev().find(|n| n.id == id.into_u64()) {
            values.record(&mut Fields(&mut node.fields));
        }
    }
}

impl Recording {
    /// A recording, the default subscriber of this thread until the guard drops.
    fn installed() -> (Self, tracing::subscriber::DefaultGuard) {
        let recording = Self::default();
        let subscriber = tracing_subscriber::registry().with(recording.clone());
        (recording, tracing::subscriber::set_default(subscriber))
    }

    /// The tree, one span a line, indented under its parent; ids that change from run to run
    /// (the conversation's) are replaced.
    fn tree(&self) -> String {
        let nodes = self.0.lock().unwrap();
        let mut out = String::new();
        walk(&nodes, None, 0, &mut out);
        out
    }
}

/// Writes the spans under `parent`, depth-first in the order they were created.
fn walk(nodes: &[Node], parent: Option<u64>, depth: usize, out: &mut String) {
    use std::fmt::Write as _;
    for node in nodes.iter().filter(|n| n.parent == parent) {
        let fields: Vec<String> = node
            .fields
            .iter()
            .map(|(k, v)| match k.as_str() {
                "gen_ai.conversation.id" => format!("{k}=[id]"),
                "flemma.job.id" => format!("{k}=[job]"),
                _ => format!("{k}={v}"),
            })
            .collect();
        let _ = writeln!(
            out,
            "{}{} {{{}}}",
            "  ".repeat(depth),
            node.name,
            fields.join(", ")
        );
        walk(nodes, Some(node.id), depth + 1, out);
    }
}

fn used(input: u64, output: u64) -> ScriptedUsage {
    ScriptedUsage {
        input_tokens: Some(input),
        output_tokens: Some(output),
        cache_read_tokens: Some(input / 2),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_run_is_a_tree_of_gen_ai_spans() {
    let (recording, _default) = Recording::installed();

    // Where the job's journal is kept (the conversation's store).
    let dir = Scratch::new(format!("flemma-telemetry-run-{}", std::process::id()));
    let chat = Arc::new(MemoryConversation::new(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"calculator\", \"wait\"], \
         \"autopilot\": {\"resume_delay\": 20}}}}\n```\n@You:\nCompute, then wait.\n",
    ));
    let provider = Arc::new(ScriptedProvider::new([
        Turn {
            usage: Some(used(120, 30)),
            ..Turn::tool_use("calculator", json!({"expression": "6 * 7"}))
                .with_tool_use("calculator", json!({"expression": "1 / 0"}))
        },
        Turn {
            usage: Some(used(200, 20)),
            ..Turn::tool_use("wait", json!({"ms": 50, "flemma.background": true}))
        },
        Turn {
            usage: Some(used(260, 5)),
            ..Turn::text("It runs in the background.")
        },
        Turn {
            usage: Some(used(300, 5)),
            ..Turn::text("42, and the wait is over.")
        },
    ]));
    let no_division = hook_fn(on::PreToolUse, |call| {
        if call.input["expression"]
            .as_str()
            .unwrap_or_default()
            .contains('/')
        {
            PreToolUseAnswer::deny("no division")
        } else {
            PreToolUseAnswer::pass()
        }
    });
    let session = Session::builder(chat.clone(), crate::background_registry(), provider.clone())
        .flush_interval(Duration::ZERO)
        .hook(no_division.named("no-division").unwrap())
        .wait_for_jobs(true)
        .executor(|e| e.config(crate::unnamed_store_in(&dir)))
        .build();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(provider.remaining(), 0);
    insta::assert_snapshot!("run_spans", recording.tree());
}

/// A conversation with two exchanges above its last message, compacted keeping one.
const COMPACTABLE: &str = "```json\n{\"flemma\": {\"compaction\": {\"keep_turns\": 1}}}\n```\n\
     @You:\nOne.\n\n@Assistant:\nFirst.\n\n@You:\nTwo.\n\n@Assistant:\nSecond.\n\n@You:\nThree?\n";

#[tokio::test]
async fn a_compaction_is_a_span_around_its_summary_request() {
    let (recording, _default) = Recording::installed();
    let chat = Arc::new(MemoryConversation::new(COMPACTABLE));
    let provider = Arc::new(ScriptedProvider::new([Turn {
        usage: Some(used(40, 8)),
        ..Turn::text("They counted.")
    }]));
    let session = Session::builder(chat, crate::background_registry(), provider).build();
    session.compact(None).await.unwrap();
    let tree = recording.tree();
    assert!(
        tree.starts_with(
            "flemma.compaction {flemma.compaction.messages=2, flemma.compaction.tokens=3, flemma.compaction.trigger=manual}\n  chat {flemma.compaction=true, "
        ),
        "{tree}"
    );
    assert!(tree.contains("gen_ai.usage.output_tokens=8"), "{tree}");
}

/// The fields of the `chat` spans, one map per span.
fn chats(recording: &Recording) -> Vec<BTreeMap<String, String>> {
    recording
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|n| n.name == "chat")
        .map(|n| n.fields.clone())
        .collect()
}

#[tokio::test]
async fn a_chat_span_has_the_response_id_and_model_the_provider_told() {
    let (recording, _default) = Recording::installed();
    let chat = Arc::new(MemoryConversation::new("@You:\nHello?\n"));
    let provider = Arc::new(ScriptedProvider::new([Turn::recording(crate::peer(
        "anthropic_hello_success_stream.txt",
    ))]));
    let session = Session::builder(chat, crate::background_registry(), provider)
        .flush_interval(Duration::ZERO)
        .build();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let chats = chats(&recording);
    assert_eq!(chats.len(), 1, "{chats:?}");
    assert_eq!(
        chats[0]["gen_ai.response.id"],
        "msg_01Wq2chmRdH54Js2VjCQmmT4"
    );
    // The model the provider says answered, beside the one requested.
    assert_eq!(
        chats[0]["gen_ai.response.model"],
        "claude-sonnet-4-5-20250929"
    );
    assert_eq!(chats[0]["gen_ai.request.model"], "scripted");
}

#[tokio::test]
async fn a_summary_request_span_has_the_response_id_and_model_the_provider_told() {
    let (recording, _default) = Recording::installed();
    let chat = Arc::new(MemoryConversation::new(COMPACTABLE));
    let provider = Arc::new(ScriptedProvider::new([Turn::recording(crate::peer(
        "vertex_final_response_streaming.txt",
    ))]));
    let session = Session::builder(chat, crate::background_registry(), provider).build();
    session.compact(None).await.unwrap();
    let chats = chats(&recording);
    assert_eq!(chats.len(), 1, "{chats:?}");
    assert_eq!(chats[0]["flemma.compaction"], "true");
    assert_eq!(chats[0]["gen_ai.response.id"], "_J5jae71BoeQmNAP8YXCqQU");
    assert_eq!(chats[0]["gen_ai.response.model"], "gemini-3-flash-preview");
}

const SYSTEM_CANARY: &str = "canary-system-41a";
const USER_CANARY: &str = "canary-user-41b";
const INPUT_CANARY: &str = "canary-input-41c";
const REPLY_CANARY: &str = "canary-reply-41d";

/// A run of a conversation whose system prompt, user message, tool input, tool result and
/// reply each hold a canary; `frontmatter` is written into its `flemma` table, `host` sets
/// options in the host's runtime layer. The run's outcome and its spans.
async fn canary_run(
    frontmatter: &str,
    host: &[(&str, serde_json::Value)],
) -> (Result<Stop, flemma::runtime::SessionError>, Recording) {
    let (recording, _default) = Recording::installed();
    let chat = Arc::new(MemoryConversation::new(format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"auto_approve\": [\"calculator\"]}}{frontmatter}}}}}\n```\n\
         @System:\nYou count. {SYSTEM_CANARY}\n\n@You:\nCount {USER_CANARY}.\n"
    )));
    let provider = Arc::new(ScriptedProvider::new([
        Turn::tool_use("calculator", json!({"expression": INPUT_CANARY})),
        Turn::text(format!("Done {REPLY_CANARY}.")),
    ]));
    let mut config = flemma::config::Config::new();
    for (key, value) in host {
        config
            .set(flemma::config::Layer::Runtime, key, value.clone())
            .unwrap();
    }
    let session = Session::builder(chat, crate::background_registry(), provider)
        .flush_interval(Duration::ZERO)
        .executor(|e| e.config(config))
        .build();
    let stop = session.run().await;
    (stop, recording)
}

/// Every field of every span, as text.
fn all_fields(recording: &Recording) -> String {
    format!("{:?}", recording.0.lock().unwrap())
}

/// The attack first: by default, and when a transcript's frontmatter asks for it, no span
/// holds the conversation's content (the system prompt, a message, a tool's input or result,
/// the reply).
#[tokio::test]
async fn no_span_holds_content_unless_the_host_asks() {
    let canaries = [SYSTEM_CANARY, USER_CANARY, INPUT_CANARY, REPLY_CANARY];
    let (stop, recording) = canary_run("", &[]).await;
    assert_eq!(stop.unwrap(), Stop::Finished);
    let fields = all_fields(&recording);
    assert!(fields.contains("execute_tool"), "{fields}");
    for canary in canaries {
        assert!(!fields.contains(canary), "{canary}: {fields}");
    }
    // A frontmatter cannot turn the capture on: the run stops on the write, nothing recorded.
    let (stop, recording) = canary_run(", \"telemetry\": {\"capture_content\": true}", &[]).await;
    let error = stop.unwrap_err();
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    assert!(chain.contains("telemetry.capture_content"), "{chain}");
    let fields = all_fields(&recording);
    for canary in canaries {
        assert!(!fields.contains(canary), "{canary}: {fields}");
    }
}

/// With `telemetry.capture_content` from the host, the spans hold the content in the
/// conventions' JSON shapes; a frontmatter may turn it off.
#[tokio::test]
async fn the_host_may_turn_the_content_capture_on() {
    let on = [("telemetry.capture_content", json!(true))];
    let (stop, recording) = canary_run("", &on).await;
    assert_eq!(stop.unwrap(), Stop::Finished);
    let chats = chats(&recording);
    assert_eq!(chats.len(), 2);
    let parse = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
    assert_eq!(
        parse(&chats[0]["gen_ai.system_instructions"]),
        json!([{"type": "text", "content": format!("You count. {SYSTEM_CANARY}")}])
    );
    assert_eq!(
        parse(&chats[0]["gen_ai.input.messages"]),
        json!([{"role": "user", "parts": [{"type": "text", "content": format!("Count {USER_CANARY}.")}]}])
    );
    assert_eq!(
        parse(&chats[0]["gen_ai.output.messages"]),
        json!([{"role": "assistant", "finish_reason": "tool_call", "parts": [
            {"type": "tool_call", "id": "toolu_scripted_1_1", "name": "calculator",
             "arguments": {"expression": INPUT_CANARY}}
        ]}])
    );
    let second = parse(&chats[1]["gen_ai.input.messages"]);
    assert_eq!(
        second[2],
        json!({"role": "user", "parts": [{"type": "tool_call_response", "id": "toolu_scripted_1_1",
            "response": format!("cannot evaluate {INPUT_CANARY:?}")}]}),
        "{second}"
    );
    assert_eq!(
        parse(&chats[1]["gen_ai.output.messages"]),
        json!([{"role": "assistant", "finish_reason": "stop", "parts": [
            {"type": "text", "content": format!("Done {REPLY_CANARY}.")}
        ]}])
    );
    let tool = {
        let nodes = recording.0.lock().unwrap();
        nodes
            .iter()
            .find(|n| n.name == "execute_tool")
            .unwrap()
            .fields
            .clone()
    };
    assert_eq!(
        parse(&tool["gen_ai.tool.call.arguments"]),
        json!({"expression": INPUT_CANARY})
    );
    assert_eq!(
        tool["gen_ai.tool.call.result"],
        format!("cannot evaluate {INPUT_CANARY:?}")
    );
    // The conversation may turn it off.
    let (stop, recording) = canary_run(", \"telemetry\": {\"capture_content\": false}", &on).await;
    assert_eq!(stop.unwrap(), Stop::Finished);
    let fields = all_fields(&recording);
    assert!(!fields.contains(USER_CANARY), "{fields}");
}

/// A subagent's run is an `invoke_agent` span named after it, inside the `execute_tool` span
/// of the `agent` call that started it, with its own calls and requests under it.
#[tokio::test]
async fn a_subagent_run_is_an_invoke_agent_span_inside_its_agent_call() {
    use flemma::runtime::agents::{AgentDefinition, Agents, Subagents};
    let (recording, _default) = Recording::installed();

    let project = Scratch::new(format!("flemma-telemetry-agent-{}", std::process::id()));
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::write(project.join("change.txt"), "a - b\n").unwrap();
    let chat_path = project.join("notes.chat");
    std::fs::write(&chat_path, "@You:\nHave change.txt reviewed.\n").unwrap();
    let mut agents = Agents::new();
    agents.register(
        AgentDefinition::new("reviewer", "Reviews a file.", "You review code.")
            .unwrap()
            .with_tools(["read"])
            .unwrap(),
    );
    let subagents = Subagents::new(agents);
    let tools = flemma::runtime::ToolRegistry::new();
    flemma::runtime::register_builtins(&tools).unwrap();
    tools.register(subagents.tool().unwrap());
    let provider = Arc::new(ScriptedProvider::new([
        Turn::tool_use(
            "agent",
            json!({"agent": "reviewer", "prompt": "Review change.txt."}),
        ),
        Turn::tool_use("read", json!({"path": "change.txt"})),
        Turn::text("It subtracts."),
        Turn::text("The reviewer says it subtracts."),
    ]));
    let mut config = flemma::config::Config::new();
    config
        .set(
            flemma::config::Layer::Setup,
            "tools.auto_approve",
            json!(["$standard", "agent"]),
        )
        .unwrap();
    let session = Session::builder(
        Arc::new(flemma::runtime::FileConversation::new(&chat_path)),
        tools,
        provider,
    )
    .flush_interval(Duration::ZERO)
    .executor(|e| e.config(config))
    .subagents(subagents)
    .build();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let tree = recording.tree();
    let names: Vec<String> = tree
        .lines()
        .map(|line| {
            let indent = line.len() - line.trim_start().len();
            let name = line.trim_start().split(' ').next().unwrap();
            let otel = line
                .split("otel.name=")
                .nth(1)
                .map_or(name, |rest| rest.split([',', '}']).next().unwrap());
            format!("{}{otel}", " ".repeat(indent))
        })
        .collect();
    assert_eq!(
        names,
        [
            "invoke_agent flemma",
            "  chat scripted",
            "  flemma.approval",
            "  execute_tool agent",
            "    invoke_agent reviewer",
            "      chat scripted",
            "      flemma.approval",
            "      execute_tool read",
            "      chat scripted",
            "  chat scripted",
        ],
        "{tree}"
    );
    assert!(tree.contains("gen_ai.agent.name=reviewer"), "{tree}");
}
