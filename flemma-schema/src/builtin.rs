//! The input schemas of the built-in tools, as DSL and as Rust types.

use std::sync::LazyLock;

use crate::capability::{Capabilities, Capability};
use crate::dsl::{Schema, number, object, string};
use crate::error::SchemaError;
use crate::harness::HarnessParameters;
use crate::messages as msg;
use crate::spec::ToolSpec;

/// A built-in tool's name, description, input schema, and the traits that decide its harness
/// parameters and how the SDK treats it (its capabilities).
#[derive(Debug, Clone, PartialEq)]
pub struct Builtin {
    /// The tool name.
    pub name: &'static str,
    /// The description (truncation constants filled in).
    pub description: &'static str,
    /// The input schema.
    pub input: Schema,
    /// Whether the tool runs asynchronously (and so may run in the background).
    pub is_async: bool,
    /// The capability tags the tool declares (`bash`: `auto_approves_if_sandboxed`; `read`:
    /// `emits_template`; `flemma.jobs.status`: `disables_background`, `disables_save_to`).
    pub capabilities: Capabilities,
}

impl Builtin {
    /// The harness parameters the tool is offered.
    pub fn harness(&self) -> HarnessParameters {
        HarnessParameters::from_capabilities(self.is_async, self.capabilities)
    }

    /// The spec the model sees; built-in tools are strict.
    ///
    /// # Errors
    ///
    /// Never for the shipped schemas; the signature follows [`ToolSpecBuilder::build`].
    ///
    /// [`ToolSpecBuilder::build`]: crate::ToolSpecBuilder::build
    pub fn spec(&self, strict: bool) -> Result<ToolSpec, SchemaError> {
        ToolSpec::builder(flemma_ids::ToolName::new(self.name)?, self.description)
            .input(self.input.clone())
            .strict(strict)
            .harness(self.harness())
            .build()
    }
}

fn label(example: &str) -> Schema {
    string().describe(format!(
        "A short human-readable label for this operation (e.g., '{example}')"
    ))
}

fn tool(name: &'static str, description: &'static str, is_async: bool, input: Schema) -> Builtin {
    Builtin {
        name,
        description,
        input,
        is_async,
        capabilities: Capabilities::NONE,
    }
}

/// Every built-in tool, sorted by name, built once.
static ALL: LazyLock<Vec<Builtin>> = LazyLock::new(builtins);

/// Every built-in tool, sorted by name, built once per process (see [`builtins`] for owned
/// copies).
pub fn all() -> &'static [Builtin] {
    &ALL
}

/// The built-in tool of that name.
pub fn get(name: &str) -> Option<&'static Builtin> {
    ALL.iter().find(|b| b.name == name)
}

/// Whether the built-in tool `name` declares `capability`; `false` for every other name.
///
/// ```
/// use flemma_schema::{Capability, builtin};
///
/// assert!(builtin::has_capability("bash", Capability::AutoApprovesIfSandboxed));
/// assert!(builtin::has_capability("read", Capability::EmitsTemplate));
/// assert!(!builtin::has_capability("write", Capability::EmitsTemplate));
/// assert!(!builtin::has_capability("mcp.fs.read", Capability::EmitsTemplate));
/// ```
pub fn has_capability(name: &str, capability: Capability) -> bool {
    get(name).is_some_and(|b| b.capabilities.contains(capability))
}

/// The built-in tools that declare `capability`, sorted by name.
pub fn with_capability(capability: Capability) -> impl Iterator<Item = &'static Builtin> {
    ALL.iter()
        .filter(move |b| b.capabilities.contains(capability))
}

/// Every built-in tool, sorted by name.
pub fn builtins() -> Vec<Builtin> {
    vec![
        bash(),
        edit(),
        find(),
        jobs_status(),
        grep(),
        ls(),
        read(),
        write(),
    ]
}

/// `bash` (async; safe to approve while sandboxed).
pub fn bash() -> Builtin {
    Builtin {
        capabilities: Capabilities::of(&[Capability::AutoApprovesIfSandboxed]),
        ..bash_tool()
    }
}

