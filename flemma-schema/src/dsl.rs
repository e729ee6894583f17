//! The schema DSL: build a tool's input schema from small constructors.
//!
//! ```
//! use flemma_schema::dsl::{number, object, string};
//!
//! let input = object([
//!     ("command", string().describe("The bash command to execute")),
//!     ("timeout", number().nullable().describe("Timeout in seconds (default: 30)")),
//! ]);
//! let json = input.to_json_schema(flemma_schema::Mode::Strict)?;
//! assert_eq!(json["required"], serde_json::json!(["command", "timeout"]));
//! assert_eq!(json["properties"]["timeout"]["type"], serde_json::json!(["number", "null"]));
//! # Ok::<(), flemma_schema::SchemaError>(())
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

/// A node of the schema DSL.
///
/// Built with the constructor functions of this module and refined with the chain methods;
/// [`Schema::to_json_schema`] turns it into JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub(crate) kind: Kind,
    pub(crate) description: Option<String>,
    pub(crate) default: Option<Value>,
}

/// What a [`Schema`] node is.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Kind {
    /// Any string.
    String,
    /// Any number.
    Number,
    /// A number without a fraction.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// One of the given strings.
    Enum(Vec<String>),
    /// An array of items.
    List(Box<Schema>),
    /// An object with arbitrary keys whose values all match the schema.
    Map(Box<Schema>),
    /// An object with known fields.
    Object(Object),
    /// May be absent (only meaningful as an object field).
    Optional(Box<Schema>),
    /// Present, but may be `null`.
    Nullable(Box<Schema>),
    /// The first branch that matches.
    Union(Vec<Schema>),
    /// Exactly this value.
    Literal(Value),
}

/// The fields of an object node and whether it rejects unknown keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub(crate) fields: BTreeMap<String, Schema>,
    pub(crate) strict: bool,
}

impl Schema {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            description: None,
            default: None,
        }
    }

    /// What the node is.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// The description, if set.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Sets the description sent to the model.
    #[must_use]
    pub fn describe(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Sets the default value (emitted as `"default"`).
    #[must_use]
    pub fn with_default(mut self, value: impl Into<Value>) -> Self {
        self.default = Some(value.into());
        self
    }

    /// Wraps the node so that an object may omit it (non-strict tools only).
    #[must_use]
    pub fn optional(self) -> Self {
        optional(self)
    }

    /// Wraps the node so that it may be `null`; strict tools express optional parameters so.
    #[must_use]
    pub fn nullable(self) -> Self {
        nullable(self)
    }

    /// For an object: accept unknown keys. Other nodes are returned unchanged.
    #[must_use]
    pub fn passthrough(mut self) -> Self {
        if let Kind::Object(object) = &mut self.kind {
            object.strict = false;
        }
        self
    }

    /// For an object: reject unknown keys (the default). Other nodes are returned unchanged.
    #[must_use]
    pub fn strict(mut self) -> Self {
        if let Kind::Object(object) = &mut self.kind {
            object.strict = true;
        }
        self
    }

    /// For an object: a copy with more fields (later fields replace earlier ones of the same
    /// name). Other nodes are returned unchanged.
    #[must_use]
    pub fn extend<K: Into<String>>(
        mut self,
        fields: impl IntoIterator<Item = (K, Schema)>,
    ) -> Self {
        if let Kind::Object(object) = &mut self.kind {
            object
                .fields
                .extend(fields.into_iter().map(|(k, v)| (k.into(), v)));
        }
        self
    }
}

/// Any string.
pub fn string() -> Schema {
    Schema::new(Kind::String)
}

/// Any number.
pub fn number() -> Schema {
    Schema::new(Kind::Number)
}

/// A number without a fraction.
pub fn integer() -> Schema {
    Schema::new(Kind::Integer)
}

/// `true` or `false`.
pub fn boolean() -> Schema {
    Schema::new(Kind::Boolean)
}

/// One of `values` (strings).
pub fn enumeration<S: Into<String>>(values: impl IntoIterator<Item = S>) -> Schema {
    Schema::new(Kind::Enum(values.into_iter().map(Into::into).collect()))
}

/// An array of `item`.
pub fn list(item: Schema) -> Schema {
    Schema::new(Kind::List(Box::new(item)))
}

/// An object with arbitrary string keys whose values match `value`.
pub fn map(value: Schema) -> Schema {
    Schema::new(Kind::Map(Box::new(value)))
}

/// An object with the given fields; strict (unknown keys rejected) unless
/// [`passthrough`](Schema::passthrough) is called.
pub fn object<K: Into<String>>(fields: impl IntoIterator<Item = (K, Schema)>) -> Schema {
    Schema::new(Kind::Object(Object {
        fields: fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        strict: true,
    }))
}

/// `inner`, which an object may omit.
pub fn optional(inner: Schema) -> Schema {
    Schema::new(Kind::Optional(Box::new(inner)))
}

/// `inner`, or `null`.
pub fn nullable(inner: Schema) -> Schema {
    Schema::new(Kind::Nullable(Box::new(inner)))
}

/// The first of `branches` that matches.
pub fn union(branches: impl IntoIterator<Item = Schema>) -> Schema {
    Schema::new(Kind::Union(branches.into_iter().collect()))
}

/// Exactly `value`.
pub fn literal(value: impl Into<Value>) -> Schema {
    Schema::new(Kind::Literal(value.into()))
}
