//! Model-facing strings (spec §15), kept byte-identical in one table.

/// `tool.error.unknown`
pub(crate) const UNKNOWN_ERROR: &str = "Unknown error";