fn bash_tool() -> Builtin {
    tool(
        "bash",
        msg::BASH,
        true,
        object([
            ("label", label("running tests")),
            ("command", string().describe("The bash command to execute")),
            (
                "timeout",
                number()
                    .nullable()
                    .describe("Timeout in seconds (default: 30)"),
            ),
        ]),
    )
}

/// `read` (sync; its results are templates).
pub fn read() -> Builtin {
    Builtin {
        capabilities: Capabilities::of(&[Capability::EmitsTemplate]),
        ..read_tool()
    }
}

fn read_tool() -> Builtin {
    tool(
        "read",
        msg::READ,
        false,
        object([
            ("label", label("reading config.lua")),
            (
                "path",
                string().describe("Path to the file to read (relative or absolute)"),
            ),
            (
                "offset",
                number()
                    .nullable()
                    .describe("Line number to start reading from (1-indexed)"),
            ),
            (
                "limit",
                number()
                    .nullable()
                    .describe("Maximum number of lines to read"),
            ),
        ]),
    )
}

/// `write` (sync).
pub fn write() -> Builtin {
    tool(
        "write",
        msg::WRITE,
        false,
        object([
            ("label", label("creating config.lua")),
            (
                "path",
                string().describe("Path to the file to write (relative or absolute)"),
            ),
            ("content", string().describe("Content to write to the file")),
        ]),
    )
}

/// `edit` (sync).
pub fn edit() -> Builtin {
    tool(
        "edit",
        msg::EDIT,
        false,
        object([
            ("label", label("fixing typo in config.lua")),
            (
                "path",
                string().describe("Path to the file to edit (relative or absolute)"),
            ),
            (
                "oldText",
                string().describe("Exact text to find and replace (must match exactly)"),
            ),
            (
                "newText",
                string().describe("New text to replace the old text with"),
            ),
        ]),
    )
}

/// `grep` (async).
pub fn grep() -> Builtin {
    tool(
        "grep",
        msg::GREP,
        true,
        object([
            ("label", label("searching for TODO comments")),
            (
                "pattern",
                string().describe("Regular expression pattern to search for"),
            ),
            (
                "path",
                string()
                    .nullable()
                    .describe("Directory to search in (default: working directory)"),
            ),
            (
                "glob",
                string()
                    .nullable()
                    .describe("File glob filter (e.g., '*.lua', '*.{ts,tsx}')"),
            ),
            (
                "limit",
                number()
                    .nullable()
                    .describe("Maximum number of matches (default: 100)"),
            ),
        ]),
    )
}

/// `find` (async).
pub fn find() -> Builtin {
    tool(
        "find",
        msg::FIND,
        true,
        object([
            ("label", label("finding test files")),
            (
                "pattern",
                string().describe("Glob pattern to search for (e.g., '*.lua', 'src/**/*.tsx')"),
            ),
            (
                "path",
                string()
                    .nullable()
                    .describe("Directory to search in (default: working directory)"),
            ),
            (
                "limit",
                number()
                    .nullable()
                    .describe("Maximum number of results (default: 500)"),
            ),
        ]),
    )
}

/// `ls` (sync).
pub fn ls() -> Builtin {
    tool(
        "ls",
        msg::LS,
        false,
        object([
            ("label", label("listing project root")),
            (
                "path",
                string().describe("Directory path to list (relative or absolute)"),
            ),
            (
                "max_depth",
                number()
                    .nullable()
                    .describe("Maximum recursion depth (default: 1, max: 10)"),
            ),
            (
                "limit",
                number()
                    .nullable()
                    .describe("Maximum number of entries (default: 500)"),
            ),
        ]),
    )
}

/// `flemma.jobs.status` (sync; never backgrounded or redirected).
pub fn jobs_status() -> Builtin {
    Builtin {
        capabilities: Capabilities::of(&[
            Capability::DisablesBackground,
            Capability::DisablesSaveTo,
        ]),
        ..tool(
            "flemma.jobs.status",
            msg::JOBS_STATUS,
            false,
            object([(
                "job_id",
                string().describe("The job ID (e.g., 'job_xxx') from the tool result placeholder."),
            )]),
        )
    }
}

