//! The crate's errors.

/// A rule's pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The pattern has no word.
    #[error("a command pattern needs at least one word")]
    Empty,
    /// The pattern's command word is a lone `*`, which would match every command.
    #[error("the command pattern {pattern:?} starts with `*`; write the command's name first")]
    StartsWithStar {
        /// The pattern as written.
        pattern: String,
    },
}
