//! Diagnostics beyond the parser's: what the grammar lets parse but a user would
//! not want, for `flemma check` and the language server.
//!
//! ```
//! use flemma_ast::{lint, parse};
//!
//! let doc = parse(
//!     "@User:\nhi\n\n@Assistant:\n**Tool Use:** `ls` (`t1`)\n```json\n{}\n```\n\n\
//!      @You:\n**Tool Result:** `t1`\n```\nok\n```\n\n\
//!      @Assistant:\n**Tool Use:** `ls` (`t1`)\n```json\n{}\n```\n",
//! );
//! let found: Vec<String> = lint(&doc).iter().map(ToString::to_string).collect();
//! assert_eq!(found, [
//!     "line 1: warning (role): @User: is not a role: its message is not sent (did you mean @You:?)",
//!     "line 17: error (tool_use): Duplicate tool use id `t1` (first used on line 5): its result would answer the first call; give this call an id of its own",
//! ]);
//! ```

use flemma_ids::Severity;

use crate::ast::{Diagnostic, DiagnosticKind, Document};

/// Every diagnostic of this module, in line order: [`unknown_roles`](crate::unknown_roles)
/// and [`duplicate_tool_uses`].
pub fn lint(doc: &Document) -> Vec<Diagnostic> {
    let mut found = crate::unknown_roles(doc);
    found.extend(duplicate_tool_uses(doc));
    found.sort_by_key(|d| d.line);
    found
}

/// An error for each `**Tool Use:**` whose id an earlier tool use of the document has: results
/// are matched to calls by id, so the later call would never be answered (or would take the
/// first call's answer).
pub fn duplicate_tool_uses(doc: &Document) -> Vec<Diagnostic> {
    let mut first: foldhash::HashMap<&str, u32> = foldhash::HashMap::default();
    let mut found = Vec::new();
    for tool_use in doc.messages.iter().flat_map(crate::Message::tool_uses) {
        let line = tool_use.span.start_line;
        match first.get(tool_use.id.as_str()) {
            Some(at) => found.push(Diagnostic {
                kind: DiagnosticKind::ToolUse,
                severity: Severity::Error,
                message: format!(
                    "Duplicate tool use id `{}` (first used on line {at}): its result would answer the first call; give this call an id of its own",
                    tool_use.id
                ),
                line,
            }),
            None => {
                first.insert(tool_use.id.as_str(), line);
            }
        }
    }
    found
}
