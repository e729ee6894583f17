//! How a command fails: the exit code and the error printed on stderr.

use crate::input;

/// A failure with the exit code it maps to and the error to print, if any.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: Option<anyhow::Error>,
}

impl Failure {
    /// A usage or I/O error (exit 2).
    pub(crate) fn usage(error: anyhow::Error) -> Self {
        Self {
            code: 2,
            error: Some(error),
        }
    }
}

/// A command that ran but failed (exit 1).
pub(crate) fn failed(error: anyhow::Error) -> Failure {
    Failure {
        code: 1,
        error: Some(error),
    }
}

impl From<input::InputError> for Failure {
    fn from(error: input::InputError) -> Self {
        Self::usage(error.into())
    }
}

/// A failed write to standard output (the commands' `?` on their writes). A closed pipe
/// (`flemma parse big.chat | head -1`) is how the reader says it has read enough: the command
/// ends quietly with success.
impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            return Self {
                code: 0,
                error: None,
            };
        }
        Self::usage(anyhow::Error::new(error).context("cannot write to standard output"))
    }
}

/// The error and its causes joined by `: `, each cause once: a cause whose text the message
/// before it already holds (`cannot read x: No such file` over `No such file`) is left out, and
/// so is a message the next one only restates at more length (`the request failed` over `the
/// request failed after 4 attempt(s)`).
pub(crate) fn describe(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || parts.last().is_some_and(|last| last.contains(&text)) {
            continue;
        }
        if parts
            .last()
            .is_some_and(|last| text.starts_with(last.as_str()))
        {
            parts.pop();
        }
        parts.push(text);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[derive(Debug, thiserror::Error)]
    #[error("the request failed after 4 attempt(s)")]
    struct Attempts;

    #[derive(Debug, thiserror::Error)]
    #[error("the request failed")]
    struct Request(#[source] Attempts);

    /// A cause that prints its own source as well as keeping it.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot open x: {0}")]
    struct Inlined(#[source] std::io::Error);

    #[test]
    fn each_cause_is_shown_once() {
        let error = anyhow::Error::new(Request(Attempts)).context("the anthropic request failed");
        assert_eq!(
            format!("{error:#}"),
            "the anthropic request failed: the request failed: the request failed after 4 attempt(s)"
        );
        assert_eq!(
            describe(&error),
            "the anthropic request failed: the request failed after 4 attempt(s)"
        );
        let error = anyhow::Error::new(Inlined(std::io::Error::other("denied"))).context("a.chat");
        assert_eq!(
            format!("{error:#}"),
            "a.chat: cannot open x: denied: denied"
        );
        assert_eq!(describe(&error), "a.chat: cannot open x: denied");
    }
}
