//! [`McpTool`]: one tool of a server, and its calls: progress, cancellation, truncation.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use flemma_core::truncate::{Direction, Limits};
use flemma_core::{ExecutionContext, Output, Tool, ToolDefinition, ToolOutput, ToolProgress};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientNotification, ClientRequest, ProgressToken, RequestId,
    ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::shared::{ABORTED, CANCEL_SEND, Live, Shared};

/// One tool of a server, registered as `SERVER.tool`: a call sends `tools/call` with the input
/// as the arguments, and maps the result ([`tool_output_in`](crate::tool_output_in)).
///
/// - The output (a success's text or JSON text, a failure's message) goes through the
///   execution context's [`truncate_with_overflow`](ExecutionContext::truncate_with_overflow)
///   from the head with the default limits (2,000 lines, 50 KB): a longer
///   one keeps its first lines and the notice `[Showing lines 1-N of M. Full output: PATH]`,
///   the full text is written to the result store, and a JSON result that is cut becomes
///   text (pretty-printed, so the kept lines are whole members).
/// - The request carries a progress token: each `notifications/progress` for it restarts
///   the call's `tool_timeout` and is reported through
///   [`ExecutionContext::report_progress`] (the executor's
///   [`Event::ToolProgress`](flemma_runtime::Event::ToolProgress)).
/// - The call ends with an error result when `tool_timeout` passes without an answer or a
///   progress notification, when the server is gone, and when it closes the connection
///   during the call (the server is then restarted on the next call, see [`McpServer`](crate::McpServer)).
/// - The call's timeout, the executor's cancel, and a call future dropped before its answer
///   send `notifications/cancelled` for the request.
pub struct McpTool {
    pub(crate) definition: ToolDefinition,
    pub(crate) server_tool: String,
    pub(crate) timeout: Duration,
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTool")
            .field("name", self.definition.name())
            .field("server_tool", &self.server_tool)
            .finish_non_exhaustive()
    }
}

/// A request waiting for its answer: its progress channel is registered, and dropping it
/// before the answer sends `notifications/cancelled`.
struct Pending<'a> {
    shared: &'a Shared,
    key: (u64, ProgressToken),
    peer: Peer<RoleClient>,
    /// `None` once answered or cancelled.
    id: Option<RequestId>,
}

impl Pending<'_> {
    fn answered(&mut self) {
        self.id = None;
    }

    /// Sends `notifications/cancelled` for the request now.
    async fn cancel(&mut self, reason: &str) {
        if let Some(id) = self.id.take() {
            let _ = tokio::time::timeout(
                CANCEL_SEND,
                self.peer.send_notification(cancelled(id, reason)),
            )
            .await;
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.shared
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        if let Some(id) = self.id.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let peer = self.peer.clone();
            runtime.spawn(async move {
                let notice = cancelled(id, "the call was abandoned");
                let _ = tokio::time::timeout(CANCEL_SEND, peer.send_notification(notice)).await;
            });
        }
    }
}

fn cancelled(id: RequestId, reason: &str) -> ClientNotification {
    ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(Some(id), Some(reason.to_owned())),
    ))
}

impl McpTool {
    fn server(&self) -> &str {
        &self.shared.name
    }

