//! `$ref`s to JSON pointers inside a tool's input schema, inlined.
//!
//! A schema may point at any of its own nodes (`{"$ref": "#/properties/nextThoughtNeeded"}`,
//! which zod-to-json-schema writes for a schema used twice), not only into `$defs` or
//! `definitions`, which is all flemma-schema follows. Such a `$ref` is replaced by the node it
//! points to (resolved in turn, its `$ref`s followed the same way), with the `$ref`'s sibling
//! keywords kept: annotations (`description`, `title`, …) over the node's own, and other
//! keywords alongside it in an `allOf`. References into `$defs`, `definitions` and `#` itself
//! are left to flemma-schema (they may be recursive). A reference that points nowhere, one
//! that is not a local pointer (another document, an anchor), a cycle, a chain deeper than
//! [`MAX_DEPTH`] and a schema that would grow past [`MAX_NODES`] are errors naming the
//! reference: the tool is skipped, as for any schema that cannot be used.

use serde_json::{Map, Value};

/// The longest chain of `$ref`s followed from one place.
pub(crate) const MAX_DEPTH: usize = 32;

/// The most nodes the resolved schema may have (`$ref`s to large nodes, repeated, could
/// otherwise grow it without bound).
pub(crate) const MAX_NODES: usize = 100_000;

/// Why the `$ref`s of a schema cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum RefError {
    /// The pointer names no node of the schema.
    #[error("`$ref` {reference:?} points to nothing in the schema")]
    Unresolvable {
        /// The reference.
        reference: String,
    },
    /// Not a pointer into this schema (another document, an anchor).
    #[error("`$ref` {reference:?} is not a JSON pointer into the schema (only `#/…` is followed)")]
    NotLocal {
        /// The reference.
        reference: String,
    },
    /// The reference leads back to itself.
    #[error("`$ref` {reference:?} refers to itself (a cycle outside `$defs`)")]
    Cycle {
        /// The reference.
        reference: String,
    },
    /// A chain of references longer than [`MAX_DEPTH`].
    #[error("`$ref` {reference:?} starts a chain of more than {MAX_DEPTH} references")]
    TooDeep {
        /// The reference.
        reference: String,
    },
    /// Resolving would make the schema larger than [`MAX_NODES`].
    #[error("resolving the `$ref`s would make the schema larger than {MAX_NODES} nodes")]
    TooLarge,
}

/// Keywords that only describe (a `$ref`'s sibling of these replaces the node's own).
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// `schema` with every `$ref` to a pointer outside `$defs`/`definitions` replaced by the node
/// it points to; `Cow`-like: `None` when there is none (the schema is used as it is).
///
/// # Errors
///
/// [`RefError`] naming the reference that cannot be followed.
pub(crate) fn inline_pointers(schema: &Value) -> Result<Option<Value>, RefError> {
    if !has_pointer(schema) {
        return Ok(None);
    }
    let mut resolver = Resolver {
        root: schema,
        stack: Vec::new(),
        nodes: 0,
    };
    resolver.walk(schema).map(Some)
}

/// Whether a `$ref` this module inlines occurs in `value`.
fn has_pointer(value: &Value) -> bool {
    match value {
        Value::Object(object) => {
            object
                .get("$ref")
                .and_then(Value::as_str)
                .is_some_and(|r| !left_to_flemma_schema(r))
                || object.values().any(has_pointer)
        }
        Value::Array(items) => items.iter().any(has_pointer),
        _ => false,
    }
}

/// References flemma-schema follows itself.
fn left_to_flemma_schema(reference: &str) -> bool {
    reference == "#" || reference.starts_with("#/$defs/") || reference.starts_with("#/definitions/")
}

struct Resolver<'a> {
    root: &'a Value,
    /// The references being followed, outermost first.
    stack: Vec<String>,
    nodes: usize,
}

