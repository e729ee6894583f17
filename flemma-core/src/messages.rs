//! The model-facing strings that more than one crate writes: a tool's unknown
//! failure, a denial, an abort, a command's exit code, a timeout. They are public so a host's
//! own tools can write the same words the built-ins do. The runtime's own strings and the
//! built-in tools' are in those crates, kept byte-identical to the Flemma plugin's as these are.

/// `tool.error.unknown`
pub const UNKNOWN_ERROR: &str = "Unknown error";

/// `tool.denied`
pub const DENIED: &str = "The tool was denied by a policy.";

/// `tool.aborted`
pub const ABORTED: &str = "User aborted tool execution.";

/// `Tool '<name>' is not available in this conversation`: a tool its options take away
/// (not in the Flemma plugin; [`ToolDefinitionBuilder::available_when`](crate::ToolDefinitionBuilder::available_when)).
pub fn unavailable(name: &str) -> String {
    format!("Tool '{name}' is not available in this conversation")
}

/// `tool.bash.no_output`
pub const NO_OUTPUT: &str = "(no output)";

/// `tool.error.job_start`
pub const JOB_START: &str = "Failed to start job";

/// `tool.error.exit_code`: `Command exited with code <code>`.
pub fn exit_code(code: i32) -> String {
    format!("Command exited with code {code}")
}

/// `Tool timed out after <n> second.` (`seconds.` unless n = 1): a tool that did not finish within
/// its time limit and was given up on (this string is not in the Flemma plugin, which has timeouts
/// for `bash`, `grep` and `find` only).
pub fn tool_timeout(seconds: f64) -> String {
    let unit = if (seconds - 1.0).abs() < f64::EPSILON {
        "second"
    } else {
        "seconds"
    };
    format!("Tool timed out after {} {unit}.", format_seconds(seconds))
}

/// Whole seconds without a fraction (`30`), others as written (`0.5`).
pub fn format_seconds(seconds: f64) -> String {
    if seconds.fract() == 0.0 && seconds.abs() < 1e15 {
        format!("{seconds:.0}")
    } else {
        format!("{seconds}")
    }
}
