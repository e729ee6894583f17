//! The built-in tools of flemma and what they run on: `bash` with process
//! supervision (a command's every process found and stopped, [`process`]), the file tools
//! `read`, `write`, `edit`, `ls`, the search tools `grep` and `find`, and the bubblewrap
//! sandbox backend ([`Bwrap`]).
//!
//! They are ordinary [`Tool`]s: each takes its definition from
//! flemma-schema's table of built-ins
//! ([`ToolDefinition::from_builtin`](flemma_core::ToolDefinition::from_builtin)), so names,
//! descriptions, schemas and capabilities have one home, and a host registers them through the
//! same public API as its own tools. [`tools`] gives all of them;
//! `flemma_runtime::register_builtins` registers them with the runtime's harness tool
//! `flemma.jobs.status`, and [`sandbox_backends`] is the runtime's default sandbox.
//!
//! ```
//! let tools = flemma_builtins::tools()?;
//! let names: Vec<_> = tools.iter().map(|t| t.definition().name().to_string()).collect();
//! assert!(names.contains(&"bash".to_owned()));
//! assert!(names.contains(&"grep".to_owned()));
//! # Ok::<(), flemma_schema::SchemaError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
#[cfg(unix)]
mod bash;
mod bwrap;
mod edit;
mod files;
mod find;
mod grep;
mod ls;
mod messages;
pub mod process;
mod read;
mod search;
mod write;

use std::sync::Arc;

#[cfg(unix)]
pub use bash::Bash;
pub use bwrap::{BWRAP_PRIORITY, Bwrap};
pub use edit::EditTool;
pub use find::Find;
pub use grep::Grep;
pub use ls::LsTool;
pub use read::ReadTool;
pub use write::WriteTool;

use flemma_core::Tool;
use flemma_core::sandbox::SandboxBackends;

/// Every built-in tool: `bash` (on Unix), `read`, `write`, `edit`, `ls`, `grep` and `find`.
///
/// # Errors
///
/// Never for the shipped definitions; [`flemma_schema::SchemaError`] otherwise.
pub fn tools() -> Result<Vec<Arc<dyn Tool>>, flemma_schema::SchemaError> {
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(ReadTool::new()?),
        Arc::new(WriteTool::new()?),
        Arc::new(EditTool::new()?),
        Arc::new(LsTool::new()?),
        Arc::new(Grep::new()?),
        Arc::new(Find::new()?),
    ];
    #[cfg(unix)]
    tools.insert(0, Arc::new(Bash::new()?));
    Ok(tools)
}

/// The built-in sandbox backends: [`Bwrap`] at [`BWRAP_PRIORITY`] (bubblewrap, where it
/// works). The runtime's executor selects from these unless its host sets others.
pub fn sandbox_backends() -> SandboxBackends {
    let mut backends = SandboxBackends::new();
    // A fresh registry has no backend of this name.
    let _ = backends.register(Arc::new(Bwrap), BWRAP_PRIORITY);
    backends
}
