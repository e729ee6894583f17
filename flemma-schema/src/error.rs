//! The crate's error type.

use std::fmt;

/// A location inside a JSON document, as a JSON Pointer (RFC 6901): `/properties/env`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct JsonPath(String);

impl JsonPath {
    /// The document root (`""`).
    pub fn root() -> Self {
        Self::default()
    }

    /// This path extended by one key or index.
    #[must_use]
    pub fn join(&self, segment: impl fmt::Display) -> Self {
        let segment = segment.to_string().replace('~', "~0").replace('/', "~1");
        Self(format!("{}/{segment}", self.0))
    }

    /// The pointer text (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("/")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// A path being walked, kept on the stack: nothing is allocated until an error needs a
/// [`JsonPath`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trail<'a> {
    parent: Option<&'a Trail<'a>>,
    segment: Segment<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Segment<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> Trail<'a> {
    pub(crate) fn root() -> Self {
        Self {
            parent: None,
            segment: Segment::Root,
        }
    }

    pub(crate) fn key(&'a self, key: &'a str) -> Trail<'a> {
        Trail {
            parent: Some(self),
            segment: Segment::Key(key),
        }
    }

    pub(crate) fn index(&'a self, index: usize) -> Trail<'a> {
        Trail {
            parent: Some(self),
            segment: Segment::Index(index),
        }
    }

    pub(crate) fn to_path(self) -> JsonPath {
        let mut segments = Vec::new();
        let mut at = Some(&self);
        while let Some(trail) = at {
            segments.push(trail.segment);
            at = trail.parent;
        }
        segments
            .iter()
            .rev()
            .fold(JsonPath::root(), |path, segment| match segment {
                Segment::Root => path,
                Segment::Key(k) => path.join(k),
                Segment::Index(i) => path.join(i),
            })
    }
}

/// Why a schema cannot be built, emitted or compiled. Every variant names where it happened.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A field wrapped in `optional` inside a schema emitted for a strict tool: strict mode needs
    /// every property required (use `nullable` instead).
    #[error(
        "{path}: optional field in a strict schema; strict tools express optional parameters as nullable"
    )]
    OptionalInStrict {
        /// Where the field is.
        path: JsonPath,
    },
    /// An object that accepts arbitrary keys (a map, a passthrough object, `additionalProperties`
    /// other than `false`) in a strict schema.
    #[error("{path}: strict mode cannot express an object with arbitrary keys")]
    OpenObjectInStrict {
        /// Where the object is.
        path: JsonPath,
    },
    /// A JSON Schema keyword strict mode cannot express.
    #[error("{path}: strict mode does not support `{keyword}`")]
    Unsupported {
        /// Where the keyword is.
        path: JsonPath,
        /// The keyword.
        keyword: String,
    },
    /// A raw schema that is not a valid JSON Schema where it matters.
    #[error("{path}: invalid schema: {reason}")]
    Invalid {
        /// Where the problem is.
        path: JsonPath,
        /// What is wrong.
        reason: String,
    },
    /// A `$ref` that points nowhere this crate can follow.
    #[error("{path}: cannot resolve `$ref` {reference:?}")]
    UnresolvedRef {
        /// Where the reference is.
        path: JsonPath,
        /// The reference.
        reference: String,
    },
    /// A recursive `$ref` in a dialect that needs references inlined.
    #[error("{path}: recursive `$ref` {reference:?} cannot be inlined")]
    RecursiveRef {
        /// Where the reference is.
        path: JsonPath,
        /// The reference.
        reference: String,
    },
    /// A default value the node itself would reject.
    #[error("{path}: default {default} does not match the schema")]
    InvalidDefault {
        /// Where the node is.
        path: JsonPath,
        /// The default, as JSON.
        default: String,
    },
    /// A tool name that breaks the tool-name rule.
    #[error("invalid tool name")]
    InvalidToolName(#[from] flemma_ids::InvalidId),
    /// schemars could not describe a type as a JSON object schema.
    #[error("the input type's schema is not an object schema: {reason}")]
    NotAnObject {
        /// What schemars produced.
        reason: String,
    },
}
