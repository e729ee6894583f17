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

// The file tools: `read`, `write`, `edit`, `ls` (spec §12.2-12.4, §12.7, §15).

/// `tool.error.no_path`
pub(crate) const NO_PATH: &str = "No path provided";

/// `tool.error.file_not_found`
pub(crate) fn file_not_found(path: &str) -> String {
    format!("File not found: {path}")
}

/// `tool.read.offset_beyond_eof`
pub(crate) fn offset_beyond_eof(offset: usize, total: usize) -> String {
    format!("Offset {offset} is beyond end of file ({total} lines total)")
}

/// `tool.read.line_exceeds_limit`
pub(crate) fn line_exceeds_limit(
    line: usize,
    size: &str,
    limit: &str,
    path: &str,
    bytes: usize,
) -> String {
    format!(
        "[Line {line} is {size}, exceeds {limit} limit. Use bash: sed -n '{line}p' {path} | head -c {bytes}]"
    )
}

/// `tool.read.truncated_lines`
pub(crate) fn read_truncated_lines(start: usize, end: usize, total: usize, next: usize) -> String {
    format!("[Showing lines {start}-{end} of {total}. Use offset={next} to continue.]")
}

/// `tool.read.truncated_bytes`
pub(crate) fn read_truncated_bytes(
    start: usize,
    end: usize,
    total: usize,
    limit: &str,
    next: usize,
) -> String {
    format!(
        "[Showing lines {start}-{end} of {total} ({limit} limit). Use offset={next} to continue.]"
    )
}

/// `tool.read.more_lines` (singular for one line).
pub(crate) fn read_more_lines(count: usize, next: usize) -> String {
    let lines = if count == 1 { "line" } else { "lines" };
    format!("[{count} more {lines} in file. Use offset={next} to continue.]")
}
