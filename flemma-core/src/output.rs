//! [`ToolOutput`]: what a tool call produced, as the model will see it.

use serde_json::Value;

/// The successful output of a call: text, or JSON (written with a `json` fence).
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Plain text.
    Text(String),
    /// A JSON value.
    Json(Value),
}

impl Output {
    /// The text the result block holds: the text itself, or the JSON encoding.
    pub fn to_text(&self) -> String {
        match self {
            Output::Text(text) => text.clone(),
            Output::Json(value) => value.to_string(),
        }
    }
}

/// What a tool call produced (the Flemma plugin's `ExecutionResult`). A failure is a result the
/// model sees and can act on ("File not found: x"), not a Rust error: faults of the harness itself
/// are the executor's errors.
///
/// ```
/// use flemma_core::ToolOutput;
///
/// let ok = ToolOutput::text("3 files");
/// assert!(ok.is_success());
/// let failed = ToolOutput::error("Command exited with code 2").with_partial_output("make: ***");
/// assert_eq!(failed.result_text(), "Command exited with code 2\n\nPartial output:\nmake: ***");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// The call succeeded.
    Success(Output),
    /// The call failed: `error` is what the model is told, with any output produced so far.
    Failure {
        /// The error text (`Unknown error` when empty).
        error: String,
        /// Output produced before the failure (a command's last lines before it timed out).
        partial_output: Option<String>,
    },
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput::Success(Output::Text(text.into()))
    }

    /// A successful JSON result.
    pub fn json(value: Value) -> Self {
        ToolOutput::Success(Output::Json(value))
    }

    /// A failure with a message for the model.
    pub fn error(error: impl Into<String>) -> Self {
        ToolOutput::Failure {
            error: error.into(),
            partial_output: None,
        }
    }

    /// Adds the output produced before a failure (ignored on a success).
    #[must_use]
    pub fn with_partial_output(self, output: impl Into<String>) -> Self {
        match self {
            ToolOutput::Failure { error, .. } => ToolOutput::Failure {
                error,
                partial_output: Some(output.into()),
            },
            success @ ToolOutput::Success(_) => success,
        }
    }

    /// Whether the call succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, ToolOutput::Success(_))
    }

    /// The text of the result block: the output, or the error text (default
    /// `Unknown error`) followed by `\n\nPartial output:\n` and the output when there was some.
    pub fn result_text(&self) -> String {
        match self {
            ToolOutput::Success(output) => output.to_text(),
            ToolOutput::Failure {
                error,
                partial_output,
            } => flemma_store::ResultBody::Error {
                error: if error.is_empty() {
                    crate::messages::UNKNOWN_ERROR
                } else {
                    error
                },
                partial_output: partial_output.as_deref(),
            }
            .render()
            .into_owned(),
        }
    }

    /// The result block this output is written as.
    pub fn into_result_body(self) -> flemma_ast::writer::ResultBody {
        use flemma_ast::writer::ResultBody;
        match self {
            ToolOutput::Success(Output::Text(text)) => ResultBody::Success(text),
            ToolOutput::Success(Output::Json(value)) => ResultBody::Json(value),
            ToolOutput::Failure {
                error,
                partial_output,
            } => ResultBody::Error {
                message: (!error.is_empty()).then_some(error),
                partial_output,
            },
        }
    }

    /// Whether the result block is fenced as `json` (a JSON success).
    pub fn is_json(&self) -> bool {
        matches!(self, ToolOutput::Success(Output::Json(_)))
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput::text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        ToolOutput::text(text)
    }
}

impl<T: Into<ToolOutput>, E: std::fmt::Display> From<Result<T, E>> for ToolOutput {
    /// `Ok` converts as usual; `Err` becomes a failure with the error's text.
    fn from(result: Result<T, E>) -> Self {
        match result {
            Ok(output) => output.into(),
            Err(error) => ToolOutput::error(error.to_string()),
        }
    }
}
