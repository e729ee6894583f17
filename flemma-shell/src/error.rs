//! The crate's errors.

/// A rule's pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The pattern has no word.
    #[error("a command pattern needs at least one word")]
    Empty,
}
