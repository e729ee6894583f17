//! The error a hook answers with when it has no answer.

/// Why a hook had no answer. The runner shows it as a warning and goes on without the hook.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl HookError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// An error with a message and its cause.
    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The message and its causes, `: `-joined.
    pub fn report(&self) -> String {
        flemma_ids::error_chain(self)
    }
}