    async fn call(
        &self,
        live: Live,
        arguments: serde_json::Map<String, Value>,
        ctx: &ExecutionContext,
    ) -> ToolOutput {
        let params = CallToolRequestParams::new(self.server_tool.clone()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = live
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await;
        let mut handle = match sent {
            Ok(handle) => handle,
            Err(error) => return self.failed(live.epoch, error),
        };
        let (sender, mut progress) = mpsc::unbounded_channel();
        let key = (live.epoch, handle.progress_token.clone());
        self.shared
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), sender);
        let mut pending = Pending {
            shared: &self.shared,
            key,
            peer: live.peer.clone(),
            id: Some(handle.id.clone()),
        };
        // A conversation may shorten the server's `tool_timeout`, never lengthen it.
        let timeout = ctx
            .options()
            .mcp
            .tool_timeout(self.server())
            .map_or(self.timeout, |narrowed| narrowed.min(self.timeout));
        let idle = tokio::time::sleep(timeout);
        tokio::pin!(idle);
        loop {
            tokio::select! {
                biased;
                answer = &mut handle.rx => {
                    pending.answered();
                    return match answer {
                        Ok(Ok(result)) => {
                            self.shared.failures.store(0, Ordering::SeqCst);
                            match call_result(result) {
                                Some(result) => crate::tool_output_in(&result, ctx).await,
                                None => ToolOutput::error(format!(
                                    "MCP server '{}' answered the call with something other than a tool result",
                                    self.server()
                                )),
                            }
                        }
                        Ok(Err(error)) => {
                            let undecodable = self
                                .shared
                                .undecodable
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .remove(&(live.epoch, handle.id.clone()));
                            match undecodable {
                                Some(cause) => ToolOutput::error(format!(
                                    "MCP server '{}' answered the call with a message flemma could not decode: {}",
                                    self.server(),
                                    flemma_ids::error_chain(&cause)
                                )),
                                None => self.failed(live.epoch, error),
                            }
                        }
                        Err(_) => self.failed(live.epoch, rmcp::ServiceError::TransportClosed),
                    };
                }
                () = ctx.cancellation().cancelled() => {
                    pending.cancel("cancelled by the user").await;
                    return ToolOutput::error(ABORTED);
                }
                () = &mut idle => {
                    pending.cancel("timed out").await;
                    return ToolOutput::error(format!(
                        "MCP tool '{}' of server '{}' timed out after {}s",
                        self.server_tool,
                        self.server(),
                        timeout.as_secs_f64()
                    ));
                }
                Some(step) = progress.recv() => {
                    idle.as_mut().reset(Instant::now() + timeout);
                    let mut report = ToolProgress::new(step.progress);
                    if let Some(total) = step.total {
                        report = report.with_total(total);
                    }
                    if let Some(message) = step.message {
                        report = report.with_message(message);
                    }
                    ctx.report_progress(report);
                }
            }
        }
    }

    fn failed(&self, epoch: u64, error: rmcp::ServiceError) -> ToolOutput {
        match error {
            rmcp::ServiceError::TransportClosed => {
                self.shared.lost(
                    epoch,
                    format!(
                        "MCP server '{}' closed the connection during a call",
                        self.server()
                    ),
                );
                ToolOutput::error(format!(
                    "MCP server '{}' closed the connection during the call (did it exit?)",
                    self.server()
                ))
            }
            rmcp::ServiceError::McpError(error) => {
                // An answer: the server works.
                self.shared.failures.store(0, Ordering::SeqCst);
                ToolOutput::error(format!(
                    "MCP server '{}' refused the call: {} (error {})",
                    self.server(),
                    error.message,
                    error.code.0
                ))
            }
            error => ToolOutput::error(format!(
                "MCP server '{}': the call failed: {}",
                self.server(),
                flemma_ids::error_chain(&error)
            )),
        }
    }
}

/// A `tools/call` answer as a tool result: a result without `content` decodes as an empty
/// result.
fn call_result(result: ServerResult) -> Option<CallToolResult> {
    match result {
        ServerResult::CallToolResult(result) => Some(result),
        ServerResult::EmptyResult(_) => Some(CallToolResult::success(Vec::new())),
        _ => None,
    }
}

/// `output` cut by the context's truncation: the full text to the store.
fn truncated(output: ToolOutput, ctx: &ExecutionContext) -> ToolOutput {
    let cut = |text: &str| {
        let overflow = ctx.truncate_with_overflow(text, Direction::Head, Limits::default());
        overflow.truncated.then_some(overflow.content)
    };
    match output {
        ToolOutput::Success(Output::Text(text)) => match cut(&text) {
            Some(content) => ToolOutput::text(content),
            None => ToolOutput::text(text),
        },
        ToolOutput::Success(Output::Json(value)) => {
            let limits = Limits::default();
            let compact = value.to_string();
            if compact.len() <= limits.max_bytes {
                return ToolOutput::json(value);
            }
            let pretty = serde_json::to_string_pretty(&value).unwrap_or(compact);
            match cut(&pretty) {
                Some(content) => ToolOutput::text(content),
                None => ToolOutput::json(value),
            }
        }
        ToolOutput::Failure {
            error,
            partial_output,
        } => {
            let error = cut(&error).unwrap_or(error);
            ToolOutput::Failure {
                error,
                partial_output,
            }
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let arguments = match input {
            Value::Object(arguments) => arguments,
            Value::Null => serde_json::Map::new(),
            other => {
                return ToolOutput::error(format!("The input must be a JSON object, got {other}"));
            }
        };
        let output = match self.shared.connection(ctx).await {
            Ok(live) => self.call(live, arguments, ctx).await,
            Err(output) => output,
        };
        truncated(output, ctx)
    }

    fn time_limit(&self, _input: &Value, _ctx: &ExecutionContext) -> Option<Duration> {
        // The call times itself out after `tool_timeout` without an answer or progress (and
        // tells the server); progress may keep it running longer, so the executor sets no
        // limit of its own.
        None
    }
}
