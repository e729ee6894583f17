//! The crate's error types: registering resolvers, and a resolver failing to decide.

use std::error::Error as StdError;

/// What can go wrong when registering resolvers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// A resolver name that is empty or holds whitespace.
    #[error("invalid resolver name {name:?}: names are non-empty and hold no whitespace")]
    InvalidName {
        /// The rejected name.
        name: String,
    },
}

/// A resolver that could not decide: its policy service was unreachable, the person it asked
/// went away, it panicked.
///
/// The chain records the failure (as `error` in an [`Explanation`](crate::Explanation)'s trace, in
/// [`Outcome::failures`](crate::Outcome::failures)) and asks the next resolver. The message says
/// what the resolver was doing; the cause, when there is one, stays available through
/// [`std::error::Error::source`].
///
/// ```
/// use flemma_approval::ResolverError;
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let error = ResolverError::with_source("the policy service is unreachable", io);
/// assert_eq!(error.to_string(), "the policy service is unreachable");
/// assert_eq!(error.report(), "the policy service is unreachable: connection refused");
/// assert!(std::error::Error::source(&error).is_some());
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ResolverError {
    message: String,
    #[source]
    source: Option<Box<dyn StdError + Send + Sync>>,
}

impl ResolverError {
    /// A failure without an underlying error.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// A failure caused by `source`.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn StdError + Send + Sync>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A resolver that panicked, with the panic's message.
    pub(crate) fn panicked(payload: &(dyn std::any::Any + Send)) -> Self {
        Self::new(panic_message(payload))
    }

    /// The message, without the cause.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message followed by every cause, joined by `: ` (what a trace shows).
    pub fn report(&self) -> String {
        flemma_ids::error_chain(self)
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    format!("panicked: {text}")
}
