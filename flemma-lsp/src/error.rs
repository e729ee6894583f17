//! What can go wrong while serving, and how an error is shown.

/// An error and its causes, `: `-joined (as the `flemma` command prints them).
pub(crate) fn report(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}

/// What can go wrong while serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LspError {
    /// The client went away without `shutdown`.
    #[error("the client closed the connection without shutdown")]
    Disconnected,
    /// The client sent `exit` without `shutdown` first.
    #[error("the client sent exit without shutdown")]
    ExitWithoutShutdown,
    /// A message could not be sent (the connection is closed).
    #[error("cannot send to the client: the connection is closed")]
    Send,
    /// A value could not be encoded.
    #[error("cannot encode a message")]
    Json(#[source] serde_json::Error),
    /// A change's range does not fit the document.
    #[error("range {range:?} does not fit the document's {lines} lines")]
    Range {
        /// The range.
        range: lsp_types::Range,
        /// The document's lines.
        lines: usize,
    },
    /// The parser refused an edit.
    #[error("cannot apply an edit")]
    Edit(#[source] flemma_ast::AstError),
    /// Standard input or output failed.
    #[error("standard input or output failed")]
    Io(#[source] std::io::Error),
}