impl Resolver<'_> {
    fn walk(&mut self, value: &Value) -> Result<Value, RefError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(RefError::TooLarge);
        }
        match value {
            Value::Object(object) => match object.get("$ref").and_then(Value::as_str) {
                Some(reference) if !left_to_flemma_schema(reference) => {
                    self.follow(reference, object)
                }
                _ => {
                    let mut out = Map::with_capacity(object.len());
                    for (key, value) in object {
                        out.insert(key.clone(), self.walk(value)?);
                    }
                    Ok(Value::Object(out))
                }
            },
            Value::Array(items) => items
                .iter()
                .map(|item| self.walk(item))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            scalar => Ok(scalar.clone()),
        }
    }

    /// The node `reference` points to, resolved, with the `$ref`'s siblings of `object`.
    fn follow(&mut self, reference: &str, object: &Map<String, Value>) -> Result<Value, RefError> {
        let owned = || reference.to_owned();
        let Some(pointer) = reference.strip_prefix('#').filter(|p| p.starts_with('/')) else {
            return Err(RefError::NotLocal { reference: owned() });
        };
        if self.stack.iter().any(|r| r == reference) {
            return Err(RefError::Cycle { reference: owned() });
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(RefError::TooDeep {
                reference: self.stack.first().cloned().unwrap_or_else(owned),
            });
        }
        let pointer = percent_decoded(pointer)
            .ok_or_else(|| RefError::Unresolvable { reference: owned() })?;
        // `Value::pointer` reads `~1` as `/` and `~0` as `~` (RFC 6901).
        let target = self
            .root
            .pointer(&pointer)
            .ok_or_else(|| RefError::Unresolvable { reference: owned() })?;
        self.stack.push(reference.to_owned());
        let resolved = self.walk(target);
        self.stack.pop();
        let resolved = resolved?;
        let mut siblings = Map::new();
        for (key, value) in object {
            if key != "$ref" {
                siblings.insert(key.clone(), self.walk(value)?);
            }
        }
        Ok(merge(resolved, siblings))
    }
}

/// `resolved` with the `$ref`'s `siblings`: annotations over its own; when other keywords
/// are among them, `{"allOf": [resolved], …siblings}` (both must hold, as in JSON Schema
/// 2019-09 and later).
fn merge(resolved: Value, siblings: Map<String, Value>) -> Value {
    let (annotations, keywords): (Map<String, Value>, Map<String, Value>) = siblings
        .into_iter()
        .partition(|(key, _)| ANNOTATIONS.contains(&key.as_str()));
    match resolved {
        Value::Object(mut node) if keywords.is_empty() => {
            node.extend(annotations);
            Value::Object(node)
        }
        resolved => {
            let mut all = keywords;
            all.extend(annotations);
            all.insert("allOf".to_owned(), Value::Array(vec![resolved]));
            Value::Object(all)
        }
    }
}

