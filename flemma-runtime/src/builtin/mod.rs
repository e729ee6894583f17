//! The built-in tools (spec §12): `bash`, `read`, `write`, `edit`, `ls`, `grep`, `find`, and
//! the harness tool `flemma.jobs.status` (spec §8.7).
//!
//! Each tool takes its definition from flemma-schema's table of built-ins
//! ([`ToolDefinition::from_builtin`](crate::ToolDefinition::from_builtin)), so names, descriptions, schemas and capabilities have
//! one home. [`register_builtins`] registers the ones implemented so far.

#[cfg(unix)]
pub(crate) mod bash;
mod edit;
mod files;
mod find;
mod grep;
mod ls;
mod read;
mod search;
mod write;

pub use edit::EditTool;
pub use find::Find;
pub use grep::Grep;
pub use ls::LsTool;
pub use read::ReadTool;
pub use write::WriteTool;

use crate::definition::ToolDefinition;
use crate::registry::ToolRegistry;

/// Registers every built-in tool implemented so far.
///
/// # Errors
///
/// Never for the shipped definitions; [`flemma_schema::SchemaError`] otherwise.
pub fn register_builtins(registry: &ToolRegistry) -> Result<(), flemma_schema::SchemaError> {
    #[cfg(unix)]
    registry.register(bash::Bash::new(ToolDefinition::from_builtin(
        &flemma_schema::builtin::bash(),
    )?));
    registry.register(ReadTool::new()?);
    registry.register(WriteTool::new()?);
    registry.register(EditTool::new()?);
    registry.register(LsTool::new()?);
    registry.register(Grep::new()?);
    registry.register(Find::new()?);
    registry.register(crate::jobs::status::JobsStatus::new()?);
    Ok(())
}
