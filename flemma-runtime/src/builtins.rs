//! [`register_builtins`]: the built-in tools of crate flemma-builtins and the runtime's harness
//! tool, registered as a host registers its own.

use crate::registry::ToolRegistry;

/// Registers every built-in tool ([`flemma_builtins::tools`]: `bash`, `read`, `write`,
/// `edit`, `ls`, `grep`, `find`) and the harness tool `flemma.jobs.status`
/// ([`JobsStatus`](crate::jobs::JobsStatus)), through [`ToolRegistry::register_arc`].
///
/// ```
/// let registry = flemma_runtime::ToolRegistry::new();
/// flemma_runtime::register_builtins(&registry)?;
/// assert!(registry.is_executable("bash"));
/// assert!(registry.is_executable("flemma.jobs.status"));
/// # Ok::<(), flemma_schema::SchemaError>(())
/// ```
///
/// # Errors
///
/// Never for the shipped definitions; [`flemma_schema::SchemaError`] otherwise.
pub fn register_builtins(registry: &ToolRegistry) -> Result<(), flemma_schema::SchemaError> {
    for tool in flemma_builtins::tools()? {
        registry.register_arc(tool);
    }
    registry.register(crate::jobs::JobsStatus::new()?);
    Ok(())
}
