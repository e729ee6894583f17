//! How serious a diagnostic is: one type for the parser's and the options' diagnostics.

use std::fmt;

use serde::Serialize;

/// How serious a diagnostic is, for every crate that reports them: a transcript's
/// (`flemma_ast::Diagnostic`) and the options' (`flemma_config::OptionDiagnostic`). Errors
/// order before warnings.
///
/// ```
/// use flemma_ids::Severity;
///
/// assert_eq!(Severity::Warning.as_str(), "warning");
/// assert_eq!(Severity::Error.to_string(), "error");
/// assert!(Severity::Error < Severity::Warning);
/// assert_eq!(serde_json::to_string(&Severity::Error).unwrap(), "\"error\"");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// What it concerns cannot be used as written: a transcript that cannot be sent, options
    /// whose tool set would not be the one asked for.
    Error,
    /// Something was skipped or kept as text, or is worth showing; the rest is usable and
    /// nothing is stopped.
    Warning,
}

impl Severity {
    /// `error` or `warning`, as in the JSON contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
