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

/// Whole seconds without a fraction (`30`), others as written (`0.5`).
fn format_seconds(seconds: f64) -> String {
    if seconds.fract() == 0.0 && seconds.abs() < 1e15 {
        format!("{seconds:.0}")
    } else {
        format!("{seconds}")
    }
}
