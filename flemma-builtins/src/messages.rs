//! The built-in tools' model-facing strings, kept byte-identical to the Flemma plugin's in one
//! table; the strings shared with the runtime are in `flemma_core::messages`.

pub(crate) use flemma_core::messages::{
    ABORTED, JOB_START, NO_OUTPUT, UNKNOWN_ERROR, exit_code, format_seconds, tool_timeout,
};

/// What a built-in tool answers a call that does not give the field `missing` names
/// (`tool.error.no_path`, …).
pub(crate) fn missing(missing: flemma_schema::builtin::inputs::MissingInput) -> &'static str {
    match missing.field {
        "content" => NO_CONTENT,
        "oldText" => NO_OLD_TEXT,
        "newText" => NO_NEW_TEXT,
        "command" => NO_COMMAND,
        "pattern" => crate::search::NO_PATTERN,
        _ => NO_PATH,
    }
}

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

/// Not in the Flemma plugin: `write`, `edit` (`verb`) of a path tools may not write: the
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

/// `tool.error.sandbox`: `Sandbox error: <detail>`.
pub(crate) fn sandbox_error(detail: &str) -> String {
    format!("Sandbox error: {detail}")
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

/// The detail of a refusal to open what is not a regular file (ours, after the Flemma plugin's
/// `Cannot read file: ` / `Cannot write file: `): `<path> is a directory`, or
/// `<path> is <kind>, not a regular file`.
pub(crate) fn not_regular(path: &str, kind: &str) -> String {
    if kind == "a directory" {
        format!("{path} is a directory")
    } else {
        format!("{path} is {kind}, not a regular file")
    }
}
