//! Typed tool inputs: derive the schema from a Rust type with schemars, compile it to strict
//! form, and decode the model's input back into the type.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::SchemaError;
use crate::spec::Dialect;
use crate::strict::{StrictSchema, compile_strict};

/// The strict schema of `T`, derived by schemars and compiled by [`compile_strict`].
///
/// `Option` fields become nullable and required; on the way back [`decode_input`] turns their
/// `null` into `None`. The type's own doc comment, if any, becomes the root `description`.
///
/// # Errors
///
/// What [`compile_strict`] rejects, such as maps (`HashMap<String, _>` fields) or a type whose
/// schema is not an object.
///
/// ```
/// use flemma_schema::{Dialect, check_strict, decode_input, strict_schema_for};
/// use schemars::JsonSchema;
/// use serde::Deserialize;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Search {
///     /// Regular expression to look for
///     pattern: String,
///     /// Maximum number of matches
///     limit: Option<u32>,
/// }
///
/// let schema = strict_schema_for::<Search>(Dialect::OpenAiResponses)?;
/// assert!(check_strict(schema.schema()).is_empty());
/// assert_eq!(schema.schema()["required"], serde_json::json!(["limit", "pattern"]));
/// assert_eq!(schema.schema()["properties"]["limit"]["type"], serde_json::json!(["integer", "null"]));
///
/// let input: Search = decode_input(&schema, serde_json::json!({"pattern": "fn", "limit": null}))?;
/// assert_eq!((input.pattern.as_str(), input.limit), ("fn", None));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn strict_schema_for<T: JsonSchema>(dialect: Dialect) -> Result<StrictSchema, SchemaError> {
    let schema = schemars::schema_for!(T);
    if schema.as_value().get("type") != Some(&Value::String("object".into())) {
        return Err(SchemaError::NotAnObject {
            reason: schema.as_value().to_string(),
        });
    }
    compile_strict(schema.as_value(), dialect)
}

/// Why a tool's input could not be decoded into its type; the deserializer's error is the
/// [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[error("cannot decode the tool input")]
pub struct DecodeError {
    #[source]
    source: serde_json::Error,
}

/// Decodes the model's input into `T`, mapping `null` for fields that were optional before
/// strict compilation back to absent first.
///
/// # Errors
///
/// [`DecodeError`] when the input does not deserialize into `T`.
pub fn decode_input<T: DeserializeOwned>(
    schema: &StrictSchema,
    input: Value,
) -> Result<T, DecodeError> {
    serde_json::from_value(schema.decode(input)).map_err(|source| DecodeError { source })
}
