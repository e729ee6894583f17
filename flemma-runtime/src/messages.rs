//! Model-facing strings (spec §15), kept byte-identical in one table.

/// `tool.error.unknown`
pub(crate) const UNKNOWN_ERROR: &str = "Unknown error";
/// `tool.denied`
pub const DENIED: &str = "The tool was denied by a policy.";
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

/// `Tool '<name>' is not available in this conversation`: a tool its options take away
/// (not in the spec; [`ToolDefinitionBuilder::available_when`](crate::ToolDefinitionBuilder::available_when)).
pub(crate) fn unavailable(name: &str) -> String {
    format!("Tool '{name}' is not available in this conversation")
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
/// `tool.write.error.no_content`
pub(crate) const NO_CONTENT: &str = "No content provided";
/// `tool.edit.error.no_old_text`
pub(crate) const NO_OLD_TEXT: &str = "No oldText provided";
/// `tool.edit.error.no_new_text`
pub(crate) const NO_NEW_TEXT: &str = "No newText provided";

/// `tool.error.file_not_found`
pub(crate) fn file_not_found(path: &str) -> String {
    format!("File not found: {path}")
}

/// `tool.error.write_failed`
pub(crate) fn write_failed(detail: &str) -> String {
    format!("Cannot write file: {detail}")
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

/// `tool.write.error.sandbox_denied`
pub(crate) fn write_sandbox_denied(path: &str) -> String {
    format!("Sandbox: write denied \u{2013} path is outside writable directories: {path}")
}

/// `tool.write.success` (singular for one byte).
pub(crate) fn write_success(count: usize, path: &str) -> String {
    let bytes = if count == 1 { "byte" } else { "bytes" };
    format!("Successfully wrote {count} {bytes} to {path}")
}

/// Not in the spec: `write`, `edit` (`verb`) of a path tools may not write: the
/// conversation's file, an options file or hook the host loaded, or in the project what the
/// host or git runs or reads as configuration (`sandbox.policy.protect_conversation`).
pub(crate) fn read_only_denied(verb: &str, path: &str) -> String {
    format!(
        "Cannot {verb} {path}: it is read-only for tools (the conversation's file, an options file or hook the host loaded, or the project's .git, .claude, flemma.toml or the store's bookkeeping; sandbox.policy.protect_conversation = false allows it)"
    )
}

/// `tool.edit.error.sandbox_denied`
pub(crate) fn edit_sandbox_denied(path: &str) -> String {
    format!("Sandbox: edit denied \u{2013} path is outside writable directories: {path}")
}

/// `tool.edit.error.read_failed`
pub(crate) fn read_failed(detail: &str) -> String {
    format!("Cannot read file: {detail}")
}

/// `tool.edit.error.text_not_found`
pub(crate) fn text_not_found(path: &str) -> String {
    format!(
        "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
    )
}

/// `tool.edit.error.not_unique`
pub(crate) fn not_unique(count: usize, path: &str) -> String {
    format!(
        "Found {count} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
    )
}

/// `tool.edit.error.no_changes`
pub(crate) fn no_changes(path: &str) -> String {
    format!("No changes made to {path}. The replacement produced identical content.")
}

/// `tool.edit.output.success`
pub(crate) fn edit_success(path: &str) -> String {
    format!("Successfully replaced text in {path}.")
}

/// `tool.ls.error.not_found`
pub(crate) fn directory_not_found(path: &str) -> String {
    format!("Directory not found: {path}")
}

/// `tool.ls.footer` and `tool.ls.footer_with_depth` (the depth shown when over 1).
pub(crate) fn ls_footer(count: usize, depth: usize) -> String {
    let entries = if count == 1 { "entry" } else { "entries" };
    if depth > 1 {
        format!("[{count} {entries}, depth={depth}]")
    } else {
        format!("[{count} {entries}]")
    }
}

/// `tool.bash.error.no_command`
pub(crate) const NO_COMMAND: &str = "No command provided";
/// `tool.bash.no_output`
pub(crate) const NO_OUTPUT: &str = "(no output)";
/// `tool.error.job_start`
pub(crate) const JOB_START: &str = "Failed to start job";

/// `tool.error.sandbox`: `Sandbox error: <detail>`.
pub(crate) fn sandbox_error(detail: &str) -> String {
    format!("Sandbox error: {detail}")
}

/// `tool.error.exit_code`: `Command exited with code <code>`.
pub(crate) fn exit_code(code: i32) -> String {
    format!("Command exited with code {code}")
}

/// `tool.bash.timeout`: `Command timed out after <n> second.` (`seconds.` unless n = 1).
pub(crate) fn bash_timeout(seconds: f64) -> String {
    let unit = if (seconds - 1.0).abs() < f64::EPSILON {
        "second"
    } else {
        "seconds"
    };
    format!(
        "Command timed out after {} {unit}.",
        format_seconds(seconds)
    )
}

/// `Tool timed out after <n> second.` (`seconds.` unless n = 1): a tool that did not finish
/// within its time limit and was given up on (ours: the spec has no string for it; §7.7 has
/// timeouts for `bash`, `grep` and `find` only).
pub(crate) fn tool_timeout(seconds: f64) -> String {
    let unit = if (seconds - 1.0).abs() < f64::EPSILON {
        "second"
    } else {
        "seconds"
    };
    format!("Tool timed out after {} {unit}.", format_seconds(seconds))
}

/// The detail of a refusal to open what is not a regular file (ours, after the spec's
/// `Cannot read file: ` / `Cannot write file: `): `<path> is a directory`, or
/// `<path> is <kind>, not a regular file`.
pub(crate) fn not_regular(path: &str, kind: &str) -> String {
    if kind == "a directory" {
        format!("{path} is a directory")
    } else {
        format!("{path} is {kind}, not a regular file")
    }
}

/// Whole seconds without a fraction (`30`), others as written (`0.5`).
fn format_seconds(seconds: f64) -> String {
    if seconds.fract() == 0.0 && seconds.abs() < 1e15 {
        format!("{seconds:.0}")
    } else {
        format!("{seconds}")
    }
}

// Background jobs (spec §8, §15).

/// `job.executing.tracked`: the placeholder when `flemma.jobs.status` is in the tool set.
pub(crate) fn job_executing_tracked(job_id: &str) -> String {
    format!(
        "Running as a background job `{job_id}`. Use `flemma.jobs.status` with this job ID to check progress. Do not retry — the result will be delivered to you automatically when the job completes."
    )
}

/// `job.executing.untracked`
pub(crate) const JOB_EXECUTING_UNTRACKED: &str = "Running as a background job. Do not retry or attempt to check progress — the result will be delivered to you automatically when the job completes.";

/// `job.lost`
pub(crate) const JOB_LOST: &str = "Job lost: session ended before completion.";
/// A foreground call whose host ended (was killed) before the call completed (ours: the spec
/// has `job.lost` for background jobs only).
pub(crate) const CALL_LOST: &str = "Tool execution lost: session ended before completion. It may have run in part; check before retrying.";

/// `tool.flemma.jobs.status.state_running`
pub(crate) const JOB_STATE_RUNNING: &str = "running";
/// `tool.flemma.jobs.status.state_delivery_pending`
pub(crate) const JOB_STATE_DELIVERY_PENDING: &str = "completed (delivery pending)";
/// `tool.flemma.jobs.status.state_completed`
pub(crate) const JOB_STATE_COMPLETED: &str = "completed";
/// `tool.flemma.jobs.status.state_removed`
pub(crate) const JOB_STATE_REMOVED: &str = "completed (removed from conversation)";

// Host-initiated background (spec §8.1): the texts are those of `jobs::JobError`.