/// The built-in tools' inputs as Rust types: one type per tool, what the tool reads a call as
/// (`from_call`, leniently, as the Flemma plugin reads it) and, with the `typed` feature, a
/// schema derived from it that equals the DSL one above (a test holds the two together, and
/// another that `from_call` reads back every input the type serializes to).
///
/// ```
/// use flemma_schema::builtin::inputs::{EditInput, MissingInput};
/// use serde_json::json;
///
/// let edit = EditInput::from_call(&json!({"path": "a.txt", "oldText": "x", "newText": ""}))?;
/// assert_eq!((edit.path.as_str(), edit.new_text.as_str(), edit.label.as_str()), ("a.txt", "", ""));
/// let missing = EditInput::from_call(&json!({"path": "a.txt", "oldText": ""})).unwrap_err();
/// assert_eq!(missing.field, "oldText");
/// # Ok::<(), MissingInput>(())
/// ```
#[allow(
    clippy::doc_markdown,
    reason = "the doc comments are the schema descriptions, byte for byte"
)]
pub mod inputs {
    use serde::{Deserialize, Serialize};
    use serde_json::Value;

    /// A field a built-in tool needs that a call does not give: absent, `null`, not a string,
    /// or (where the tool needs text) empty. The tool answers with its own message for it
    /// (`No path provided`, …).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
    #[error("the call gives no usable `{field}`")]
    #[non_exhaustive]
    pub struct MissingInput {
        /// The field's name in the call (`path`, `oldText`, …).
        pub field: &'static str,
    }

