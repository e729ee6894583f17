//! The crate's error type.

/// Why a value is not a valid identifier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidId {
    /// The value is empty.
    #[error("a {what} cannot be empty")]
    Empty {
        /// Which kind of identifier (`tool name`, `tool use id`, `job id`).
        what: &'static str,
    },
    /// The value holds a character this kind of identifier cannot carry.
    #[error("a {what} cannot contain {ch:?} (in {value:?})")]
    ForbiddenChar {
        /// Which kind of identifier.
        what: &'static str,
        /// The rejected value.
        value: String,
        /// The offending character.
        ch: char,
    },
    /// A tool name with an empty segment (`a..b`, `.a`, `a.`).
    #[error("tool name {name:?} has an empty segment between separators")]
    EmptySegment {
        /// The rejected name.
        name: String,
    },
    /// A tool name holding `__`, which the wire encoding reserves for `.`.
    #[error("tool name {name:?} contains `__`, which does not survive the wire encoding")]
    DoubleUnderscore {
        /// The rejected name.
        name: String,
    },
}
