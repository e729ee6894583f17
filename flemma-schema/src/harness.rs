//! Harness parameters: `flemma.background` and `flemma.save_to`, injected into a
//! tool's schema for the model and stripped from its input before the tool runs.

use serde_json::{Map, Value, json};

use crate::capability::{Capabilities, Capability};
use crate::messages as msg;

/// The property name of the background directive.
pub const BACKGROUND: &str = "flemma.background";
/// The property name of the save-to directive.
pub const SAVE_TO: &str = "flemma.save_to";

/// Which harness parameters a tool is offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HarnessParameters {
    /// Offer `flemma.background`: async tools without the `disables_background` capability.
    pub background: bool,
    /// Offer `flemma.save_to`: tools without the `disables_save_to` capability.
    pub save_to: bool,
}

impl HarnessParameters {
    /// The parameters a tool gets from its traits: `flemma.background` for async
    /// tools that do not disable it, `flemma.save_to` for tools that do not disable it.
    /// [`HarnessParameters::from_capabilities`] reads the two flags from a capability set.
    pub fn for_tool(is_async: bool, disables_background: bool, disables_save_to: bool) -> Self {
        Self {
            background: is_async && !disables_background,
            save_to: !disables_save_to,
        }
    }

    /// The parameters of a tool with these capabilities: [`HarnessParameters::for_tool`] with
    /// [`Capability::DisablesBackground`] and [`Capability::DisablesSaveTo`].
    pub fn from_capabilities(is_async: bool, capabilities: Capabilities) -> Self {
        Self::for_tool(
            is_async,
            capabilities.contains(Capability::DisablesBackground),
            capabilities.contains(Capability::DisablesSaveTo),
        )
    }

    /// No harness parameters.
    pub fn none() -> Self {
        Self::default()
    }
}

/// Adds the harness parameters to a serialized input schema.
///
/// For strict tools the parameters are nullable and appended to `required` after the tool's own
/// names; for other tools they are plain and optional. The schema's keys are expected sorted
/// (as this crate emits them); the parameters are inserted at their sorted places.
///
/// ```
/// use flemma_schema::{HarnessParameters, inject_harness_parameters};
/// use serde_json::json;
///
/// let mut schema = json!({"type": "object", "properties": {"command": {"type": "string"}},
///                         "required": ["command"], "additionalProperties": false});
/// inject_harness_parameters(&mut schema, HarnessParameters::for_tool(true, false, false), true);
/// assert_eq!(schema["required"], json!(["command", "flemma.background", "flemma.save_to"]));
/// assert_eq!(schema["properties"]["flemma.save_to"]["type"], json!(["string", "null"]));
/// ```
pub fn inject_harness_parameters(schema: &mut Value, params: HarnessParameters, strict: bool) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let typed = |t: &str| if strict { json!([t, "null"]) } else { json!(t) };
    let mut injected = Vec::with_capacity(2);
    if params.background {
        // Keys in sorted order, like the rest of the schema.
        let param = json!({"default": false, "description": msg::PARAM_BACKGROUND, "type": typed("boolean")});
        injected.push((BACKGROUND, param));
    }
    if params.save_to {
        injected.push((
            SAVE_TO,
            json!({"description": msg::PARAM_SAVE_TO, "type": typed("string")}),
        ));
    }
    if injected.is_empty() {
        return;
    }
    let names: Vec<&str> = injected.iter().map(|(name, _)| *name).collect();
    if let Some(properties) =
        entry_sorted(obj, "properties", || Value::Object(Map::new())).and_then(Value::as_object_mut)
    {
        for (name, param) in injected {
            insert_sorted(properties, name, param);
        }
    }
    if strict
        && let Some(required) =
            entry_sorted(obj, "required", || Value::Array(Vec::new())).and_then(Value::as_array_mut)
    {
        for name in names {
            if !required.iter().any(|r| r == name) {
                required.push(name.into());
            }
        }
    }
}

/// Inserts into a map whose keys are sorted, keeping them sorted (no re-sorting pass).
fn insert_sorted(map: &mut Map<String, Value>, key: &str, value: Value) {
    if let Some(slot) = map.get_mut(key) {
        *slot = value;
        return;
    }
    let index = map.keys().take_while(|k| k.as_str() < key).count();
    map.shift_insert(index, key.to_owned(), value);
}

/// The value under `key`, inserted at its sorted place when missing.
fn entry_sorted<'m>(
    map: &'m mut Map<String, Value>,
    key: &str,
    make: impl FnOnce() -> Value,
) -> Option<&'m mut Value> {
    if !map.contains_key(key) {
        insert_sorted(map, key, make());
    }
    map.get_mut(key)
}

/// What the harness parameters of one call asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives {
    /// `flemma.background` was exactly `true`.
    pub background: bool,
    /// `flemma.save_to` was a non-empty string.
    pub save_to: Option<String>,
}

/// Removes the harness parameters from a call's input before the tool runs (`null` counts as
/// not set) and returns what they asked for.
///
/// ```
/// use flemma_schema::strip_harness_parameters;
/// use serde_json::json;
///
/// let mut input = json!({"command": "make", "flemma.background": true, "flemma.save_to": null});
/// let directives = strip_harness_parameters(input.as_object_mut().unwrap());
/// assert!(directives.background && directives.save_to.is_none());
/// assert_eq!(input, json!({"command": "make"}));
/// ```
pub fn strip_harness_parameters(input: &mut Map<String, Value>) -> Directives {
    let background = input.shift_remove(BACKGROUND) == Some(Value::Bool(true));
    let save_to = match input.shift_remove(SAVE_TO) {
        Some(Value::String(path)) if !path.trim().is_empty() => Some(path),
        _ => None,
    };
    Directives {
        background,
        save_to,
    }
}
