//! Every text this crate produces for people or models, in one table.

/// `**Tool Use:**` whose fence content cannot be decoded; the detail follows.
pub(crate) const TOOL_USE_PARSE_PREFIX: &str = "Failed to parse tool input: ";
/// A tool-use header whose name breaks the tool-name rule (not in the Flemma plugin, whose grammar takes
/// any name: see the book's decision record 0003).
pub(crate) const TOOL_USE_HEADER_PREFIX: &str = "Invalid tool use header: ";
/// Detail when the fence language has no decoder; the language follows.
pub(crate) const NO_PARSER_PREFIX: &str = "No parser registered for language: ";
/// Detail when the input decodes to something other than an object; the JSON type follows.
pub(crate) const INPUT_NOT_OBJECT_PREFIX: &str = "expected a JSON object, found ";
/// `**Tool Use:**` whose fence never closes.
pub(crate) const TOOL_USE_UNCLOSED: &str =
    "Unclosed fenced code block in tool use (missing closing fence)";
/// `**Tool Use:**` without a fence.
pub(crate) const TOOL_USE_NO_FENCE: &str = "Tool use requires a fenced code block with JSON input";
/// `**Tool Result:**` whose fence never closes.
pub(crate) const TOOL_RESULT_UNCLOSED: &str =
    "Unclosed fenced code block in tool result (missing closing fence)";
/// `**Tool Result:**` without a fence.
pub(crate) const TOOL_RESULT_NO_FENCE: &str = "Tool result requires a fenced code block";
/// `**Compaction:**` whose fence never closes.
pub(crate) const COMPACTION_UNCLOSED: &str =
    "Unclosed fenced code block in compaction (missing closing fence)";
/// `**Compaction:**` without a fence.
pub(crate) const COMPACTION_NO_FENCE: &str = "Compaction requires a fenced code block";
/// `<thinking>` without `</thinking>`.
pub(crate) const UNCLOSED_THINKING: &str =
    "Unclosed <thinking> block (missing </thinking>); its lines are kept as text";
/// The abort marker's default message.
pub const ABORTED_BY_USER: &str = "Response interrupted by the user.";
/// Error text of a failed tool without a message.
pub(crate) const UNKNOWN_ERROR: &str = "Unknown error";
/// Put between an error and the output the tool produced before failing.
pub(crate) const PARTIAL_OUTPUT_SEPARATOR: &str = "\n\nPartial output:\n";