/// A URI fragment's `%XX` escapes decoded (a pointer in a `$ref` is a URI fragment);
/// `None` when that is not UTF-8 or an escape is malformed.
fn percent_decoded(fragment: &str) -> Option<String> {
    if !fragment.contains('%') {
        return Some(fragment.to_owned());
    }
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn pointers_into_properties_are_inlined_through_chains() {
        // What @modelcontextprotocol/server-sequential-thinking sends with zod 3.
        let schema = json!({
            "type": "object",
            "properties": {
                "nextThoughtNeeded": {"type": ["boolean", "string"], "description": "Another?"},
                "isRevision": {"$ref": "#/properties/nextThoughtNeeded", "description": "Revises?"},
                "needsMoreThoughts": {"$ref": "#/properties/isRevision", "description": "More?"}
            }
        });
        let resolved = inline_pointers(&schema).unwrap().unwrap();
        assert_eq!(
            resolved["properties"],
            json!({
                "nextThoughtNeeded": {"type": ["boolean", "string"], "description": "Another?"},
                "isRevision": {"type": ["boolean", "string"], "description": "Revises?"},
                "needsMoreThoughts": {"type": ["boolean", "string"], "description": "More?"}
            })
        );
        flemma_schema::Validator::new(&resolved).unwrap();
    }

    #[test]
    fn escapes_in_pointers_are_read() {
        let schema = json!({
            "properties": {
                "a/b": {"type": "string"},
                "m~n": {"type": "integer"},
                "c%d": {"type": "boolean"},
                "x": {"$ref": "#/properties/a~1b"},
                "y": {"$ref": "#/properties/m~0n"},
                "z": {"$ref": "#/properties/c%25d"},
                "w": {"$ref": "#/properties/x"}
            }
        });
        let resolved = inline_pointers(&schema).unwrap().unwrap();
        let types: Vec<&Value> = ["x", "y", "z", "w"]
            .iter()
            .map(|k| &resolved["properties"][k]["type"])
            .collect();
        assert_eq!(
            types,
            [
                &json!("string"),
                &json!("integer"),
                &json!("boolean"),
                &json!("string")
            ]
        );
    }

    #[test]
    fn other_keywords_beside_a_ref_both_hold() {
        let schema = json!({"properties": {"n": {"type": "integer"}, "m": {"$ref": "#/properties/n", "minimum": 3}}});
        let resolved = inline_pointers(&schema).unwrap().unwrap();
        assert_eq!(
            resolved["properties"]["m"],
            json!({"minimum": 3, "allOf": [{"type": "integer"}]})
        );
    }

    #[test]
    fn what_cannot_be_followed_is_an_error_naming_the_reference() {
        let cases = [
            (
                json!({"properties": {"a": {"$ref": "#/properties/a"}}}),
                RefError::Cycle {
                    reference: "#/properties/a".into(),
                },
            ),
            (
                json!({"properties": {"a": {"$ref": "#/properties/b"}, "b": {"items": {"$ref": "#/properties/a"}}}}),
                RefError::Cycle {
                    reference: "#/properties/b".into(),
                },
            ),
            (
                json!({"properties": {"a": {"$ref": "#/properties/nope"}}}),
                RefError::Unresolvable {
                    reference: "#/properties/nope".into(),
                },
            ),
            (
                json!({"properties": {"a": {"$ref": "https://example.com/s.json"}}}),
                RefError::NotLocal {
                    reference: "https://example.com/s.json".into(),
                },
            ),
            (
                json!({"properties": {"a": {"$ref": "#anchor"}}}),
                RefError::NotLocal {
                    reference: "#anchor".into(),
                },
            ),
        ];
        for (schema, expected) in cases {
            assert_eq!(inline_pointers(&schema), Err(expected), "{schema}");
        }
        // A chain longer than MAX_DEPTH.
        let mut properties = Map::new();
        for i in 0..40 {
            properties.insert(
                format!("p{i}"),
                json!({"$ref": format!("#/properties/p{}", i + 1)}),
            );
        }
        properties.insert("p40".into(), json!({"type": "string"}));
        assert_eq!(
            inline_pointers(&json!({"properties": properties})),
            Err(RefError::TooDeep {
                reference: "#/properties/p1".into()
            })
        );
        // Each level doubling the one below: 2^30 nodes if it were inlined.
        let mut defs = Map::new();
        defs.insert("l0".into(), json!({"type": "string"}));
        for i in 1..=30 {
            let below = format!("#/x-levels/l{}", i - 1);
            defs.insert(
                format!("l{i}"),
                json!({"anyOf": [{"$ref": below}, {"$ref": below}]}),
            );
        }
        assert_eq!(
            inline_pointers(
                &json!({"x-levels": defs, "properties": {"a": {"$ref": "#/x-levels/l30"}}})
            ),
            Err(RefError::TooLarge)
        );
    }

    #[test]
    fn references_flemma_schema_follows_are_left_alone() {
        let schema = json!({
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
            "properties": {"head": {"$ref": "#/$defs/node"}, "all": {"$ref": "#"}}
        });
        assert_eq!(inline_pointers(&schema), Ok(None));
    }

    /// A small deterministic generator (xorshift), for the property below.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, below: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % below as u64) as usize
        }
    }

    fn escape(key: &str) -> String {
        key.replace('~', "~0")
            .replace('/', "~1")
            .replace('%', "%25")
    }

    /// A random schema node, its property names drawn with `/`, `~` and `%` in them.
    fn node(rng: &mut Rng, depth: usize) -> Value {
        const KEYS: &[&str] = &["a", "b/c", "d~e", "~1", "f%g", "~0/~"];
        const TYPES: &[&str] = &["string", "integer", "boolean", "number"];
        if depth == 0 || rng.next(3) == 0 {
            return json!({"type": TYPES[rng.next(TYPES.len())], "description": format!("d{}", rng.next(100))});
        }
        let mut properties = Map::new();
        for _ in 0..=rng.next(3) {
            properties.insert(KEYS[rng.next(KEYS.len())].to_owned(), node(rng, depth - 1));
        }
        json!({"type": "object", "properties": properties})
    }

    /// Every pointer to a node of `value` under `at`.
    fn pointers(value: &Value, at: &str, out: &mut Vec<String>) {
        out.push(at.to_owned());
        if let Some(properties) = value.get("properties").and_then(Value::as_object) {
            for (key, child) in properties {
                pointers(child, &format!("{at}/properties/{}", escape(key)), out);
            }
        }
    }

    #[test]
    fn property_a_resolved_schema_holds_each_target_in_place_of_its_reference() {
        for seed in 1..=300u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            // A library of nodes without references; library entry i may refer to entries
            // before it (a chain of pointers, never a cycle).
            let mut library = Vec::new();
            let mut expanded: Vec<Value> = Vec::new();
            for i in 0..4 {
                let mut entry = node(&mut rng, 3);
                let mut want = entry.clone();
                if i > 0 && rng.next(2) == 0 {
                    let j = rng.next(i);
                    let mut targets = Vec::new();
                    pointers(&library[j], &format!("/x-lib/{j}"), &mut targets);
                    let target = &targets[rng.next(targets.len())];
                    let description = format!("from {i}");
                    entry = json!({"$ref": format!("#{target}"), "description": description});
                    let mut resolved = expanded[j]
                        .pointer(
                            &target
                                .strip_prefix(&format!("/x-lib/{j}"))
                                .unwrap()
                                .replace("%25", "%"),
                        )
                        .unwrap()
                        .clone();
                    resolved["description"] = json!(description);
                    want = resolved;
                }
                library.push(entry);
                expanded.push(want);
            }
            let mut uses = Map::new();
            let mut want_uses = Map::new();
            for u in 0..3 {
                let j = rng.next(library.len());
                let mut targets = Vec::new();
                pointers(&library[j], &format!("/x-lib/{j}"), &mut targets);
                let target = targets[rng.next(targets.len())].clone();
                uses.insert(format!("u{u}"), json!({"$ref": format!("#{target}")}));
                let inner = target.strip_prefix(&format!("/x-lib/{j}")).unwrap();
                want_uses.insert(
                    format!("u{u}"),
                    expanded[j]
                        .pointer(&inner.replace("%25", "%"))
                        .unwrap()
                        .clone(),
                );
            }
            let schema = json!({"type": "object", "x-lib": library, "properties": uses});
            let resolved = inline_pointers(&schema).unwrap().unwrap();
            assert_eq!(
                resolved["properties"],
                Value::Object(want_uses),
                "seed {seed}: {schema}"
            );
            assert_eq!(resolved["x-lib"], Value::Array(expanded), "seed {seed}");
            assert!(!has_pointer(&resolved), "seed {seed}");
        }
    }
}
