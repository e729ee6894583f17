//! Tracing spans named and attributed by the OpenTelemetry semantic conventions for
//! generative AI: a run is an `invoke_agent` span, each model request a `chat` span, each
//! tool call an `execute_tool` span, with the approval, hooks, background jobs, subagents and
//! compaction as child spans.
//!
//! The spans are [`tracing`] spans at `INFO` level on the target [`TARGET`]; a host sees them
//! through any `tracing` subscriber (a `tracing-opentelemetry` layer exports them over OTLP: the
//! `flemma` command does with its `otel` feature). Without a subscriber that listens, a span
//! costs a check of a cached interest. Each span carries `otel.name` (the conventions' span
//! name, `chat claude-sonnet-4-5`) and `otel.kind`, which such a layer reads; errors set
//! `error.type` and `otel.status_code`.
//!
//! | span | `gen_ai.operation.name` | attributes |
//! | --- | --- | --- |
//! | `invoke_agent` | `invoke_agent` | `gen_ai.agent.name`, `gen_ai.conversation.id`, `gen_ai.provider.name`, `flemma.chat.path` |
//! | `chat` | `chat` | `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.request.max_tokens`, `gen_ai.response.model`, `gen_ai.response.id`, `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`, `gen_ai.conversation.id`, `flemma.turn`, `flemma.compaction` |
//! | `execute_tool` | `execute_tool` | `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`, `gen_ai.conversation.id`, `flemma.chat.path`, `flemma.tool.status` (`ok`, `error`), and `flemma.job.id` for a call run as a background job (its span ends with the job) |
//! | `flemma.approval` | — | `gen_ai.tool.name`, `gen_ai.tool.call.id`, `flemma.approval.decision` |
//! | `flemma.hook` | — | `flemma.hook.event`, `flemma.hook.name` |
//! | `flemma.compaction` | — | `flemma.compaction.trigger`, `flemma.compaction.messages`, `flemma.compaction.tokens` |
//!
//! The messages, tool inputs and results are never recorded: they may hold secrets.
//! `gen_ai.tool.call.id` and `flemma.chat.path` find the place in the `.chat` file.

use tracing::Span;
use tracing::field::Empty;

pub(crate) mod content;
#[cfg(feature = "otel")]
mod otlp;
#[cfg(feature = "otel")]
pub use otlp::{Otlp, OtlpError};

/// The target of every span this module makes.
pub const TARGET: &str = "flemma::gen_ai";

/// `tracing::info_span!` on [`TARGET`]; in a build with `--cfg flemma_no_spans`, no span
/// ([`Span::none`]).
///
/// That cfg is a measurement switch only, not a feature: `RUSTFLAGS="--cfg flemma_no_spans"`
/// builds the same program without these spans (the log events and the `Span::current()`
/// lookups stay), so a bench can measure what the spans cost when no subscriber listens
/// (docs/performance.md, "Telemetry"). Both branches are compiled in every build, so the
/// switched-off one cannot rot; the optimizer drops the constant one.
macro_rules! span {
    ($($span:tt)*) => {
        if cfg!(flemma_no_spans) {
            Span::none()
        } else {
            tracing::info_span!(target: TARGET, $($span)*)
        }
    };
}

