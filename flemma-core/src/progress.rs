//! [`ToolProgress`]: how far a running call got.

/// How far a running call got, as its tool reports it with
/// [`ExecutionContext::report_progress`](crate::ExecutionContext::report_progress); the
/// runtime's executor forwards it as an event (`flemma_runtime::Event::ToolProgress`).
///
/// ```
/// use flemma_core::ToolProgress;
///
/// let step = ToolProgress::new(2.0).with_total(5.0).with_message("2 of 5 steps");
/// assert_eq!(step.total, Some(5.0));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolProgress {
    /// The progress so far (increasing; its unit is the tool's).
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A short text for the user.
    pub message: Option<String>,
}

impl ToolProgress {
    /// Progress `progress`, with no total and no message.
    pub fn new(progress: f64) -> Self {
        Self {
            progress,
            total: None,
            message: None,
        }
    }

    /// With the total.
    #[must_use]
    pub fn with_total(mut self, total: f64) -> Self {
        self.total = Some(total);
        self
    }

    /// With a message.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}
