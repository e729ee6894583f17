//! [`ToolDefinition`]: everything the harness knows about a tool besides how to run it.

use std::fmt;
use std::sync::Arc;

use flemma_config::Options;
use flemma_ids::ToolName;
use flemma_schema::{
    Capabilities, Capability, HarnessParameters, InputSchema, SchemaError, ToolSpec,
};
use serde_json::{Map, Value};

/// Whether a tool is in a conversation's default tool set.
#[derive(Clone)]
pub enum Enabled {
    /// Always (`true`) or never (`false`) in the default set; a disabled tool stays
    /// registered and executable, and a conversation can still opt in to it.
    Always(bool),
    /// Decided from the conversation's options.
    When(Arc<dyn Fn(&Options) -> bool + Send + Sync>),
}

impl Enabled {
    /// Whether the tool is in the default set under these options.
    pub fn is_enabled(&self, options: &Options) -> bool {
        match self {
            Enabled::Always(enabled) => *enabled,
            Enabled::When(predicate) => predicate(options),
        }
    }
}

impl fmt::Debug for Enabled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Enabled::Always(enabled) => f.debug_tuple("Always").field(enabled).finish(),
            Enabled::When(_) => f.write_str("When(..)"),
        }
    }
}

/// Whether a conversation may use a tool at all (see [`ToolDefinitionBuilder::available_when`]).
#[derive(Clone, Default)]
struct Availability(Option<Predicate>);

/// A decision from a conversation's options.
type Predicate = Arc<dyn Fn(&Options) -> bool + Send + Sync>;

impl Availability {
    fn allows(&self, options: &Options) -> bool {
        self.0.as_ref().is_none_or(|predicate| predicate(options))
    }
}

impl fmt::Debug for Availability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "When(..)"
        } else {
            "Always"
        })
    }
}

/// A tool's name, description, input schema and traits.
///
/// Built with [`ToolDefinition::builder`]; building compiles the input schema once, so a
/// definition that builds can always be offered to a model.
///
/// ```
/// use flemma_schema::dsl::{object, string};
/// use flemma_core::ToolDefinition;
/// use flemma_schema::Capability;
///
/// let def = ToolDefinition::builder("search", "Search the knowledge base.")?
///     .input(object([("query", string().describe("What to look for"))]))
///     .strict(true)
///     .capability(Capability::DisablesBackground)
///     .build()?;
/// assert_eq!(def.name(), "search");
/// assert_eq!(def.spec().input_schema["required"], serde_json::json!(["query", "flemma.save_to"]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ToolDefinition {
    spec: ToolSpec,
    is_async: bool,
    enabled: Enabled,
    available: Availability,
    executable: bool,
    capabilities: Capabilities,
    config_defaults: Option<Map<String, Value>>,
}

impl ToolDefinition {
    /// Starts a definition. The name must follow the tool-name rule (`[A-Za-z0-9_-]` segments
    /// joined by `.`).
    ///
    /// # Errors
    ///
    /// [`flemma_ids::InvalidId`] for a name outside the rule.
    pub fn builder(
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Result<ToolDefinitionBuilder, flemma_ids::InvalidId> {
        Ok(Self::builder_for(ToolName::new(name)?, description))
    }

    /// Starts a definition for an already validated name.
    pub fn builder_for(name: ToolName, description: impl Into<String>) -> ToolDefinitionBuilder {
        ToolDefinitionBuilder {
            name,
            description: description.into(),
            input: Ok(InputSchema::Dsl(flemma_schema::dsl::object::<String>([]))),
            output_schema: None,
            strict: false,
            is_async: false,
            enabled: Enabled::Always(true),
            available: Availability::default(),
            executable: true,
            capabilities: Capabilities::NONE,
            config_defaults: None,
        }
    }

    /// The definition of a built-in tool: its name, description, strict input
    /// schema and capabilities from flemma-schema's table.
    ///
    /// # Errors
    ///
    /// Never for the shipped tables; [`SchemaError`] otherwise.
    pub fn from_builtin(builtin: &flemma_schema::builtin::Builtin) -> Result<Self, SchemaError> {
        let mut builder = Self::builder_for(ToolName::new(builtin.name)?, builtin.description)
            .input(builtin.input.clone())
            .strict(true)
            .asynchronous(builtin.is_async);
        for capability in builtin.capabilities.iter() {
            builder = builder.capability(capability);
        }
        builder.build()
    }

    /// The tool name.
    pub fn name(&self) -> &ToolName {
        &self.spec.name
    }

    /// What the model is told (description with the output schema, input schema with the
    /// harness parameters).
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Whether the tool is asynchronous: only asynchronous tools can run in the background.
    pub fn is_async(&self) -> bool {
        self.is_async
    }

    /// Whether the tool is in the default tool set under these options.
    pub fn is_enabled(&self, options: &Options) -> bool {
        self.enabled.is_enabled(options)
    }

    /// Whether a conversation with these options may use the tool at all (see
    /// [`ToolDefinitionBuilder::available_when`]; `true` unless the tool sets a predicate).
    pub fn is_available(&self, options: &Options) -> bool {
        self.available.allows(options)
    }

    /// Whether the tool can be executed (`executable = false` tools are offered but answer
    /// `Tool '<name>' is not executable`).
    pub fn is_executable(&self) -> bool {
        self.executable
    }

    /// The declared capabilities.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// Whether the tool declares `capability`.
    pub fn has_capability(&self, capability: Capability) -> bool {
        self.capabilities.contains(capability)
    }

    /// The defaults of the tool's own options (`tools.<name>.*`), if it has any.
    pub fn config_defaults(&self) -> Option<&Map<String, Value>> {
        self.config_defaults.as_ref()
    }
}

/// Builds a [`ToolDefinition`]; see [`ToolDefinition::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ToolDefinitionBuilder {
    name: ToolName,
    description: String,
    /// An input type's schema that failed to compile is reported by `build`.
    input: Result<InputSchema, SchemaError>,
    output_schema: Option<Value>,
    strict: bool,
    is_async: bool,
    enabled: Enabled,
    available: Availability,
    executable: bool,
    capabilities: Capabilities,
    config_defaults: Option<Map<String, Value>>,
}

