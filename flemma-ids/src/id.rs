//! Tool-use ids and job ids, and the string newtype both they and [`ToolName`] are built on.
//!
//! [`ToolName`]: crate::ToolName

use crate::error::InvalidId;

/// Implements the traits every identifier shares on a `struct $name(Arc<str>)` with a
/// `new(impl Into<String>) -> Result<Self, InvalidId>` constructor.
macro_rules! string_id {
    ($name:ident) => {
        impl $name {
            /// The identifier as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::InvalidId;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::InvalidId;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                Self::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $crate::InvalidId;

            fn try_from(s: &str) -> Result<Self, Self::Error> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == &*other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == &*other.0
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                let text = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(
                    deserializer,
                )?;
                Self::new(text.into_owned()).map_err(::serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use string_id;

/// The id of a tool call, as in ``**Tool Use:** `bash` (`toolu_01`)``.
///
/// Any non-empty single-line text without a backtick or `)` is accepted: providers use very
/// different shapes (`toolu_…`, `call_…`, `urn:flemma:tool:…`).
///
/// ```
/// use flemma_ids::ToolUseId;
/// let id: ToolUseId = "toolu_01".parse()?;
/// assert_eq!(id.as_str(), "toolu_01");
/// assert!("".parse::<ToolUseId>().is_err());
/// assert!("a)b".parse::<ToolUseId>().is_err());
/// # Ok::<(), flemma_ids::InvalidId>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolUseId(std::sync::Arc<str>);

string_id!(ToolUseId);

impl ToolUseId {
    /// Validates and wraps an id.
    ///
    /// # Errors
    ///
    /// [`InvalidId`] when the value is empty, spans several lines or holds a backtick or `)`.
    pub fn new(value: impl Into<String>) -> Result<Self, InvalidId> {
        let value = value.into();
        check_single_line(&value, "tool use id", &['`', ')'])?;
        Ok(Self(value.into()))
    }

    /// An id as a transcript header holds it: any non-empty single-line text. The header's
    /// grammar decides where an id ends (a `**Tool Use:**` id may hold a backtick, a
    /// `**Tool Result:**` id a `)`), so a parser keeps what it read; such ids can be read but
    /// not answered, and [`ToolUseId::new`] refuses them.
    ///
    /// # Errors
    ///
    /// [`InvalidId`] when the value is empty or spans several lines.
    pub fn from_header(value: &str) -> Result<Self, InvalidId> {
        check_single_line(value, "tool use id", &[])?;
        Ok(Self(value.into()))
    }

    /// Builds an id from any text: characters an id cannot carry become `_`, and empty text
    /// becomes `unknown`. For ids from outside (a provider's response) that must be written
    /// regardless.
    ///
    /// ```
    /// assert_eq!(flemma_ids::ToolUseId::sanitized("call`1)"), "call_1_");
    /// ```
    pub fn sanitized(value: &str) -> Self {
        Self(sanitize(value, &['`', ')']).into())
    }
}

/// The id of a background job, as in ``**Job Result:** `job_k7x2m9qa` ``.
///
/// Ordinary ids are `job_` followed by eight characters of `[a-z0-9]`, but a transcript may
/// hold any non-empty single-line text without a backtick.
///
/// ```
/// let id = flemma_ids::JobId::new("job_k7x2m9qa")?;
/// assert_eq!(id, "job_k7x2m9qa");
/// # Ok::<(), flemma_ids::InvalidId>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(std::sync::Arc<str>);

string_id!(JobId);

impl JobId {
    /// Validates and wraps an id.
    ///
    /// # Errors
    ///
    /// [`InvalidId`] when the value is empty, spans several lines or holds a backtick.
    pub fn new(value: impl Into<String>) -> Result<Self, InvalidId> {
        let value = value.into();
        check_single_line(&value, "job id", &['`'])?;
        Ok(Self(value.into()))
    }

    /// Builds an id from any text: characters an id cannot carry become `_`, and empty text
    /// becomes `unknown`.
    pub fn sanitized(value: &str) -> Self {
        Self(sanitize(value, &['`']).into())
    }

    /// An id as a `**Job Result:**` header holds it (any non-empty single-line text); see
    /// [`ToolUseId::from_header`].
    ///
    /// # Errors
    ///
    /// [`InvalidId`] when the value is empty or spans several lines.
    pub fn from_header(value: &str) -> Result<Self, InvalidId> {
        check_single_line(value, "job id", &[])?;
        Ok(Self(value.into()))
    }
}

/// Non-empty, one line, none of `forbidden`.
pub(crate) fn check_single_line(
    value: &str,
    what: &'static str,
    forbidden: &[char],
) -> Result<(), InvalidId> {
    if value.is_empty() {
        return Err(InvalidId::Empty { what });
    }
    match value
        .chars()
        .find(|c| matches!(c, '\n' | '\r') || forbidden.contains(c))
    {
        Some(ch) => Err(InvalidId::ForbiddenChar {
            what,
            value: value.to_owned(),
            ch,
        }),
        None => Ok(()),
    }
}

fn sanitize(value: &str, forbidden: &[char]) -> String {
    let cleaned: String = value
        .chars()
        .map(|c| {
            if matches!(c, '\n' | '\r') || forbidden.contains(&c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    if cleaned.is_empty() {
        "unknown".to_owned()
    } else {
        cleaned
    }
}
