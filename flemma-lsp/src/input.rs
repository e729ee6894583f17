//! A call's input checked as the executor reads it: the tool's schema tells the model what to
//! send, and is stricter than what a call needs to run. The check leaves out what the
//! executor leaves out, so that the editor reports what `flemma check` and a run would:
//!
//! - the harness parameters (`flemma.background`, `flemma.save_to`), which the executor takes
//!   out of the input before the tool sees it ([`flemma_schema::strip_harness_parameters`]);
//! - a missing property whose schema admits `null`: strict schemas list their optional
//!   properties as required and nullable, and `null` reads as absent
//!   ([`flemma_schema::StrictSchema::decode`]);
//! - a missing `label` of a built-in tool: the harness's name for a preview, which
//!   the tool does without.
//!
//! What is left are the violations that make the call fail: a property of the wrong type or
//! value, one the schema does not know, one the tool cannot do without.

use serde_json::{Map, Value};

/// The input schema of the tool `name` as a call's input is checked against it (see the
/// module's documentation), from the schema `spec` gives the model.
pub(crate) fn call_schema(name: &str, spec: &Value) -> Value {
    let mut schema = spec.clone();
    if let Some(object) = schema.as_object_mut() {
        for harness in [flemma_schema::BACKGROUND, flemma_schema::SAVE_TO] {
            if let Some(Value::Object(properties)) = object.get_mut("properties") {
                properties.shift_remove(harness);
            }
            unrequire(object, |property, _| property == harness);
        }
        if flemma_schema::builtin::get(name).is_some() {
            unrequire(object, |property, _| property == "label");
        }
    }
    relax(&mut schema);
    schema
}

/// A call's input as the tool receives it: the harness parameters taken out.
pub(crate) fn call_input(input: &Map<String, Value>) -> Value {
    let mut input = input.clone();
    flemma_schema::strip_harness_parameters(&mut input);
    Value::Object(input)
}

/// Takes out of `object`'s `required` the names `drop` picks (given the property's schema).
fn unrequire(object: &mut Map<String, Value>, drop: impl Fn(&str, Option<&Value>) -> bool) {
    let properties = object.get("properties").cloned();
    if let Some(Value::Array(required)) = object.get_mut("required") {
        required.retain(|name| {
            name.as_str().is_none_or(|name| {
                !drop(
                    name,
                    properties
                        .as_ref()
                        .and_then(|properties| properties.get(name)),
                )
            })
        });
    }
}

/// Every (sub)schema's nullable properties made optional.
fn relax(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            unrequire(object, |_, property| property.is_some_and(admits_null));
            for value in object.values_mut() {
                relax(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(relax),
        _ => {}
    }
}

/// Whether a schema accepts `null`: its `type` names it, or a branch of its `anyOf` or
/// `oneOf` does.
fn admits_null(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "null" => return true,
        Some(Value::Array(kinds)) if kinds.iter().any(|k| k == "null") => return true,
        _ => {}
    }
    ["anyOf", "oneOf"].iter().any(|key| {
        schema
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|branches| branches.iter().any(admits_null))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nullable_and_harness_properties_and_a_builtins_label_may_be_left_out() {
        let spec = json!({
            "type": "object",
            "properties": {
                "label": {"type": "string"},
                "command": {"type": "string"},
                "timeout": {"type": ["number", "null"]},
                "nested": {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["a"]},
                "flemma.background": {"type": ["boolean", "null"]},
            },
            "required": ["command", "flemma.background", "label", "nested", "timeout"],
            "additionalProperties": false,
        });
        let bash = call_schema("bash", &spec);
        assert_eq!(bash["required"], json!(["command", "nested"]));
        assert_eq!(bash["properties"]["nested"]["required"], json!([]));
        assert!(bash["properties"].get("flemma.background").is_none());
        // Another tool's `label` is its own.
        assert_eq!(
            call_schema("mcp.x.y", &spec)["required"],
            json!(["command", "label", "nested"])
        );
    }
}
