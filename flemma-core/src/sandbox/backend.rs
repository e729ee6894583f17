//! The backend trait and the pass-through backend.

use std::fmt;

use flemma_config::SandboxOptions;

use super::policy::SandboxPolicy;

/// Why a command could not be wrapped; tools report it as `Sandbox error: <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SandboxError {
    message: String,
}

impl SandboxError {
    /// An error with the text tools show after `Sandbox error: `.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A way to run commands confined to a [`SandboxPolicy`].
pub trait SandboxBackend: Send + Sync + fmt::Debug {
    /// The backend's name (`bwrap`).
    fn name(&self) -> &str;

    /// One line about the backend, for listings.
    #[expect(
        clippy::unnecessary_literal_bound,
        reason = "implementations may describe themselves with text they own"
    )]
    fn description(&self) -> &str {
        ""
    }

    /// Whether the backend can run commands here.
    ///
    /// # Errors
    ///
    /// Why not (`bubblewrap (bwrap) not found at …`).
    fn available(&self, options: &SandboxOptions) -> Result<(), SandboxError>;

    /// The command line that runs `argv` inside the sandbox.
    ///
    /// # Errors
    ///
    /// When the backend cannot build one.
    fn wrap(
        &self,
        policy: &SandboxPolicy,
        options: &SandboxOptions,
        argv: Vec<String>,
    ) -> Result<Vec<String>, SandboxError>;
}

/// Runs commands as given: the backend of a conversation without a sandbox.
#[derive(Debug, Clone, Copy, Default)]
pub struct PassThrough;

impl SandboxBackend for PassThrough {
    fn name(&self) -> &'static str {
        "none"
    }

    fn available(&self, _options: &SandboxOptions) -> Result<(), SandboxError> {
        Ok(())
    }

    fn wrap(
        &self,
        _policy: &SandboxPolicy,
        _options: &SandboxOptions,
        argv: Vec<String>,
    ) -> Result<Vec<String>, SandboxError> {
        Ok(argv)
    }
}
