//! A conversation's options against a registry: the tools enabled by default, globs expanded,
//! the names checked.

use flemma_config::{Config, ConfigError, OptionDiagnostic, Options};
use flemma_ids::Severity;

use crate::registry::ToolRegistry;

/// The options of one conversation as a [`ToolRegistry`] sees them, and what is wrong with
/// the names they give. Made by [`ToolRegistry::evaluate`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Evaluation {
    /// The typed options: `tools.list` starts from every enabled tool, its globs expanded.
    pub options: Options,
    /// What [`Config::diagnostics`] found, in the order the options were written; empty
    /// when not [`checked`](Self::checked).
    pub diagnostics: Vec<OptionDiagnostic>,
    /// Whether the names were checked: not while a tool source is still loading (a glob
    /// for its tools matches nothing yet; a second pass checks it once loaded).
    pub checked: bool,
}

impl Evaluation {
    /// The diagnostics that stop a conversation.
    pub fn errors(&self) -> impl Iterator<Item = &OptionDiagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity() == Severity::Error)
    }

    /// The diagnostics to show that stop nothing.
    pub fn warnings(&self) -> impl Iterator<Item = &OptionDiagnostic> {
        self.diagnostics
            .iter()
            .filter(|d| d.severity() == Severity::Warning)
    }

    /// `Ok` unless there are errors.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Finalize`] with every error, each with where it was written.
    pub fn check(&self) -> Result<(), ConfigError> {
        let errors: Vec<OptionDiagnostic> = self.errors().cloned().collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Finalize { errors })
        }
    }
}

impl ToolRegistry {
    /// Evaluates a conversation's options (its frontmatter already applied) against the
    /// registered tools. What the executor and the session do before each cycle and request.
    ///
    /// Sets the DEFAULTS layer of `tools` to every registered tool that is enabled under
    /// these options, so that `:remove("write")`, `"!write"` and
    /// `--set 'tools=["!write"]'` take from all enabled tools and `:append("grep")` adds to
    /// them; then resolves the typed options, globs expanded against every registered name
    /// (disabled tools included). Once every tool source is done ([`Self::is_ready`]), the
    /// names are checked ([`Config::diagnostics`]): a name or glob in `tools` that matches
    /// no tool, or an unknown preset there, is an error ([`Evaluation::check`]); the rest
    /// are warnings. `enabled_when` predicates see the options before this tool list.
    ///
    /// ```
    /// use flemma_config::{Config, ConfigError};
    /// use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
    /// use flemma_runtime::ToolRegistry;
    ///
    /// let registry = ToolRegistry::new();
    /// for name in ["bash", "read", "write"] {
    ///     let def = ToolDefinition::builder(name, "A tool.")?.build()?;
    ///     registry.register(tool_fn(def, |_, _| ToolOutput::text("ok")));
    /// }
    /// let mut config = Config::new();
    /// config.apply_frontmatter("json", r#"{"flemma": {"tools": ["!write"]}}"#, 2)?;
    /// let evaluation = registry.evaluate(&mut config)?;
    /// assert_eq!(evaluation.options.tools.list, ["bash", "read"]);
    /// assert!(evaluation.check().is_ok());
    ///
    /// config.apply_frontmatter("json", r#"{"flemma": {"tools": ["bash", "reed"]}}"#, 2)?;
    /// let evaluation = registry.evaluate(&mut config)?;
    /// let Err(ConfigError::Finalize { errors }) = evaluation.check() else { panic!() };
    /// assert_eq!(errors[0].to_string(), "line 2: Unknown tool 'reed' -- did you mean 'read'?");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::Decode`] when the layers combine into values the options cannot take.
    pub fn evaluate(&self, config: &mut Config) -> Result<Evaluation, ConfigError> {
        // Readiness first: names read after it are at least as complete.
        let checked = self.is_ready();
        let tools = self.list();
        let names: Vec<_> = tools
            .iter()
            .map(|t| t.definition().name().clone())
            .collect();
        let before = config.options_with_tools(&names)?;
        config.set_tool_defaults(
            tools
                .iter()
                .filter(|t| {
                    t.definition().is_enabled(&before) && t.definition().is_available(&before)
                })
                .map(|t| t.definition().name().clone()),
        );
        let options = config.options_with_tools(&names)?;
        let diagnostics = if checked {
            config.diagnostics(&names)
        } else {
            Vec::new()
        };
        Ok(Evaluation {
            options,
            diagnostics,
            checked,
        })
    }
}
