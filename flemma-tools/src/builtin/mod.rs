//! The built-in tools (spec §12): `bash`, `read`, `write`, `edit`, `ls`, `grep`, `find`.
//!
//! Each tool takes its definition from flemma-schema's table of built-ins
//! ([`ToolDefinition::from_builtin`]), so names, descriptions, schemas and capabilities have
//! one home. [`register_builtins`] registers the ones implemented so far.

#[cfg(unix)]
mod bash;

use crate::definition::ToolDefinition;
use crate::registry::ToolRegistry;

/// The definition of the built-in `name` (a name from flemma-schema's table); `None` for any
/// other name. The shipped definitions always build (the tests build each one).
#[allow(dead_code, reason = "used by the built-in tools as they land")]
pub(crate) fn definition(name: &str) -> Option<ToolDefinition> {
    flemma_schema::builtin::get(name).and_then(|b| ToolDefinition::from_builtin(b).ok())
}

/// Registers every built-in tool implemented so far.
///
/// # Errors
///
/// Never for the shipped definitions; [`flemma_schema::SchemaError`] otherwise.
pub fn register_builtins(registry: &ToolRegistry) -> Result<(), flemma_schema::SchemaError> {
    let _ = registry;
    #[cfg(unix)]
    if let Some(definition) = definition("bash") {
        let _ = registry.register(bash::Bash::new(definition));
    }
    Ok(())
}
