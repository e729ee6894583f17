//! What the parser reports about a transcript.

use std::fmt;

use serde::Serialize;

/// Which construct a diagnostic is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// A `**Tool Use:**` block.
    ToolUse,
    /// A `**Tool Result:**` block.
    ToolResult,
    /// A `<thinking>` block.
    Thinking,
    /// A `**Compaction:**` block.
    Compaction,
    /// A role marker that names no role (see [`unknown_roles`](crate::unknown_roles)).
    Role,
}

impl DiagnosticKind {
    /// The kind's name as in the JSON contract.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::ToolUse => "tool_use",
            DiagnosticKind::ToolResult => "tool_result",
            DiagnosticKind::Thinking => "thinking",
            DiagnosticKind::Compaction => "compaction",
            DiagnosticKind::Role => "role",
        }
    }
}

/// How serious a diagnostic is: the one severity of every flemma diagnostic, owned by
/// `flemma-ids` and the same type as `flemma_ids::Severity`.
use flemma_ids::Severity;

/// Something the parser found wrong, with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The construct concerned.
    pub kind: DiagnosticKind,
    /// How serious it is.
    pub severity: Severity,
    /// The exact text.
    pub message: String,
    /// The 1-based line the construct starts on.
    pub line: u32,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: {} ({}): {}",
            self.line,
            self.severity.as_str(),
            self.kind.as_str(),
            self.message
        )
    }
}
