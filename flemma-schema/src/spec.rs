//! [`ToolSpec`]: the provider-neutral description of a tool, and its shape per provider.

use flemma_ids::ToolName;
use serde::Serialize;
use serde_json::{Value, json};

use crate::dsl::Schema;
use crate::emit::Mode;
use crate::error::SchemaError;
use crate::harness::{HarnessParameters, inject_harness_parameters};
use crate::json::{inline_refs, sort_keys};
use crate::messages as msg;
use crate::strict::StrictSchema;

/// The request format a tool declaration is shaped for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// OpenAI Responses API (`strict: true` sent for strict tools).
    OpenAiResponses,
    /// OpenAI-compatible Chat Completions (no `strict`).
    OpenAiChat,
    /// Anthropic Messages API (`strict: true` sent for strict tools).
    Anthropic,
    /// Vertex AI / Gemini `parametersJsonSchema` (`$ref`s inlined).
    Gemini,
}

impl Dialect {
    /// Whether the dialect needs `$ref`s replaced by the definitions they point to.
    pub fn inlines_refs(self) -> bool {
        self == Dialect::Gemini
    }
}

/// Where a tool's input schema comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum InputSchema {
    /// Built with the DSL; emitted in strict or lenient mode to match the tool.
    Dsl(Schema),
    /// Raw JSON Schema, forwarded as given (keys sorted).
    Raw(Value),
    /// Already compiled to strict form (for example derived from a Rust type).
    Strict(StrictSchema),
}

impl From<Schema> for InputSchema {
    fn from(schema: Schema) -> Self {
        InputSchema::Dsl(schema)
    }
}

impl From<StrictSchema> for InputSchema {
    fn from(schema: StrictSchema) -> Self {
        InputSchema::Strict(schema)
    }
}

/// What the model is told about a tool: `{name, description, input_schema, strict}`, with the
/// harness parameters injected and the output schema appended to the description.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// The tool name (`bash`, `flemma.jobs.status`).
    pub name: ToolName,
    /// The description, output-schema suffix included.
    pub description: String,
    /// The JSON Schema of the input, keys sorted.
    pub input_schema: Value,
    /// Whether providers that support it should enforce the schema strictly.
    pub strict: bool,
}

/// Builds a [`ToolSpec`]; see [`ToolSpec::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ToolSpecBuilder {
    name: ToolName,
    description: String,
    input: InputSchema,
    strict: bool,
    harness: HarnessParameters,
    output_schema: Option<Value>,
}

impl ToolSpec {
    /// Starts a spec for a tool without parameters; set the input with
    /// [`ToolSpecBuilder::input`].
    ///
    /// ```
    /// use flemma_schema::dsl::{object, string};
    /// use flemma_schema::{HarnessParameters, ToolSpec};
    ///
    /// let name = flemma_ids::ToolName::new("flemma.jobs.status")?;
    /// let spec = ToolSpec::builder(name, "Check the status of a background job.")
    ///     .input(object([("job_id", string().describe("The job ID."))]))
    ///     .strict(true)
    ///     .harness(HarnessParameters::none())
    ///     .build()?;
    /// assert_eq!(spec.wire_name(), "flemma__jobs__status");
    /// assert_eq!(spec.input_schema["required"], serde_json::json!(["job_id"]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(name: ToolName, description: impl Into<String>) -> ToolSpecBuilder {
        ToolSpecBuilder {
            name,
            description: description.into(),
            input: InputSchema::Dsl(crate::dsl::object::<String>([])),
            strict: false,
            harness: HarnessParameters::none(),
            output_schema: None,
        }
    }

    /// The name as providers accept it: each `.` becomes `__`.
    pub fn wire_name(&self) -> std::borrow::Cow<'_, str> {
        self.name.to_wire()
    }

    /// The tool declaration in a provider's request format, keys sorted.
    ///
    /// # Errors
    ///
    /// For [`Dialect::Gemini`], a schema whose `$ref`s cannot be inlined.
    pub fn to_provider(&self, dialect: Dialect) -> Result<Value, SchemaError> {
        let name = self.wire_name();
        let mut out = match dialect {
            Dialect::OpenAiResponses => {
                let mut tool = json!({
                    "type": "function",
                    "name": name,
                    "description": self.description,
                    "parameters": self.input_schema,
                });
                if self.strict {
                    tool["strict"] = Value::Bool(true);
                }
                tool
            }
            Dialect::OpenAiChat => json!({
                "type": "function",
                "function": {"name": name, "description": self.description, "parameters": self.input_schema},
            }),
            Dialect::Anthropic => {
                let mut tool = json!({
                    "name": name,
                    "description": self.description,
                    "input_schema": self.input_schema,
                });
                if self.strict {
                    tool["strict"] = Value::Bool(true);
                }
                tool
            }
            Dialect::Gemini => json!({
                "name": name,
                "description": self.description,
                "parametersJsonSchema": inline_refs(&self.input_schema)?,
            }),
        };
        sort_keys(&mut out);
        Ok(out)
    }
}

impl ToolSpecBuilder {
    /// Sets the input schema (a DSL [`Schema`], raw JSON via [`InputSchema::Raw`], or a
    /// [`StrictSchema`]).
    pub fn input(mut self, input: impl Into<InputSchema>) -> Self {
        self.input = input.into();
        self
    }

    /// Marks the tool strict (OpenAI strict function calling).
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Sets which harness parameters the tool is offered.
    pub fn harness(mut self, harness: HarnessParameters) -> Self {
        self.harness = harness;
        self
    }

    /// Appends an output schema to the description.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Emits the input schema and injects the harness parameters.
    ///
    /// # Errors
    ///
    /// The DSL's errors (an optional field in a strict tool's schema, …).
    pub fn build(self) -> Result<ToolSpec, SchemaError> {
        let mut input_schema = match self.input {
            InputSchema::Dsl(schema) => schema.to_json_schema(if self.strict {
                Mode::Strict
            } else {
                Mode::Lenient
            })?,
            InputSchema::Raw(mut raw) => {
                sort_keys(&mut raw);
                raw
            }
            InputSchema::Strict(compiled) => compiled.into_schema(),
        };
        inject_harness_parameters(&mut input_schema, self.harness, self.strict);
        let mut description = self.description;
        if let Some(mut output) = self.output_schema {
            if let Some(obj) = output.as_object_mut() {
                obj.insert("$schema".into(), msg::OUTPUT_SCHEMA_DIALECT.into());
            }
            sort_keys(&mut output);
            description.push_str(msg::RETURNS_PREFIX);
            description.push_str(&output.to_string());
        }
        Ok(ToolSpec {
            name: self.name,
            description,
            input_schema,
            strict: self.strict,
        })
    }
}
