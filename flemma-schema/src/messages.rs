//! Model-facing strings of this crate, in one table.

/// `tool.parameter.background`
pub(crate) const PARAM_BACKGROUND: &str = "Set to true to run this tool in the background. The conversation continues immediately with a placeholder; the actual result is delivered as a separate message later — you cannot access it until then. Default to foreground. Use background only when you have other meaningful work to do while waiting and no upcoming tool call or decision depends on this result, even indirectly. Avoid backgrounding all tool calls in a single response — keep at least one foreground result to act on.";

/// `tool.parameter.save_to`
pub(crate) const PARAM_SAVE_TO: &str = "Save the full tool output to this file path instead of returning it in the conversation. You will receive a short preview of the output along with the file path where the complete content was saved. Use this when the output is large and would clutter the conversation, or when you need the output saved to a specific location for later use. Absolute paths and ~/... paths are supported. Use $FLEMMA_TOOLS_STORE_PATH/<filename> to save into the conversation's store directory (the same directory where truncated tool results are automatically saved).";

/// Put between a description and its output schema.
pub(crate) const RETURNS_PREFIX: &str = "\n\nReturns (JSON Schema): ";

/// The `$schema` added to an output schema in a description.
pub(crate) const OUTPUT_SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// `tool.bash.description` with the truncation constants.
pub(crate) const BASH: &str = "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last 2000 lines or 50KB (whichever is hit first). If truncated, full output is saved to a file. $FLEMMA_TOOLS_STORE_PATH is set in the environment and points to a directory where saved tool results for this conversation are stored. Optionally provide a timeout in seconds.";
/// `tool.read.description`
pub(crate) const READ: &str = "Read the contents of a file. Output is truncated to 2000 lines or 50KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete.";
/// `tool.write.description`
pub(crate) const WRITE: &str = "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.";
/// `tool.edit.description`
pub(crate) const EDIT: &str = "Edit a file by replacing exact text. The oldText must match exactly (including whitespace). Use this for precise, surgical edits.";
/// `tool.grep.description`
pub(crate) const GREP: &str = "Search file contents using ripgrep (rg) or grep. Returns matching lines with file paths and line numbers. Output is limited to 100 matches by default. Supports regex patterns. When using grep -E fallback, \\d, \\w, \\s are automatically translated to POSIX equivalents.";
/// `tool.find.description`
pub(crate) const FIND: &str = "Find files by glob pattern. Uses fd, git ls-files, or GNU find (whichever is available). Output is truncated to 2000 lines or 50KB. Returns sorted relative paths, one per line.";
/// `tool.ls.description`
pub(crate) const LS: &str = "List directory contents. Output is truncated to 2000 lines or 50KB. Directories appear first (suffixed with /), then files, both sorted case-insensitively. Use max_depth > 1 to recurse into subdirectories (max 10). Use limit to cap the number of entries (default 500).";
/// `tool.flemma.jobs.status.description`
pub(crate) const JOBS_STATUS: &str = "Check the status of a background job. Returns \"running\" while the job is executing, \"completed (delivery pending)\" once it has finished and its result is queued to be injected into the conversation automatically (do not re-run the tool or keep polling — the result is on its way), or \"completed\" when the result is already in the conversation. Use this to check on long-running background tasks instead of retrying them.";
