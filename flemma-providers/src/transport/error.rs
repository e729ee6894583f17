//! What goes wrong in the transport.

use std::fmt;

use super::config::tries;
use super::{Timeout, TokenError};
use crate::error::ProviderError;

/// An error of the HTTP library, kept opaque.
#[derive(Debug)]
pub struct HttpError(pub(super) reqwest::Error);

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

impl HttpError {
    /// The request timed out (connect or read).
    pub fn is_timeout(&self) -> bool {
        self.0.is_timeout()
    }

    /// Connecting failed.
    pub fn is_connect(&self) -> bool {
        self.0.is_connect()
    }
}

/// What went wrong talking to a provider.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A required environment variable is unset or empty.
    #[error("environment variable {name} is not set")]
    MissingEnv {
        /// The variable.
        name: &'static str,
    },
    /// The key cannot be sent as an HTTP header (control characters).
    #[error("the API key contains characters not allowed in an HTTP header")]
    InvalidKey,
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client")]
    Client(#[source] HttpError),
    /// The connection could not be opened, after retries.
    #[error("could not connect{}", tries(*attempts))]
    Connect {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        source: HttpError,
    },
    /// A wait ran out: connecting or the first byte (after retries), or the next chunk of a
    /// stream that began ([`Timeout::Idle`], not retried).
    #[error("{timeout}{}", tries(*attempts))]
    Timeout {
        /// Which wait, and how long it was.
        timeout: Timeout,
        /// Attempts made.
        attempts: u32,
    },
    /// The request failed without a response (the connection closed before it), after
    /// retries.
    #[error("no response{}", tries(*attempts))]
    Request {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        source: HttpError,
    },
    /// The provider answered with an error status, after retries.
    #[error("the provider answered with an error{}", tries(*attempts))]
    Provider {
        /// Attempts made.
        attempts: u32,
        /// The status and the provider's message.
        #[source]
        source: ProviderError,
    },
    /// The response stream broke after it began.
    #[error("the connection broke")]
    Stream(#[source] HttpError),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The endpoint's [`TokenSource`](super::TokenSource) failed.
    #[error(transparent)]
    Token(TokenError),
}
