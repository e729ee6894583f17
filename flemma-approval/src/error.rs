//! The crate's error type.

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
