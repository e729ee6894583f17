//! An error as one line of text: its message and its causes.

/// `error` and its [`source`](std::error::Error::source)s, each after `: `, as the Flemma
/// plugin writes an error with its cause (`Failed to write '<path>': <err>`). A cause whose
/// text the line already ends with is not written again (some errors repeat their cause in
/// their own message).
///
/// Every flemma crate's errors name only their own context in their `Display` and keep the
/// cause as their source, so this is how a message meant for a person or a model is made of
/// one.
///
/// ```
/// use std::io;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("Failed to write '/tmp/out.txt'")]
/// struct WriteError(#[source] io::Error);
///
/// let error = WriteError(io::Error::other("No space left on device"));
/// assert_eq!(
///     flemma_ids::error_chain(&error),
///     "Failed to write '/tmp/out.txt': No space left on device"
/// );
/// ```
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let next_text = next.to_string();
        if !text.ends_with(&next_text) {
            text.push_str(": ");
            text.push_str(&next_text);
        }
        cause = next.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn each_cause_follows_once() {
        let error = Layer(
            "outer",
            Some(Box::new(Layer(
                "middle",
                Some(Box::new(Layer("inner", None))),
            ))),
        );
        assert_eq!(error_chain(&error), "outer: middle: inner");
        assert_eq!(error_chain(&Layer("alone", None)), "alone");
        // A message that already ends with its cause's text.
        let repeated = Layer(
            "call failed: timeout",
            Some(Box::new(Layer("timeout", None))),
        );
        assert_eq!(error_chain(&repeated), "call failed: timeout");
    }
}
