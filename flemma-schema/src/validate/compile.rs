//! Compiling a JSON Schema into the [`Node`] tree the validator walks.

use std::collections::HashMap;

use serde_json::Value;

use super::{Additional, Node, Target, Ty};
use crate::error::{JsonPath, SchemaError};

/// Compiles schema JSON into nodes, resolving `$ref`s to definition indexes.
struct Compiler {
    names: HashMap<String, usize>,
}

/// The root node of `schema` and its definitions (`$defs`, `definitions`), `$ref`s resolved to
/// definition indexes.
pub(super) fn compile(schema: &Value) -> Result<(Node, Vec<Node>), SchemaError> {
    let mut def_entries: Vec<(String, &Value, JsonPath)> = Vec::new();
    for key in ["$defs", "definitions"] {
        if let Some(defs) = schema.get(key).and_then(Value::as_object) {
            for (name, def) in defs {
                def_entries.push((
                    format!("#/{key}/{name}"),
                    def,
                    JsonPath::root().join(key).join(name),
                ));
            }
        }
    }
    let compiler = Compiler {
        names: def_entries
            .iter()
            .enumerate()
            .map(|(i, (name, _, _))| (name.clone(), i))
            .collect(),
    };
    let defs = def_entries
        .iter()
        .map(|(_, def, path)| compiler.node(def, path))
        .collect::<Result<Vec<_>, _>>()?;
    let root = compiler.node(schema, &JsonPath::root())?;
    Ok((root, defs))
}

impl Compiler {
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per keyword reads best as one match"
    )]
    fn node(&self, schema: &Value, path: &JsonPath) -> Result<Node, SchemaError> {
        let invalid = |path: &JsonPath, reason: &str| SchemaError::Invalid {
            path: path.clone(),
            reason: reason.to_owned(),
        };
        let obj = match schema {
            Value::Object(obj) => obj,
            // `true` accepts everything; `false` is expressed as "not any type".
            Value::Bool(true) => return Ok(Node::default()),
            Value::Bool(false) => {
                return Ok(Node {
                    enum_values: Some(Vec::new()),
                    ..Node::default()
                });
            }
            _ => return Err(invalid(path, "a schema must be an object or a boolean")),
        };
        let mut node = Node::default();
        let mut required: Vec<String> = Vec::new();
        for (key, value) in obj {
            let here = path.join(key);
            match key.as_str() {
                "type" => {
                    node.types = match value {
                        Value::String(t) => {
                            vec![Ty::parse(t).ok_or_else(|| invalid(&here, "unknown type"))?]
                        }
                        Value::Array(ts) => ts
                            .iter()
                            .map(|t| {
                                t.as_str()
                                    .and_then(Ty::parse)
                                    .ok_or_else(|| invalid(&here, "unknown type"))
                            })
                            .collect::<Result<_, _>>()?,
                        _ => return Err(invalid(&here, "`type` must be a string or an array")),
                    };
                }
                "enum" => {
                    node.enum_values = Some(
                        value
                            .as_array()
                            .ok_or_else(|| invalid(&here, "`enum` must be an array"))?
                            .clone(),
                    );
                }
                "const" => node.const_value = Some(value.clone()),
                "properties" => {
                    let props = value
                        .as_object()
                        .ok_or_else(|| invalid(&here, "`properties` must be an object"))?;
                    let mut compiled = props
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), self.node(v, &here.join(k))?)))
                        .collect::<Result<Vec<_>, SchemaError>>()?;
                    compiled.sort_by(|a, b| a.0.cmp(&b.0));
                    node.properties = compiled;
                }
                "required" => {
                    required = value
                        .as_array()
                        .and_then(|r| r.iter().map(|n| n.as_str().map(str::to_owned)).collect())
                        .ok_or_else(|| invalid(&here, "`required` must be an array of strings"))?;
                }
                "additionalProperties" => {
                    node.additional = match value {
                        Value::Bool(true) => Additional::Allowed,
                        Value::Bool(false) => Additional::Forbidden,
                        other => Additional::Schema(Box::new(self.node(other, &here)?)),
                    };
                }
                "items" => node.items = Some(Box::new(self.node(value, &here)?)),
                "anyOf" | "oneOf" | "allOf" => {
                    let branches = value
                        .as_array()
                        .ok_or_else(|| invalid(&here, "must be an array of schemas"))?
                        .iter()
                        .enumerate()
                        .map(|(i, b)| self.node(b, &here.join(i)))
                        .collect::<Result<Vec<_>, _>>()?;
                    if key == "allOf" {
                        node.all_of = branches;
                    } else {
                        node.any_of = branches;
                    }
                }
                "$ref" => {
                    let reference = value
                        .as_str()
                        .ok_or_else(|| invalid(&here, "`$ref` must be a string"))?;
                    node.reference = Some(if reference == "#" {
                        Target::Root
                    } else {
                        Target::Def(*self.names.get(reference).ok_or_else(|| {
                            SchemaError::UnresolvedRef {
                                path: here.clone(),
                                reference: reference.to_owned(),
                            }
                        })?)
                    });
                }
                "minimum" => node.minimum = Some(number(value, &here)?),
                "maximum" => node.maximum = Some(number(value, &here)?),
                "exclusiveMinimum" => node.exclusive_minimum = Some(number(value, &here)?),
                "exclusiveMaximum" => node.exclusive_maximum = Some(number(value, &here)?),
                "minLength" => node.min_length = Some(count(value, &here)?),
                "maxLength" => node.max_length = Some(count(value, &here)?),
                "minItems" => node.min_items = Some(count(value, &here)?),
                "maxItems" => node.max_items = Some(count(value, &here)?),
                _ => {}
            }
        }
        node.required_indexes = required
            .into_iter()
            .map(|name| {
                let index = node
                    .properties
                    .binary_search_by(|(k, _)| k.as_str().cmp(&name))
                    .ok();
                (name, index)
            })
            .collect();
        Ok(node)
    }
}

fn number(value: &Value, path: &JsonPath) -> Result<f64, SchemaError> {
    value.as_f64().ok_or_else(|| SchemaError::Invalid {
        path: path.clone(),
        reason: "must be a number".to_owned(),
    })
}

fn count(value: &Value, path: &JsonPath) -> Result<u64, SchemaError> {
    value.as_u64().ok_or_else(|| SchemaError::Invalid {
        path: path.clone(),
        reason: "must be a non-negative integer".to_owned(),
    })
}