/// Whether a subscriber listens to this module's spans (what only they would hold, the
/// captured content, is not built otherwise).
pub(crate) fn listening() -> bool {
    !cfg!(flemma_no_spans) && tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// The conventions' name of a provider (`gen_ai.provider.name`): `anthropic`, `openai`,
/// `gcp.vertex_ai`; others as they name themselves.
pub fn provider_name(provider: &str) -> &str {
    match provider {
        "openai" | "openai-chat" => "openai",
        "vertex" => "gcp.vertex_ai",
        other => other,
    }
}

/// A count as an OTLP integer: `tracing` hands a `u64` to a `tracing-opentelemetry` layer as
/// text, an `i64` as an integer.
fn int(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The span of a run of a session (`invoke_agent NAME`): `flemma`, or the subagent's name
/// for a child session.
pub(crate) fn agent(
    name: &str,
    conversation: &str,
    provider: Option<&str>,
    chat: Option<&std::path::Path>,
) -> Span {
    span!(
        "invoke_agent",
        otel.name = %format!("invoke_agent {name}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = name,
        gen_ai.conversation.id = conversation,
        gen_ai.provider.name = provider.map(provider_name),
        flemma.chat.path = chat.map(|chat| tracing::field::display(chat.display())),
        error.type = Empty,
    )
}

/// The span of one model request (`chat MODEL`).
pub(crate) fn chat(
    conversation: &str,
    provider: &str,
    model: &str,
    max_tokens: Option<u64>,
    turn: u64,
    compaction: bool,
) -> Span {
    span!(
        "chat",
        otel.name = %format!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_name(provider),
        gen_ai.request.model = model,
        gen_ai.request.max_tokens = max_tokens.map(int),
        gen_ai.conversation.id = conversation,
        gen_ai.input.messages = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.output.messages = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        flemma.turn = int(turn),
        flemma.compaction = compaction,
        error.type = Empty,
    )
}

/// Records a response's usage on its `chat` span.
pub(crate) fn record_usage(span: &Span, usage: &flemma_providers::Usage) {
    span.record("gen_ai.usage.input_tokens", int(usage.input));
    span.record("gen_ai.usage.output_tokens", int(usage.output));
    span.record(
        "gen_ai.usage.cache_read.input_tokens",
        int(usage.cache_read),
    );
    span.record(
        "gen_ai.usage.cache_creation.input_tokens",
        int(usage.cache_write),
    );
}

/// Records what the provider said about a response on its `chat` span: its id
/// (`gen_ai.response.id`) and the model that answered (`gen_ai.response.model`), each when told.
pub(crate) fn record_response(span: &Span, id: Option<&str>, model: Option<&str>) {
    if let Some(id) = id {
        span.record("gen_ai.response.id", id);
    }
    if let Some(model) = model {
        span.record("gen_ai.response.model", model);
    }
}

/// The conventions' word for why a response ended: `stop`, `tool_call`, `length`,
/// `content_filter`, or the provider's own.
pub(crate) fn finish_reason(stop: &flemma_providers::StopReason) -> &str {
    use flemma_providers::StopReason;
    match stop {
        StopReason::EndTurn => "stop",
        StopReason::ToolUse => "tool_call",
        StopReason::MaxTokens => "length",
        StopReason::Blocked => "content_filter",
        StopReason::Other(other) => other.as_str(),
    }
}

/// Records why a response ended (`gen_ai.response.finish_reasons`, [`finish_reason`]).
pub(crate) fn record_finish(span: &Span, stop: Option<&flemma_providers::StopReason>) {
    if let Some(stop) = stop {
        span.record("gen_ai.response.finish_reasons", finish_reason(stop));
    }
}

/// Marks `span` failed with `kind` (`error.type`).
pub(crate) fn record_error(span: &Span, kind: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "ERROR");
}

/// The span of one tool call (`execute_tool NAME`); `job` for a call run as a background job
/// (the span then ends with the job).
pub(crate) fn tool(
    conversation: &str,
    name: &str,
    id: &str,
    chat: Option<&std::path::Path>,
    job: Option<&str>,
) -> Span {
    span!(
        "execute_tool",
        otel.name = %format!("execute_tool {name}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = id,
        gen_ai.tool.type = "function",
        gen_ai.conversation.id = conversation,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        flemma.chat.path = chat.map(|chat| tracing::field::display(chat.display())),
        flemma.job.id = job,
        flemma.tool.status = Empty,
        error.type = Empty,
    )
}

/// The span of the approval chain's decision on one call.
pub(crate) fn approval(name: &str, id: &str) -> Span {
    span!(
        "flemma.approval",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = id,
        flemma.approval.decision = Empty,
    )
}

/// The span of one hook run at `event`.
pub(crate) fn hook(event: &str, name: &str) -> Span {
    span!(
        "flemma.hook",
        otel.name = %format!("flemma.hook {event}"),
        flemma.hook.event = event,
        flemma.hook.name = name,
        error.type = Empty,
    )
}

/// The span of a compaction (its summary request is a `chat` span inside).
pub(crate) fn compaction(trigger: &str, messages: u64, tokens: u64) -> Span {
    span!(
        "flemma.compaction",
        flemma.compaction.trigger = trigger,
        flemma.compaction.messages = int(messages),
        flemma.compaction.tokens = int(tokens),
        error.type = Empty,
    )
}
