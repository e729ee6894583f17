//! The MCP tool annotations of a served tool, from what flemma knows about it.

use rmcp::model::ToolAnnotations;

/// The MCP annotations flemma gives the tool `name` when serving it, `None` for a tool it
/// knows nothing about (an MCP client then assumes the worst: not read-only, destructive,
/// open-world).
///
/// The built-ins' traits: `read`, `ls`, `grep`, `find` and `flemma.jobs.status` only read
/// (`readOnlyHint`, idempotent, closed-world); `write` and `edit` change files
/// (`destructiveHint`; `write` is idempotent: the same call writes the same file); `bash`
/// runs any command (`destructiveHint`, `openWorldHint`: it may reach the network).
///
/// ```
/// let read = flemma_mcp::serve::annotations("read").unwrap();
/// assert_eq!(read.read_only_hint, Some(true));
/// let bash = flemma_mcp::serve::annotations("bash").unwrap();
/// assert_eq!(bash.destructive_hint, Some(true));
/// assert!(flemma_mcp::serve::annotations("slack.post").is_none());
/// ```
pub fn annotations(name: &str) -> Option<ToolAnnotations> {
    let hints = |read_only, destructive, idempotent, open_world| {
        Some(
            ToolAnnotations::new()
                .read_only(read_only)
                .destructive(destructive)
                .idempotent(idempotent)
                .open_world(open_world),
        )
    };
    match name {
        "read" | "ls" | "grep" | "find" | "flemma.jobs.status" => hints(true, false, true, false),
        "write" => hints(false, true, true, false),
        "edit" => hints(false, true, false, false),
        "bash" => hints(false, true, false, true),
        _ => None,
    }
}
