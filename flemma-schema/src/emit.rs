//! DSL → JSON Schema.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::dsl::{Kind, Object, Schema};
use crate::error::{SchemaError, Trail};
use crate::validate::Validator;

/// Which rules a schema is emitted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// For a tool sent with OpenAI strict mode: every property required, no open objects.
    /// Optional fields, maps and passthrough objects are errors.
    Strict,
    /// For any other tool: optional fields are left out of `required`, maps and passthrough
    /// objects are allowed.
    Lenient,
}

impl Schema {
    /// Emits the node as JSON Schema, keys sorted at every level so that the output is
    /// deterministic byte for byte.
    ///
    /// # Errors
    ///
    /// In [`Mode::Strict`]: [`SchemaError::OptionalInStrict`] for an optional field and
    /// [`SchemaError::OpenObjectInStrict`] for a map or passthrough object. In any mode:
    /// [`SchemaError::InvalidDefault`] for a default the node rejects.
    pub fn to_json_schema(&self, mode: Mode) -> Result<Value, SchemaError> {
        emit(self, mode, &Trail::root()).map(into_value)
    }
}

/// A node's keywords; a `BTreeMap` keeps them sorted by construction, so the output needs no
/// sorting pass.
type Keywords = BTreeMap<&'static str, Value>;

fn into_value(keywords: Keywords) -> Value {
    let mut map = Map::with_capacity(keywords.len());
    for (k, v) in keywords {
        map.insert(k.to_owned(), v);
    }
    Value::Object(map)
}

fn typed(name: &str) -> Keywords {
    Keywords::from([("type", Value::String(name.to_owned()))])
}

/// A value supplied by the user (a literal, a default), with its object keys sorted.
fn sorted(value: &Value) -> Value {
    let mut value = value.clone();
    value.sort_all_objects();
    value
}

fn emit(node: &Schema, mode: Mode, path: &Trail<'_>) -> Result<Keywords, SchemaError> {
    let mut out = match &node.kind {
        Kind::String => typed("string"),
        Kind::Number => typed("number"),
        Kind::Integer => typed("integer"),
        Kind::Boolean => typed("boolean"),
        Kind::Enum(values) => {
            let mut out = typed("string");
            out.insert(
                "enum",
                values.iter().map(|v| Value::String(v.clone())).collect(),
            );
            out
        }
        Kind::List(item) => {
            let mut out = typed("array");
            out.insert("items", into_value(emit(item, mode, &path.key("items"))?));
            out
        }
        Kind::Map(value) => {
            if mode == Mode::Strict {
                return Err(SchemaError::OpenObjectInStrict {
                    path: path.to_path(),
                });
            }
            let mut out = typed("object");
            out.insert(
                "additionalProperties",
                into_value(emit(value, mode, &path.key("additionalProperties"))?),
            );
            out
        }
        Kind::Object(object) => emit_object(object, mode, path)?,
        Kind::Optional(inner) => emit(inner, mode, path)?,
        Kind::Nullable(inner) => nullable_keywords(emit(inner, mode, path)?),
        Kind::Union(branches) => {
            let any_of = path.key("anyOf");
            let emitted = branches
                .iter()
                .enumerate()
                .map(|(i, b)| emit(b, mode, &any_of.index(i)).map(into_value))
                .collect::<Result<Vec<_>, _>>()?;
            let mut out = Keywords::from([("anyOf", Value::Array(emitted))]);
            if node.default.is_none()
                && let Some(default) = branches.iter().find_map(|b| b.default.as_ref())
            {
                out.insert("default", sorted(default));
            }
            out
        }
        Kind::Literal(value) => {
            if value.is_null() {
                typed("null")
            } else {
                let mut out = typed(json_type(value));
                out.insert("const", sorted(value));
                out
            }
        }
    };
    if let Some(description) = &node.description {
        out.insert("description", Value::String(description.clone()));
    }
    if let Some(default) = &node.default {
        check_default(&out, default, path)?;
        out.insert("default", sorted(default));
    }
    Ok(out)
}

/// The keywords of an object: its properties, the required ones, and `additionalProperties:
/// false` when it is strict.
fn emit_object(object: &Object, mode: Mode, path: &Trail<'_>) -> Result<Keywords, SchemaError> {
    if mode == Mode::Strict && !object.strict {
        return Err(SchemaError::OpenObjectInStrict {
            path: path.to_path(),
        });
    }
    let mut properties = Map::with_capacity(object.fields.len());
    let mut required = Vec::with_capacity(object.fields.len());
    let props_path = path.key("properties");
    for (name, field) in &object.fields {
        let field_path = props_path.key(name);
        let emitted = if let Kind::Optional(inner) = &field.kind {
            if mode == Mode::Strict {
                return Err(SchemaError::OptionalInStrict {
                    path: field_path.to_path(),
                });
            }
            // The optional wrapper's description is lost (spec §3.3).
            emit(inner, mode, &field_path)?
        } else {
            required.push(Value::String(name.clone()));
            emit(field, mode, &field_path)?
        };
        properties.insert(name.clone(), into_value(emitted));
    }
    let mut out = typed("object");
    out.insert("properties", Value::Object(properties));
    if !required.is_empty() {
        out.insert("required", Value::Array(required));
    }
    if object.strict {
        out.insert("additionalProperties", false.into());
    }
    Ok(out)
}

/// [`nullable_json`] over keywords.
fn nullable_keywords(mut inner: Keywords) -> Keywords {
    match inner.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            inner.insert("type", json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push("null".into());
            }
        }
        _ => return Keywords::from([("anyOf", json!([into_value(inner), {"type": "null"}]))]),
    }
    if let Some(Value::Array(values)) = inner.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
    inner
}

/// Makes an emitted schema accept `null`.
pub(crate) fn nullable_json(mut inner: Value) -> Value {
    match inner.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            inner["type"] = json!([t, "null"]);
            add_null_to_enum(&mut inner);
            inner
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push("null".into());
            }
            add_null_to_enum(&mut inner);
            inner
        }
        _ => json!({"anyOf": [inner, {"type": "null"}]}),
    }
}

/// An `enum` must list `null` too for the schema to accept it.
fn add_null_to_enum(schema: &mut Value) {
    if let Some(Value::Array(values)) = schema.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
}

fn check_default(schema: &Keywords, default: &Value, path: &Trail<'_>) -> Result<(), SchemaError> {
    let valid =
        Validator::new(&into_value(schema.clone())).is_ok_and(|v| v.validate(default).is_ok());
    if valid {
        Ok(())
    } else {
        Err(SchemaError::InvalidDefault {
            path: path.to_path(),
            default: default.to_string(),
        })
    }
}

/// The JSON Schema type name of a value.
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
