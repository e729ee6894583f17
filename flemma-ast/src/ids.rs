//! Newtypes for the identifiers a transcript carries.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::error::InvalidId;

macro_rules! transcript_id {
    ($(#[$doc:meta])* $name:ident, $what:literal, $extra_forbidden:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps an identifier.
            ///
            /// # Errors
            ///
            /// Returns [`InvalidId`] when the value is empty, spans several lines or contains a
            /// character the transcript syntax cannot carry in this position.
            pub fn new(value: impl Into<String>) -> Result<Self, InvalidId> {
                let value = value.into();
                validate(&value, $what, $extra_forbidden)?;
                Ok(Self(value))
            }

            /// Builds a value from any text: characters the transcript syntax cannot carry here
            /// become `_`, and empty text becomes `unknown`.
            ///
            /// For text from outside (a provider's response) that must be written regardless.
            pub fn sanitized(value: &str) -> Self {
                let extra: &[char] = $extra_forbidden;
                let cleaned: String = value
                    .chars()
                    .map(|c| if matches!(c, '`' | '\n' | '\r') || extra.contains(&c) { '_' } else { c })
                    .collect();
                Self(if cleaned.is_empty() { "unknown".to_owned() } else { cleaned })
            }

            /// Wraps a value the grammar has already restricted.
            pub(crate) fn from_grammar(value: &str) -> Self {
                Self(value.to_owned())
            }

            /// The identifier as written in the transcript.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = InvalidId;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }
    };
}

transcript_id!(
    /// The id of a tool call, as in ``**Tool Use:** `bash` (`toolu_01`)``.
    ///
    /// Any non-empty single-line text without a backtick or `)` is accepted: providers use
    /// very different shapes (`toolu_…`, `call_…`, `urn:flemma:tool:…`). (A transcript's
    /// `**Tool Use:**` header may hold a backtick in its id; the parser keeps such ids as
    /// written, but no `**Tool Result:**` header can answer them, so new ones are refused.)
    ///
    /// ```
    /// use flemma_ast::ToolUseId;
    /// let id: ToolUseId = "toolu_01".parse()?;
    /// assert_eq!(id.as_str(), "toolu_01");
    /// assert!("".parse::<ToolUseId>().is_err());
    /// # Ok::<(), flemma_ast::InvalidId>(())
    /// ```
    ToolUseId,
    "tool use id",
    &[')']
);

transcript_id!(
    /// The id of a background job, as in ``**Job Result:** `job_k7x2m9qa` ``.
    ///
    /// Ordinary ids are `job_` followed by eight characters of `[a-z0-9]`, but the transcript
    /// syntax accepts any non-empty single-line text without a backtick.
    JobId,
    "job id",
    &[]
);

transcript_id!(
    /// A tool name as written in a `**Tool Use:**` header (`bash`, `flemma.jobs.status`).
    ///
    /// This is the name a transcript records, so older spellings such as `slack:channels_list`
    /// are kept; registries apply their own, stricter rules when a tool is registered.
    ToolName,
    "tool name",
    &[]
);

fn validate(value: &str, what: &'static str, extra: &[char]) -> Result<(), InvalidId> {
    if value.is_empty() {
        return Err(InvalidId::Empty { what });
    }
    if let Some(ch) = value
        .chars()
        .find(|c| matches!(c, '`' | '\n' | '\r') || extra.contains(c))
    {
        return Err(InvalidId::ForbiddenChar {
            what,
            value: value.to_owned(),
            ch,
        });
    }
    Ok(())
}
