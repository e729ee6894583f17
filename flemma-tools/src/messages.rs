//! Model-facing strings (spec §15), kept byte-identical in one table.

/// `tool.error.unknown`
pub(crate) const UNKNOWN_ERROR: &str = "Unknown error";
/// `tool.denied`
pub(crate) const DENIED: &str = "The tool was denied by a policy.";
/// `tool.rejected`
pub(crate) const REJECTED: &str = "This tool has been rejected by the user.";
/// `tool.rejected.feedback` without its `{{ reason }}`.
pub(crate) const REJECTED_FEEDBACK_PREFIX: &str = "User feedback: ";
/// `tool.aborted`
pub(crate) const ABORTED: &str = "User aborted tool execution.";
/// `request.aborted`, the default message of an abort marker.
pub(crate) const REQUEST_ABORTED: &str = "Response interrupted by the user.";

/// `Unknown tool: <name>` (spec §7.5).
pub(crate) fn unknown_tool(name: &str) -> String {
    format!("Unknown tool: {name}")
}

/// `Tool '<name>' is not executable` (spec §7.5).
pub(crate) fn not_executable(name: &str) -> String {
    format!("Tool '{name}' is not executable")
}

/// `Tool <id> is already executing` (spec §7.5).
pub(crate) fn already_executing(id: &str) -> String {
    format!("Tool {id} is already executing")
}

/// The content-overwrite warning (spec §7.3).
pub(crate) fn edited_approved(count: usize) -> String {
    format!(
        "{count} tool result(s) have edited content inside an approved tool block – skipping execution to protect your edits. Remove the (approved) status from the header to send your content."
    )
}
