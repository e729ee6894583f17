//! OpenAI strict mode: checking its invariants and compiling any JSON Schema into its shape.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use crate::emit::nullable_json;
use crate::error::{JsonPath, SchemaError};
use crate::json::sort_keys;
use crate::spec::Dialect;

/// Keywords strict mode cannot express; [`compile_strict`] rejects them.
const UNSUPPORTED: &[&str] = &[
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    "not",
    "prefixItems",
    "contains",
    "minProperties",
    "maxProperties",
];

/// Keywords [`compile_strict`] drops: annotations providers ignore or reject.
const DROPPED: &[&str] = &["$schema", "$id", "title", "$comment", "examples"];

/// Lists every way `schema` breaks OpenAI's strict-mode invariants: the root is an
/// object; every object has `additionalProperties: false` and lists all of its properties in
/// `required`; no keyword strict mode cannot express.
///
/// This is an independent check, kept apart from the code that produces strict schemas so that
/// tests can hold one against the other. Each problem names its JSON Pointer.
///
/// ```
/// use serde_json::json;
/// let ok = json!({"type": "object", "properties": {"a": {"type": "string"}},
///                 "required": ["a"], "additionalProperties": false});
/// assert!(flemma_schema::check_strict(&ok).is_empty());
/// let bad = json!({"type": "object", "properties": {"a": {"type": "string"}}});
/// assert_eq!(flemma_schema::check_strict(&bad), [
///     "/: `additionalProperties` must be false",
///     "/: property \"a\" is not in `required`",
/// ]);
/// ```
pub fn check_strict(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if schema.get("type") != Some(&Value::String("object".into())) {
        problems.push("/: the root must be `\"type\": \"object\"`".to_owned());
    }
    check_node(schema, &JsonPath::root(), &mut problems);
    problems
}

fn check_node(schema: &Value, path: &JsonPath, problems: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        problems.push(format!("{path}: a schema must be an object"));
        return;
    };
    for keyword in UNSUPPORTED.iter().chain(&["oneOf", "allOf"]) {
        if obj.contains_key(*keyword) {
            problems.push(format!("{path}: `{keyword}` is not supported"));
        }
    }
    let is_object = match obj.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => obj.contains_key("properties"),
    };
    if is_object {
        if obj.get("additionalProperties") != Some(&Value::Bool(false)) {
            problems.push(format!("{path}: `additionalProperties` must be false"));
        }
        let required: HashSet<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (name, prop) in props {
                if !required.contains(name.as_str()) {
                    problems.push(format!("{path}: property {name:?} is not in `required`"));
                }
                check_node(prop, &path.join("properties").join(name), problems);
            }
        }
    }
    if let Some(items) = obj.get("items") {
        check_node(items, &path.join("items"), problems);
    }
    if let Some(branches) = obj.get("anyOf").and_then(Value::as_array) {
        for (i, b) in branches.iter().enumerate() {
            check_node(b, &path.join("anyOf").join(i), problems);
        }
    }
    for key in ["$defs", "definitions"] {
        if let Some(defs) = obj.get(key).and_then(Value::as_object) {
            for (name, def) in defs {
                check_node(def, &path.join(key).join(name), problems);
            }
        }
    }
}

/// A JSON Schema in strict form, with what it takes to read the model's input back.
#[derive(Debug, Clone, PartialEq)]
pub struct StrictSchema {
    schema: Value,
    plan: Plan,
    defs: BTreeMap<String, Plan>,
}

/// Where `null` in the model's input stands for a field that was optional before compilation.
#[derive(Debug, Clone, Default, PartialEq)]
struct Plan {
    absent_if_null: Vec<String>,
    properties: BTreeMap<String, Plan>,
    items: Option<Box<Plan>>,
    reference: Option<String>,
}

impl StrictSchema {
    /// The compiled schema.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Takes the compiled schema out.
    pub fn into_schema(self) -> Value {
        self.schema
    }

    /// Maps the model's input back to the original schema: a `null` for a field that was
    /// optional before compilation becomes an absent field.
    ///
    /// ```
    /// use serde_json::json;
    /// let raw = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    /// let strict = flemma_schema::compile_strict(&raw, flemma_schema::Dialect::OpenAiResponses)?;
    /// assert_eq!(strict.decode(json!({"path": null})), json!({}));
    /// # Ok::<(), flemma_schema::SchemaError>(())
    /// ```
    pub fn decode(&self, mut input: Value) -> Value {
        self.apply(&self.plan, &mut input, 0);
        input
    }

