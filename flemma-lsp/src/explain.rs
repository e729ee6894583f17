//! How the approval chain would decide a call, for a Tool Use's hover: the
//! `flemma approval explain` trace against the conversation's own options.

use std::fmt::Write as _;

use flemma_approval::{ApprovalContext, Decision, ToolCall};
use flemma_ids::{ToolName, ToolUseId};
use flemma_runtime::ToolRegistry;
use serde_json::Value;

use crate::checks::Evaluated;

/// The chain's decision about the call `id` of `tool` with `input`, and its trace, as lines of
/// text (`decision (decided by …)`, then one line per resolver consulted).
pub(crate) fn explain(
    runtime: &tokio::runtime::Runtime,
    registry: &ToolRegistry,
    evaluated: &Evaluated,
    workspace: &dyn flemma_approval::Workspace,
    tool: &ToolName,
    id: &ToolUseId,
    input: &Value,
) -> String {
    let available = flemma_builtins::sandbox_backends().is_available(&evaluated.options.sandbox);
    let ctx = ApprovalContext::new(&evaluated.config, &evaluated.options)
        .with_tools(registry)
        .with_sandbox(&available)
        .with_workspace(workspace);
    let call = ToolCall {
        name: tool,
        input,
        id: Some(id),
    };
    let chain = registry.approval_chain();
    let explanation = runtime.block_on(chain.explain(&call, &ctx));
    let by = explanation
        .resolver
        .as_deref()
        .unwrap_or("default (no resolver decided)");
    let mut out = format!("{} (decided by {by})\n", explanation.decision);
    if let Decision::Deny {
        reason: Some(reason),
    } = &explanation.decision
    {
        let _ = writeln!(out, "  reason: {reason}");
    }
    for entry in &explanation.trace {
        let result = serde_json::to_value(entry.result).ok();
        let result = result.as_ref().and_then(Value::as_str).unwrap_or("?");
        let detail = entry
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:>4}  {} {result}{detail}",
            entry.priority,
            entry.resolver.as_str()
        );
    }
    out.trim_end().to_owned()
}
