//! Small helpers over `serde_json` values.

use serde_json::{Map, Value};

use crate::error::{JsonPath, SchemaError};

/// Sorts the keys of every object, recursively, so that serialization is deterministic.
pub(crate) fn sort_keys(value: &mut Value) {
    value.sort_all_objects();
}

/// Describes a value for a message: `string "30"`, `number 5`, `null`, `object`.
pub(crate) fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => {
            let shown: String = s.chars().take(40).collect();
            if shown.len() < s.len() {
                format!("string {shown:?}…")
            } else {
                format!("string {s:?}")
            }
        }
        Value::Array(_) => "array".to_owned(),
        Value::Object(_) => "object".to_owned(),
    }
}

/// Replaces every `$ref` into `#/$defs/…` or `#/definitions/…` by the definition it names
/// (sibling keywords such as `description` win), and drops the definition sections.
///
/// # Errors
///
/// [`SchemaError::UnresolvedRef`] and [`SchemaError::RecursiveRef`].
pub(crate) fn inline_refs(schema: &Value) -> Result<Value, SchemaError> {
    let mut defs = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(section) = schema.get(key).and_then(Value::as_object) {
            for (name, def) in section {
                defs.insert(format!("#/{key}/{name}"), def.clone());
            }
        }
    }
    let mut out = inline(schema, &defs, &mut Vec::new(), &JsonPath::root())?;
    if let Some(obj) = out.as_object_mut() {
        obj.shift_remove("$defs");
        obj.shift_remove("definitions");
    }
    Ok(out)
}

fn inline(
    value: &Value,
    defs: &Map<String, Value>,
    stack: &mut Vec<String>,
    path: &JsonPath,
) -> Result<Value, SchemaError> {
    match value {
        Value::Object(obj) => {
            let mut out = Map::new();
            if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
                let here = path.join("$ref");
                let def = defs
                    .get(reference)
                    .ok_or_else(|| SchemaError::UnresolvedRef {
                        path: here.clone(),
                        reference: reference.to_owned(),
                    })?;
                if stack.iter().any(|r| r == reference) {
                    return Err(SchemaError::RecursiveRef {
                        path: here,
                        reference: reference.to_owned(),
                    });
                }
                stack.push(reference.to_owned());
                let inlined = inline(def, defs, stack, path)?;
                stack.pop();
                if let Value::Object(inlined) = inlined {
                    out = inlined;
                }
            }
            for (k, v) in obj {
                if k != "$ref" {
                    out.insert(k.clone(), inline(v, defs, stack, &path.join(k))?);
                }
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| inline(v, defs, stack, &path.join(i)))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}