    fn apply(&self, plan: &Plan, value: &mut Value, depth: u32) {
        if depth > 256 {
            return;
        }
        if let Some(def) = plan.reference.as_ref().and_then(|r| self.defs.get(r)) {
            self.apply(def, value, depth + 1);
        }
        match value {
            Value::Object(map) => {
                for name in &plan.absent_if_null {
                    if map.get(name).is_some_and(Value::is_null) {
                        map.shift_remove(name);
                    }
                }
                for (name, sub) in &plan.properties {
                    if let Some(v) = map.get_mut(name) {
                        self.apply(sub, v, depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_plan) = &plan.items {
                    for item in items {
                        self.apply(item_plan, item, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Compiles any JSON Schema (one derived by schemars, say) into strict form: every property
/// required, fields that were optional made nullable, `additionalProperties: false` on every
/// object, annotations dropped (`$schema`, `title`, numeric `format`s), `oneOf` read as
/// `anyOf`, and `$ref`s kept into `$defs` or inlined when the dialect needs it.
///
/// # Errors
///
/// A [`SchemaError`] naming the JSON path of anything strict mode cannot express: open maps
/// ([`SchemaError::OpenObjectInStrict`]), `patternProperties` and the like
/// ([`SchemaError::Unsupported`]), unresolvable or (when inlining) recursive references.
pub fn compile_strict(raw: &Value, dialect: Dialect) -> Result<StrictSchema, SchemaError> {
    let defs_source = collect_defs(raw);
    let compiler = Compiler {
        dialect,
        defs_source: &defs_source,
    };
    let mut stack = Vec::new();
    let (mut schema, plan) = compiler.node(raw, &JsonPath::root(), &mut stack)?;
    let mut defs = BTreeMap::new();
    if !dialect.inlines_refs() {
        for (reference, (key, name, def)) in &defs_source {
            let path = JsonPath::root().join(key).join(name);
            let (def_schema, def_plan) = compiler.node(def, &path, &mut stack)?;
            defs.insert(reference.clone(), def_plan);
            if let Some(obj) = schema.as_object_mut() {
                let section = obj
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(section) = section.as_object_mut() {
                    section.insert(name.clone(), def_schema);
                }
            }
        }
    }
    if schema.get("type") != Some(&Value::String("object".into())) {
        return Err(SchemaError::Invalid {
            path: JsonPath::root(),
            reason: "a tool's input schema must be an object".to_owned(),
        });
    }
    sort_keys(&mut schema);
    Ok(StrictSchema { schema, plan, defs })
}

/// `#/$defs/Name` → (section key, name, definition).
fn collect_defs(raw: &Value) -> BTreeMap<String, (String, String, Value)> {
    let mut defs = BTreeMap::new();
    for key in ["$defs", "definitions"] {
        if let Some(section) = raw.get(key).and_then(Value::as_object) {
            for (name, def) in section {
                defs.insert(
                    format!("#/{key}/{name}"),
                    (key.to_owned(), name.clone(), def.clone()),
                );
            }
        }
    }
    defs
}

struct Compiler<'a> {
    dialect: Dialect,
    defs_source: &'a BTreeMap<String, (String, String, Value)>,
}

impl Compiler<'_> {
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per keyword reads best as one match"
    )]
    fn node(
        &self,
        schema: &Value,
        path: &JsonPath,
        stack: &mut Vec<String>,
    ) -> Result<(Value, Plan), SchemaError> {
        let Some(obj) = schema.as_object() else {
            return Err(match schema {
                Value::Bool(true) => SchemaError::OpenObjectInStrict { path: path.clone() },
                _ => SchemaError::Invalid {
                    path: path.clone(),
                    reason: "a schema must be an object".to_owned(),
                },
            });
        };
        if let Some(keyword) = UNSUPPORTED.iter().find(|k| obj.contains_key(**k)) {
            return Err(SchemaError::Unsupported {
                path: path.join(keyword),
                keyword: (*keyword).to_owned(),
            });
        }
        let mut out = Map::new();
        let mut plan = Plan::default();
        let numeric = matches!(obj.get("type"), Some(Value::String(t)) if t == "number" || t == "integer")
            || matches!(obj.get("type"), Some(Value::Array(ts)) if ts.iter().any(|t| t == "number" || t == "integer"));
        for (key, value) in obj {
            let here = path.join(key);
            match key.as_str() {
                // Dropped annotations, definitions (compiled separately) and the object keywords
                // (rebuilt by `object` below).
                k if DROPPED.contains(&k)
                    || matches!(
                        k,
                        "$defs"
                            | "definitions"
                            | "properties"
                            | "required"
                            | "additionalProperties"
                    )
                    || (k == "format" && numeric) => {}
                "items" => {
                    let (items, item_plan) = self.node(value, &here, stack)?;
                    out.insert(key.clone(), items);
                    plan.items = Some(Box::new(item_plan));
                }
                "anyOf" | "oneOf" => {
                    let branches = value.as_array().ok_or_else(|| SchemaError::Invalid {
                        path: here.clone(),
                        reason: "must be an array of schemas".to_owned(),
                    })?;
                    let compiled = branches
                        .iter()
                        .enumerate()
                        .map(|(i, b)| self.node(b, &here.join(i), stack).map(|(v, _)| v))
                        .collect::<Result<Vec<_>, _>>()?;
                    out.insert("anyOf".into(), Value::Array(compiled));
                }
                "allOf" => match value.as_array().map(Vec::as_slice) {
                    Some([single]) => {
                        let (inner, inner_plan) = self.node(single, &here.join(0), stack)?;
                        if let Value::Object(inner) = inner {
                            out.extend(inner);
                        }
                        plan = inner_plan;
                    }
                    _ => {
                        return Err(SchemaError::Unsupported {
                            path: here,
                            keyword: "allOf".to_owned(),
                        });
                    }
                },
                "$ref" => {
                    let reference = value.as_str().unwrap_or_default().to_owned();
                    let Some((_, _, def)) = self.defs_source.get(&reference) else {
                        return Err(SchemaError::UnresolvedRef {
                            path: here,
                            reference,
                        });
                    };
                    if self.dialect.inlines_refs() {
                        if stack.contains(&reference) {
                            return Err(SchemaError::RecursiveRef {
                                path: here,
                                reference,
                            });
                        }
                        stack.push(reference.clone());
                        let (inner, inner_plan) = self.node(def, &here, stack)?;
                        stack.pop();
                        if let Value::Object(inner) = inner {
                            for (k, v) in inner {
                                out.entry(k).or_insert(v);
                            }
                        }
                        plan = inner_plan;
                    } else {
                        out.insert(key.clone(), value.clone());
                        plan.reference = Some(reference);
                    }
                }
                _ => {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
        let is_object = obj.contains_key("properties")
            || matches!(obj.get("type"), Some(Value::String(t)) if t == "object");
        if is_object {
            self.object(obj, path, stack, &mut out, &mut plan)?;
        }
        Ok((Value::Object(out), plan))
    }

    fn object(
        &self,
        obj: &Map<String, Value>,
        path: &JsonPath,
        stack: &mut Vec<String>,
        out: &mut Map<String, Value>,
        plan: &mut Plan,
    ) -> Result<(), SchemaError> {
        match obj.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => {
                return Err(SchemaError::OpenObjectInStrict {
                    path: path.join("additionalProperties"),
                });
            }
        }
        let required: HashSet<&str> = match obj.get("required") {
            None => HashSet::new(),
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            Some(_) => {
                return Err(SchemaError::Invalid {
                    path: path.join("required"),
                    reason: "must be an array of strings".to_owned(),
                });
            }
        };
        let empty = Map::new();
        let props = match obj.get("properties") {
            None => &empty,
            Some(Value::Object(props)) => props,
            Some(_) => {
                return Err(SchemaError::Invalid {
                    path: path.join("properties"),
                    reason: "must be an object".to_owned(),
                });
            }
        };
        if let Some(missing) = required.iter().find(|r| !props.contains_key(**r)) {
            return Err(SchemaError::Invalid {
                path: path.join("required"),
                reason: format!("{missing:?} is required but not a property"),
            });
        }
        let mut compiled = Map::new();
        let mut names: Vec<&String> = props.keys().collect();
        names.sort();
        for name in &names {
            let here = path.join("properties").join(name);
            let (mut value, sub_plan) = self.node(&props[name.as_str()], &here, stack)?;
            if !required.contains(name.as_str()) {
                if !accepts_null(&value) {
                    value = nullable_json(value);
                }
                plan.absent_if_null.push((*name).clone());
            }
            if sub_plan != Plan::default() {
                plan.properties.insert((*name).clone(), sub_plan);
            }
            compiled.insert((*name).clone(), value);
        }
        out.entry("type").or_insert_with(|| "object".into());
        out.insert("properties".into(), Value::Object(compiled));
        out.insert(
            "required".into(),
            names.iter().map(|n| Value::String((*n).clone())).collect(),
        );
        out.insert("additionalProperties".into(), Value::Bool(false));
        Ok(())
    }
}

/// Whether an emitted schema already admits `null` at its top.
fn accepts_null(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => schema
            .get("anyOf")
            .and_then(Value::as_array)
            .is_some_and(|bs| bs.iter().any(accepts_null)),
    }
}