    /// The string `key`, when the call gives one.
    fn text<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
        input.get(key).and_then(Value::as_str)
    }

    /// The string `key`, which must be given and not empty.
    fn required(input: &Value, field: &'static str) -> Result<String, MissingInput> {
        text(input, field)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or(MissingInput { field })
    }

    /// The string `key`, which must be given (it may be empty).
    fn given(input: &Value, field: &'static str) -> Result<String, MissingInput> {
        text(input, field)
            .map(str::to_owned)
            .ok_or(MissingInput { field })
    }

    /// The string `key`, or nothing.
    fn optional(input: &Value, key: &str) -> Option<String> {
        text(input, key).map(str::to_owned)
    }

    /// The label: only previews show it, so a call without one still runs.
    fn label(input: &Value) -> String {
        text(input, "label").unwrap_or_default().to_owned()
    }

    /// The number `key`, when the call gives one (a number written as a string is not one).
    fn number(input: &Value, key: &str) -> Option<f64> {
        input.get(key).and_then(Value::as_f64)
    }

    /// Input of `bash`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct BashInput {
        /// A short human-readable label for this operation (e.g., 'running tests')
        pub label: String,
        /// The bash command to execute
        pub command: String,
        /// Timeout in seconds (default: 30)
        pub timeout: Option<f64>,
    }

    /// Input of `read`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct ReadInput {
        /// A short human-readable label for this operation (e.g., 'reading config.lua')
        pub label: String,
        /// Path to the file to read (relative or absolute)
        pub path: String,
        /// Line number to start reading from (1-indexed)
        pub offset: Option<f64>,
        /// Maximum number of lines to read
        pub limit: Option<f64>,
    }

    /// Input of `write`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct WriteInput {
        /// A short human-readable label for this operation (e.g., 'creating config.lua')
        pub label: String,
        /// Path to the file to write (relative or absolute)
        pub path: String,
        /// Content to write to the file
        pub content: String,
    }

    /// Input of `edit`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct EditInput {
        /// A short human-readable label for this operation (e.g., 'fixing typo in config.lua')
        pub label: String,
        /// Path to the file to edit (relative or absolute)
        pub path: String,
        /// Exact text to find and replace (must match exactly)
        #[serde(rename = "oldText")]
        pub old_text: String,
        /// New text to replace the old text with
        #[serde(rename = "newText")]
        pub new_text: String,
    }

    /// Input of `grep`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct GrepInput {
        /// A short human-readable label for this operation (e.g., 'searching for TODO comments')
        pub label: String,
        /// Regular expression pattern to search for
        pub pattern: String,
        /// Directory to search in (default: working directory)
        pub path: Option<String>,
        /// File glob filter (e.g., '*.lua', '*.{ts,tsx}')
        pub glob: Option<String>,
        /// Maximum number of matches (default: 100)
        pub limit: Option<f64>,
    }

    /// Input of `find`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct FindInput {
        /// A short human-readable label for this operation (e.g., 'finding test files')
        pub label: String,
        /// Glob pattern to search for (e.g., '*.lua', 'src/**/*.tsx')
        pub pattern: String,
        /// Directory to search in (default: working directory)
        pub path: Option<String>,
        /// Maximum number of results (default: 500)
        pub limit: Option<f64>,
    }

    /// Input of `ls`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct LsInput {
        /// A short human-readable label for this operation (e.g., 'listing project root')
        pub label: String,
        /// Directory path to list (relative or absolute)
        pub path: String,
        /// Maximum recursion depth (default: 1, max: 10)
        pub max_depth: Option<f64>,
        /// Maximum number of entries (default: 500)
        pub limit: Option<f64>,
    }

    /// Input of `flemma.jobs.status`.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    #[cfg_attr(feature = "typed", derive(schemars::JsonSchema))]
    #[serde(deny_unknown_fields)]
    pub struct JobStatusInput {
        /// The job ID (e.g., 'job_xxx') from the tool result placeholder.
        pub job_id: String,
    }

    impl BashInput {
        /// Reads a call: `command` must be a string and not empty; `timeout` is read when it
        /// is a number.
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `command`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                label: label(input),
                command: required(input, "command")?,
                timeout: number(input, "timeout"),
            })
        }
    }

    impl ReadInput {
        /// Reads a call: `path` must be a string and not empty; `offset` and `limit` are read
        /// when they are numbers.
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `path`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                label: label(input),
                path: required(input, "path")?,
                offset: number(input, "offset"),
                limit: number(input, "limit"),
            })
        }
    }

    impl WriteInput {
        /// Reads a call: `path` must be a string and not empty, `content` a string (empty
        /// writes an empty file).
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `path`, else `content`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                label: label(input),
                path: required(input, "path")?,
                content: given(input, "content")?,
            })
        }
    }

    impl EditInput {
        /// Reads a call: `path` and `oldText` must be strings and not empty, `newText` a
        /// string (empty deletes the old text).
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `path`, else `oldText`, else `newText`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                label: label(input),
                path: required(input, "path")?,
                old_text: required(input, "oldText")?,
                new_text: given(input, "newText")?,
            })
        }
    }

    impl GrepInput {
        /// Reads a call: `pattern` must be a string and not empty; `path` and `glob` are read
        /// when they are strings, `limit` when it is a number.
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `pattern`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                label: label(input),
                pattern: required(input, "pattern")?,
                path: optional(input, "path"),
                glob: optional(input, "glob"),
                limit: number(input, "limit"),
            })
        }
    }

    impl FindInput {
        /// Reads a call: `pattern` must be a string and not empty; `path` is read when it is
        /// a string, `limit` when it is a number.
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `pattern`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                label: label(input),
                pattern: required(input, "pattern")?,
                path: optional(input, "path"),
                limit: number(input, "limit"),
            })
        }
    }

    impl LsInput {
        /// Reads a call: `path` must be a string and not empty; `max_depth` and `limit` are
        /// read when they are numbers.
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `path`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                label: label(input),
                path: required(input, "path")?,
                max_depth: number(input, "max_depth"),
                limit: number(input, "limit"),
            })
        }
    }

    impl JobStatusInput {
        /// Reads a call: `job_id` must be a string (an empty one names no job).
        ///
        /// # Errors
        ///
        /// [`MissingInput`] naming `job_id`.
        pub fn from_call(input: &Value) -> Result<Self, MissingInput> {
            Ok(Self {
                job_id: given(input, "job_id")?,
            })
        }
    }
}
