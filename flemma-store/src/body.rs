//! The canonical text of a finished result: what the store writes for it.

use std::borrow::Cow;

/// A finished tool or job result, as the store writes it.
///
/// Structured (table) outputs are passed as their JSON text in `output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultBody<'a> {
    /// The tool succeeded with this output.
    Success {
        /// The output.
        output: &'a str,
    },
    /// The tool failed.
    Error {
        /// The error text.
        error: &'a str,
        /// What the tool printed before it failed; `None` or empty when nothing.
        partial_output: Option<&'a str>,
    },
}

impl<'a> ResultBody<'a> {
    /// The canonical text: the output of a success; the error text of a failure, followed by
    /// `\n\nPartial output:\n<output>` when it produced output. This is what
    /// [`Store::materialize`](crate::Store::materialize) writes and what truncation overflow
    /// and `flemma.save_to` should write for the same result. Borrows unless there is partial
    /// output to append.
    ///
    /// ```
    /// use flemma_store::ResultBody;
    ///
    /// assert_eq!(ResultBody::Success { output: "ok" }.render(), "ok");
    /// let failed = ResultBody::Error { error: "exit 1", partial_output: Some("line 1") };
    /// assert_eq!(failed.render(), "exit 1\n\nPartial output:\nline 1");
    /// let failed = ResultBody::Error { error: "exit 1", partial_output: Some("") };
    /// assert_eq!(failed.render(), "exit 1");
    /// ```
    pub fn render(&self) -> Cow<'a, str> {
        match *self {
            ResultBody::Success { output } => Cow::Borrowed(output),
            ResultBody::Error {
                error,
                partial_output: Some(partial),
            } if !partial.is_empty() => {
                Cow::Owned(format!("{error}\n\nPartial output:\n{partial}"))
            }
            ResultBody::Error { error, .. } => Cow::Borrowed(error),
        }
    }
}
