//! [`ToolModule`]: tools that come together with the approval resolver that judges them.

use std::fmt;
use std::sync::Arc;

use flemma_approval::Resolver;

use flemma_core::Tool;

/// A bundle of tools and, optionally, the approval resolver that judges their calls. The
/// resolver is registered under the module's name and leaves with the module
/// ([`ToolRegistry::unregister_module`](crate::ToolRegistry::unregister_module)).
///
/// ```
/// use flemma_approval::{Verdict, resolver_fn};
/// use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
/// use flemma_runtime::{ToolModule, ToolRegistry};
///
/// let deploy = tool_fn(
///     ToolDefinition::builder("ops.deploy", "Deploy a service.")?.build()?,
///     |input, _| ToolOutput::text(format!("deployed {}", input["service"])),
/// );
/// let module = ToolModule::new("ops")
///     .tool(deploy)
///     // Staging deploys run without asking; everything else asks.
///     .resolver(Some(60), resolver_fn(|call, _| {
///         if call.input["service"].as_str().is_some_and(|s| s.ends_with("-staging")) {
///             Verdict::approve().because("staging")
///         } else {
///             Verdict::require_approval()
///         }
///     }));
///
/// let registry = ToolRegistry::new();
/// registry.register_module(module)?;
/// assert!(registry.contains("ops.deploy"));
/// assert!(registry.approval_chain().get("ops").is_some());
/// registry.unregister_module("ops");
/// assert!(!registry.contains("ops.deploy") && registry.approval_chain().get("ops").is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ToolModule {
    pub(crate) name: String,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) resolver: Option<(Option<i32>, Arc<dyn Resolver>)>,
}

impl fmt::Debug for ToolModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolModule")
            .field("name", &self.name)
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.definition().name().as_str())
                    .collect::<Vec<_>>(),
            )
            .field("resolver", &self.resolver.is_some())
            .finish()
    }
}

impl ToolModule {
    /// An empty module called `name` (its resolver's name: `my_plugin`,
    /// `my_plugin.security_policy`).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            tools: Vec::new(),
            resolver: None,
        }
    }

    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds a shared tool.
    #[must_use]
    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets the module's approval resolver (priority 50 when `None`).
    #[must_use]
    pub fn resolver(mut self, priority: Option<i32>, resolver: impl Resolver + 'static) -> Self {
        self.resolver = Some((priority, Arc::new(resolver)));
        self
    }

    /// The module's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}
