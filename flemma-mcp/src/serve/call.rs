//! One served call: a conversation of the frontmatter and the call's `**Tool Use:**` block,
//! one executor cycle over it, and the call's result read back from it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use flemma_approval::{ApprovalContext, Decision, ToolCall};
use flemma_ast::ToolStatus;
use flemma_core::{Answer, approver_fn};
use flemma_ids::{ToolName, ToolUseId};
use flemma_runtime::{CycleReport, Event, Executor, Session};
use flemma_schema::BACKGROUND;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::error::ServeError;
use super::server::{ServeApproval, ToolServer};

/// The user message before the call: the conversation's first message (it is never sent).
const PREAMBLE: &str = "@You:\nA call from an MCP client (`flemma mcp serve`).\n\n@Assistant:\n";

/// Removes `flemma.background` from a served input schema: an MCP call's answer is its
/// result, so it runs in the foreground.
pub(super) fn strip_background(schema: &mut Map<String, Value>) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.remove(BACKGROUND);
    }
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.retain(|name| name != BACKGROUND);
    }
}

/// An error result with one text.
fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Runs the call `name(arguments)` of `server`'s conversation in a cycle of its own.
pub(super) async fn run(
    server: &ToolServer,
    name: &str,
    mut arguments: Map<String, Value>,
    cancel: CancellationToken,
) -> Result<CallToolResult, ServeError> {
    let inner = &server.inner;
    let tool = ToolName::new(name).map_err(|_| ServeError::UnknownTool(name.to_owned()))?;
    // A strict schema's harness parameter may come as `null`; `true` asks for what MCP
    // cannot give.
    match arguments.remove(BACKGROUND) {
        None | Some(Value::Null | Value::Bool(false)) => {}
        Some(_) => {
            return Ok(error_result(format!(
                "`{BACKGROUND}` is not available over MCP: a served call runs in the foreground \
                 and its result is the answer"
            )));
        }
    }
    let n = inner.calls.fetch_add(1, Ordering::Relaxed);
    let id = ToolUseId::new(format!("toolu_mcp_{}_{n}", inner.stamp))
        .map_err(|_| ServeError::NoResult(format!("toolu_mcp_{}_{n}", inner.stamp)))?;
    let block = flemma_ast::writer::tool_use_block("", &tool, &id, &arguments);
    let text = server.text(&format!("{PREAMBLE}{block}")).await?;
    let chat = Arc::new(server.conversation(text));
    let session = Session::tools_only(chat, inner.registry.clone())
        .executor(|mut executor| {
            executor = executor
                .config(inner.config.clone())
                .sandbox_backends(inner.backends.clone())
                .on_event(|event| {
                    if let Event::Warning(warning) = event {
                        tracing::warn!(target: "flemma_mcp::serve", "{warning}");
                    }
                });
            if server.file().is_none() {
                // Without a file, the store's unnamed format names the conversation by its id.
                executor = executor.conversation_id("mcp-serve");
            }
            if inner.approval == ServeApproval::All {
                executor = executor.approver(Arc::new(approver_fn(|_| Answer::Approve)));
            }
            executor
        })
        .build();
    let report = cycle(&session, id.as_str(), &cancel).await?;
    let executor = session.executor();
    let (doc, _) = executor
        .transcript()
        .document()
        .await
        .map_err(flemma_runtime::ExecutorError::from)?;
    let Some(result) = flemma_ast::find_tool_result_by_id(&doc, id.as_str()) else {
        return Err(ServeError::NoResult(id.to_string()));
    };
    let result = result.node;
    let placed = report.placed.iter().find(|p| p.id == id).map(|p| p.status);
    match result.status {
        Some(ToolStatus::Pending) => Ok(error_result(format!(
            "`{tool}` needs approval: the conversation's approval chain leaves this call \
                 pending for a human to decide, and this server does not approve pending calls. \
                 Approve the tool in the conversation's options (`tools.auto_approve`), or start \
                 the server with `flemma mcp serve --approve all`."
        ))),
        None => Ok(CallToolResult::success(vec![ContentBlock::text(
            result.content.clone(),
        )])),
        // The executor writes a resolver's reason after the spec's text (a hook's always);
        // the chain is asked again only when the result holds no reason.
        Some(ToolStatus::Error)
            if placed == Some(ToolStatus::Denied)
                && result.content.trim() != flemma_core::messages::DENIED =>
        {
            Ok(error_result(result.content.clone()))
        }
        Some(ToolStatus::Error) if placed == Some(ToolStatus::Denied) => {
            let reason = deny_reason(server, executor, &tool, &id, &arguments).await;
            Ok(error_result(match reason {
                Some(reason) => format!("{}\nReason: {reason}", result.content),
                None => result.content.clone(),
            }))
        }
        Some(ToolStatus::Error) => Ok(error_result(result.content.clone())),
        Some(_) => Err(ServeError::NoResult(id.to_string())),
    }
}

/// One cycle; cancelling `cancel` cancels the call, which then ends as a cancelled call does.
async fn cycle(
    session: &Session,
    id: &str,
    cancel: &CancellationToken,
) -> Result<CycleReport, ServeError> {
    let cycle = session.cycle();
    tokio::pin!(cycle);
    let report = tokio::select! {
        report = &mut cycle => report?,
        () = cancel.cancelled() => {
            session.executor().cancel(id);
            cycle.await?
        }
    };
    Ok(report)
}

/// Why the chain denied the call: its decision asked again under the options the cycle used
/// (the executor writes the Flemma plugin's fixed text into the result).
async fn deny_reason(
    server: &ToolServer,
    executor: &Executor,
    tool: &ToolName,
    id: &ToolUseId,
    arguments: &Map<String, Value>,
) -> Option<String> {
    let settings = executor.transcript().settings().await.ok()?;
    let chain = server.inner.registry.approval_chain();
    let input = Value::Object(arguments.clone());
    let call = ToolCall {
        name: tool,
        input: &input,
        id: Some(id),
    };
    let available = settings.sandbox_available();
    let ctx = ApprovalContext::new(
        settings.evaluated().config(),
        settings.evaluated().options(),
    )
    .with_tools(&server.inner.registry)
    .with_sandbox(&available)
    .with_workspace(settings.workspace());
    let outcome = chain.decide(&call, &ctx).await;
    let resolver = outcome.resolver.map(ToString::to_string);
    match (outcome.decision, resolver) {
        (
            Decision::Deny {
                reason: Some(reason),
            },
            Some(resolver),
        ) => Some(format!("{reason} (resolver `{resolver}`)")),
        (
            Decision::Deny {
                reason: Some(reason),
            },
            None,
        ) => Some(reason),
        (Decision::Deny { reason: None }, Some(resolver)) => {
            Some(format!("denied by the resolver `{resolver}`"))
        }
        _ => None,
    }
}
