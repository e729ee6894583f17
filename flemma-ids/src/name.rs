//! [`ToolName`] and the one rule for tool names.

use std::borrow::Cow;
use std::sync::Arc;

use crate::error::InvalidId;
use crate::id::string_id;
use crate::wire::{decode_tool_name, encode_tool_name};

const WHAT: &str = "tool name";

/// A tool name: one or more segments of `[A-Za-z0-9_-]` joined by `.`, without `__`
/// (`bash`, `flemma.jobs.status`).
///
/// [`ToolName::new`] accepts exactly that. [`ToolName::read`] also accepts the legacy `:`
/// separator of older transcripts (`slack:channels_list`); such a name reports
/// [`is_legacy`](ToolName::is_legacy) and [`migrated`](ToolName::migrated) gives its `.`
/// spelling. Registries take only the `.` form.
///
/// ```
/// use flemma_ids::{InvalidId, ToolName};
///
/// assert!(ToolName::new("mcp.fs.read_file").is_ok());
/// assert!(matches!(ToolName::new("a..b"), Err(InvalidId::EmptySegment { .. })));
/// assert!(matches!(ToolName::new("a__b"), Err(InvalidId::DoubleUnderscore { .. })));
/// assert!(matches!(ToolName::new("my tool"), Err(InvalidId::ForbiddenChar { ch: ' ', .. })));
/// assert!(ToolName::new("slack:list").is_err());
/// assert!(ToolName::read("slack:list")?.is_legacy());
/// # Ok::<(), InvalidId>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolName(Arc<str>);

string_id!(ToolName);

impl ToolName {
    /// Validates and wraps a name in the `.` form.
    ///
    /// # Errors
    ///
    /// [`InvalidId`]: empty, an empty segment, a character outside `[A-Za-z0-9_-.]`, or `__`.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidId> {
        let name = name.into();
        check(&name, &['.'])?;
        Ok(Self(name.into()))
    }

    /// Like [`ToolName::new`], but `:` is read as a separator too, as older transcripts wrote
    /// it. The name is kept as written; see [`ToolName::is_legacy`].
    ///
    /// # Errors
    ///
    /// As [`ToolName::new`].
    pub fn read(name: impl Into<String>) -> Result<Self, InvalidId> {
        let name = name.into();
        check(&name, &['.', ':'])?;
        Ok(Self(name.into()))
    }

    /// A name from a provider's wire form (`flemma__jobs__status` → `flemma.jobs.status`).
    ///
    /// # Errors
    ///
    /// As [`ToolName::new`], for the decoded name.
    pub fn from_wire(wire: &str) -> Result<Self, InvalidId> {
        Self::new(decode_tool_name(wire).into_owned())
    }

    /// Builds a valid name from any text, for names from outside (a provider's response)
    /// that must be written regardless: the wire form is decoded, characters outside the
    /// rule become `_`, runs of `_` that would read as `__` shrink to one, empty segments are
    /// dropped, and nothing left becomes `unknown`.
    ///
    /// ```
    /// use flemma_ids::ToolName;
    /// assert_eq!(ToolName::sanitized("flemma__jobs__status"), "flemma.jobs.status");
    /// assert_eq!(ToolName::sanitized("my tool!"), "my_tool_");
    /// assert_eq!(ToolName::sanitized(".."), "unknown");
    /// ```
    pub fn sanitized(text: &str) -> Self {
        let decoded = decode_tool_name(text);
        let mut segments: Vec<String> = Vec::new();
        for segment in decoded.split('.') {
            let mut clean = String::with_capacity(segment.len());
            for c in segment.chars() {
                let c = if is_name_char(c) { c } else { '_' };
                if !(c == '_' && clean.ends_with('_')) {
                    clean.push(c);
                }
            }
            if !clean.is_empty() {
                segments.push(clean);
            }
        }
        if segments.is_empty() {
            return Self("unknown".into());
        }
        Self(segments.join(".").into())
    }

    /// Whether the name uses the legacy `:` separator.
    pub fn is_legacy(&self) -> bool {
        self.0.contains(':')
    }

    /// The name in the `.` form: `slack:channels_list` → `slack.channels_list`. A name that
    /// is not [legacy](ToolName::is_legacy) comes back as is.
    #[must_use]
    pub fn migrated(&self) -> ToolName {
        if self.is_legacy() {
            Self(self.0.replace(':', ".").into())
        } else {
            self.clone()
        }
    }

    /// The name as providers accept it: each separator becomes `__`.
    pub fn to_wire(&self) -> Cow<'_, str> {
        encode_tool_name(&self.0)
    }

    /// The segments between separators (`flemma.jobs.status` → `flemma`, `jobs`, `status`).
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split(['.', ':'])
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-')
}

fn check(name: &str, separators: &[char]) -> Result<(), InvalidId> {
    if name.is_empty() {
        return Err(InvalidId::Empty { what: WHAT });
    }
    if let Some(ch) = name
        .chars()
        .find(|&c| !is_name_char(c) && !separators.contains(&c))
    {
        return Err(InvalidId::ForbiddenChar {
            what: WHAT,
            value: name.to_owned(),
            ch,
        });
    }
    if name.split(separators).any(str::is_empty) {
        return Err(InvalidId::EmptySegment {
            name: name.to_owned(),
        });
    }
    if name.contains("__") {
        return Err(InvalidId::DoubleUnderscore {
            name: name.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Every valid name survives the wire both ways.
        #[test]
        fn valid_names_round_trip_the_wire(name in "[A-Za-z0-9-]([A-Za-z0-9-]|_[A-Za-z0-9-]){0,6}(\\.[A-Za-z0-9-]([A-Za-z0-9-]|_[A-Za-z0-9-]){0,6}){0,3}") {
            let name = ToolName::new(name).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let wire = name.to_wire();
            prop_assert!(wire.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
            prop_assert_eq!(ToolName::from_wire(&wire), Ok(name));
        }

        /// Sanitizing any text gives a valid name, and leaves a valid name alone.
        #[test]
        fn sanitized_is_always_valid(text in "\\PC{0,24}") {
            let name = ToolName::sanitized(&text);
            prop_assert_eq!(ToolName::new(name.as_str()), Ok(name.clone()));
            prop_assert_eq!(ToolName::sanitized(name.as_str()), name);
        }
    }

    #[test]
    fn legacy_names_are_read_and_migrated() {
        let name = ToolName::read("urn:flemma:x").unwrap_or_else(|e| panic!("{e}"));
        assert!(name.is_legacy());
        assert_eq!(name.migrated(), "urn.flemma.x");
        assert_eq!(name.to_wire(), "urn__flemma__x");
        assert_eq!(name.segments().collect::<Vec<_>>(), ["urn", "flemma", "x"]);
        assert!(matches!(
            ToolName::read("a::b"),
            Err(InvalidId::EmptySegment { .. })
        ));
        assert!(!ToolName::read("a.b").is_ok_and(|n| n.is_legacy()));
    }

    #[test]
    fn ids_deserialize_through_their_rule() {
        let name: Result<ToolName, _> = serde_json::from_str("\"a__b\"");
        assert!(name.is_err());
        let name: ToolName = serde_json::from_str("\"a.b\"").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            serde_json::to_string(&name).ok().as_deref(),
            Some("\"a.b\"")
        );
    }
}