impl ToolDefinitionBuilder {
    /// The input schema: a DSL [`Schema`](flemma_schema::Schema), raw JSON Schema through
    /// [`InputSchema::Raw`], or a compiled [`StrictSchema`](flemma_schema::StrictSchema).
    pub fn input(mut self, input: impl Into<InputSchema>) -> Self {
        self.input = Ok(input.into());
        self
    }

    #[cfg(feature = "typed")]
    /// The input schema derived from a Rust type (schemars), compiled to the strict form;
    /// the tool is made strict. Pair it with [`typed_tool_fn`](crate::typed_tool_fn) to
    /// receive the decoded value.
    pub fn input_type<T: schemars::JsonSchema>(mut self) -> Self {
        self.input = flemma_schema::strict_schema_for::<T>(flemma_schema::Dialect::OpenAiResponses)
            .map(InputSchema::Strict);
        self.strict = true;
        self
    }

    /// A JSON Schema of the output, appended to the description.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Strict schemas (providers that support it enforce them).
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Marks the tool asynchronous: it may run in the background, and is offered
    /// `flemma.background` unless it declares [`Capability::DisablesBackground`].
    pub fn asynchronous(mut self, is_async: bool) -> Self {
        self.is_async = is_async;
        self
    }

    /// Leaves the tool out of the default tool set (`false`) or puts it back (`true`).
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.enabled = Enabled::Always(enabled);
        self
    }

    /// Decides membership of the default tool set from the options.
    pub fn enabled_when(
        mut self,
        predicate: impl Fn(&Options) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.enabled = Enabled::When(Arc::new(predicate));
        self
    }

    /// Decides whether a conversation may use the tool at all, whatever its `tools` list
    /// says: a tool unavailable under a conversation's options is left out of its tool set
    /// (even when the list names it), and a call of it is answered `Tool '<name>' is not
    /// available in this conversation` without running. For options that may only take
    /// tools away, such as a frontmatter narrowing an MCP server (`mcp.servers.<name>`).
    /// The predicate should depend on the options alone: what it says is kept for as long as
    /// a conversation's options stay the same (a session offers the same tools meanwhile).
    ///
    /// ```
    /// use flemma_config::{Config, Layer};
    /// use flemma_core::ToolDefinition;
    ///
    /// let def = ToolDefinition::builder("fs.write_file", "Writes a file.")?
    ///     .available_when(|options| options.mcp.allows("fs", "write_file"))
    ///     .build()?;
    /// let mut config = Config::new();
    /// assert!(def.is_available(&config.options()?));
    /// config.set(Layer::Frontmatter, "mcp.servers.fs.enabled", false)?;
    /// assert!(!def.is_available(&config.options()?), "the narrowing takes it away");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn available_when(
        mut self,
        predicate: impl Fn(&Options) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.available = Availability(Some(Arc::new(predicate)));
        self
    }

    /// `false` offers the tool but refuses to run it.
    pub fn executable(mut self, executable: bool) -> Self {
        self.executable = executable;
        self
    }

    /// Declares a capability.
    pub fn capability(mut self, capability: Capability) -> Self {
        self.capabilities = self.capabilities.with(capability);
        self
    }

    /// Defaults of the tool's own options, materialised under `tools.<name>` when the tool is
    /// registered.
    pub fn config_defaults(mut self, defaults: Map<String, Value>) -> Self {
        self.config_defaults = Some(defaults);
        self
    }

    /// Compiles the input schema and injects the harness parameters.
    ///
    /// # Errors
    ///
    /// The schema's errors ([`SchemaError`]: an optional field in a strict schema, …).
    pub fn build(self) -> Result<ToolDefinition, SchemaError> {
        let harness = HarnessParameters::from_capabilities(self.is_async, self.capabilities);
        let mut spec = ToolSpec::builder(self.name, self.description)
            .input(self.input?)
            .strict(self.strict)
            .harness(harness);
        if let Some(output) = self.output_schema {
            spec = spec.output_schema(output);
        }
        Ok(ToolDefinition {
            spec: spec.build()?,
            is_async: self.is_async,
            enabled: self.enabled,
            available: self.available,
            executable: self.executable,
            capabilities: self.capabilities,
            config_defaults: self.config_defaults,
        })
    }
}
