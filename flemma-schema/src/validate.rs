//! Checking a tool call's input against its JSON Schema.

mod compile;

use std::fmt;

use serde_json::{Map, Value};

use crate::error::SchemaError;
use crate::json::describe_value;

/// A JSON Schema compiled for repeated validation.
///
/// Supports the keywords tool schemas use: `type`, `enum`, `const`, `properties`, `required`,
/// `additionalProperties`, `items`, `anyOf`, `oneOf` (checked like `anyOf`), `allOf`, `$ref`
/// into `$defs`/`definitions` (recursion included), `minimum`, `maximum`,
/// `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `minItems` and
/// `maxItems`. Other keywords (`pattern`, `format`, …) are not checked.
///
/// ```
/// use flemma_schema::Validator;
/// use serde_json::json;
///
/// let schema = json!({
///     "type": "object",
///     "properties": {"command": {"type": "string"}, "timeout": {"type": ["number", "null"]}},
///     "required": ["command", "timeout"],
///     "additionalProperties": false
/// });
/// let validator = Validator::new(&schema)?;
/// let err = validator.validate(&json!({"timeout": "30", "extra": 1})).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "input: missing required property \"command\"\n\
///      input.timeout: expected number or null, got string \"30\"\n\
///      input: unknown property \"extra\""
/// );
/// # Ok::<(), flemma_schema::SchemaError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Validator {
    root: Node,
    defs: Vec<Node>,
}

/// Every way an input failed its schema, in document order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ValidationError {
    violations: Vec<Violation>,
}

impl ValidationError {
    /// The violations, at least one.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }
}

/// One failed check: where (`input.timeout`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where, as `input`, `input.a.b[2]`, `input["flemma.save_to"]`.
    pub path: String,
    /// What is wrong (`expected number or null, got string "30"`).
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Ty {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "null" => Ty::Null,
            "boolean" => Ty::Boolean,
            "integer" => Ty::Integer,
            "number" => Ty::Number,
            "string" => Ty::String,
            "array" => Ty::Array,
            "object" => Ty::Object,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Ty::Null => "null",
            Ty::Boolean => "boolean",
            Ty::Integer => "integer",
            Ty::Number => "number",
            Ty::String => "string",
            Ty::Array => "array",
            Ty::Object => "object",
        }
    }

    fn accepts(self, value: &Value) -> bool {
        match (self, value) {
            (Ty::Null, Value::Null)
            | (Ty::Boolean, Value::Bool(_))
            | (Ty::Number, Value::Number(_))
            | (Ty::String, Value::String(_))
            | (Ty::Array, Value::Array(_))
            | (Ty::Object, Value::Object(_)) => true,
            (Ty::Integer, Value::Number(n)) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, Default)]
enum Additional {
    #[default]
    Allowed,
    Forbidden,
    Schema(Box<Node>),
}

#[derive(Debug, Clone, Default)]
struct Node {
    types: Vec<Ty>,
    enum_values: Option<Vec<Value>>,
    const_value: Option<Value>,
    /// Sorted by name.
    properties: Vec<(String, Node)>,
    /// Each required name with its index in `properties`, when it is one.
    required_indexes: Vec<(String, Option<usize>)>,
    additional: Additional,
    items: Option<Box<Node>>,
    any_of: Vec<Node>,
    all_of: Vec<Node>,
    reference: Option<Target>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    exclusive_minimum: Option<f64>,
    exclusive_maximum: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Root,
    Def(usize),
}

impl Validator {
    /// Compiles a JSON Schema.
    ///
    /// # Errors
    ///
    /// [`SchemaError::Invalid`] for a malformed keyword and [`SchemaError::UnresolvedRef`] for
    /// a `$ref` outside `#`, `#/$defs/…` and `#/definitions/…`.
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        let (root, defs) = compile::compile(schema)?;
        Ok(Self { root, defs })
    }

    /// Checks `input`, reporting every violation.
    ///
    /// # Errors
    ///
    /// [`ValidationError`] listing each violation with its path.
    pub fn validate(&self, input: &Value) -> Result<(), ValidationError> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.check(&self.root, input, &mut path, &mut out, 0);
        if out.is_empty() {
            Ok(())
        } else {
            Err(ValidationError { violations: out })
        }
    }

    /// The types a node declares, looking through a bare `$ref`.
    fn types_of<'n>(&'n self, node: &'n Node) -> &'n [Ty] {
        let mut node = node;
        for _ in 0..16 {
            match (node.types.is_empty(), node.reference) {
                (true, Some(target)) => node = self.resolve(target),
                _ => break,
            }
        }
        &node.types
    }

    fn resolve(&self, target: Target) -> &Node {
        match target {
            Target::Root => &self.root,
            Target::Def(i) => &self.defs[i],
        }
    }

    fn check<'v>(
        &self,
        node: &Node,
        value: &'v Value,
        path: &mut Vec<Segment<'v>>,
        out: &mut Vec<Violation>,
        depth: u32,
    ) {
        // Recursive schemas over deep values: stop rather than overflow the stack.
        if depth > 256 {
            return;
        }
        if let Some(target) = node.reference {
            self.check(self.resolve(target), value, path, out, depth + 1);
        }
        for sub in &node.all_of {
            self.check(sub, value, path, out, depth + 1);
        }
        if !node.types.is_empty() && !node.types.iter().any(|t| t.accepts(value)) {
            let names: Vec<&str> = node.types.iter().map(|t| t.name()).collect();
            return mismatch(out, path, &names.join(" or "), value);
        }
        if let Some(values) = &node.enum_values
            && !values.contains(value)
        {
            let listed: Vec<String> = values.iter().map(Value::to_string).collect();
            return mismatch(out, path, &format!("one of {}", listed.join(", ")), value);
        }
        if let Some(expected) = &node.const_value
            && expected != value
        {
            return mismatch(out, path, &expected.to_string(), value);
        }
        if !node.any_of.is_empty() {
            self.check_any_of(node, value, path, out, depth);
        }
        match value {
            Value::Object(map) => self.check_object(node, map, path, out, depth),
            Value::Array(items) => {
                check_count(
                    node.min_items,
                    node.max_items,
                    items.len(),
                    "item",
                    path,
                    out,
                );
                if let Some(item) = &node.items {
                    for (i, v) in items.iter().enumerate() {
                        path.push(Segment::Index(i));
                        self.check(item, v, path, out, depth + 1);
                        path.pop();
                    }
                }
            }
            Value::String(s) if node.min_length.is_some() || node.max_length.is_some() => {
                check_count(
                    node.min_length,
                    node.max_length,
                    s.chars().count(),
                    "character",
                    path,
                    out,
                );
            }
            Value::Number(n) => check_range(node, n.as_f64().unwrap_or(f64::NAN), path, out),
            _ => {}
        }
    }

    fn check_any_of<'v>(
        &self,
        node: &Node,
        value: &'v Value,
        path: &mut Vec<Segment<'v>>,
        out: &mut Vec<Violation>,
        depth: u32,
    ) {
        let mut attempts = Vec::with_capacity(node.any_of.len());
        for branch in &node.any_of {
            let mut found = Vec::new();
            self.check(branch, value, path, &mut found, depth + 1);
            if found.is_empty() {
                return;
            }
            attempts.push((branch, found));
        }
        // When exactly one branch accepts the value's type, its deeper failures are the news.
        let typed: Vec<_> = attempts
            .iter()
            .filter(|(b, _)| {
                let types = self.types_of(b);
                !types.is_empty() && types.iter().any(|t| t.accepts(value))
            })
            .collect();
        if let [(_, found)] = typed.as_slice() {
            out.extend(found.iter().cloned());
            return;
        }
        let mut names: Vec<&str> = Vec::new();
        for (branch, _) in &attempts {
            for t in self.types_of(branch) {
                if !names.contains(&t.name()) {
                    names.push(t.name());
                }
            }
        }
        let expected =
            if names.is_empty() || attempts.iter().any(|(b, _)| self.types_of(b).is_empty()) {
                "a value matching one of the allowed schemas".to_owned()
            } else {
                names.join(" or ")
            };
        mismatch(out, path, &expected, value);
    }

    fn check_object<'v>(
        &self,
        node: &Node,
        map: &'v Map<String, Value>,
        path: &mut Vec<Segment<'v>>,
        out: &mut Vec<Violation>,
        depth: u32,
    ) {
        // Required names that are properties are ticked off while walking the input, which
        // spares a hash lookup per name.
        let mark = out.len();
        let mut seen = Seen::new(node.properties.len());
        for (name, v) in map {
            match node
                .properties
                .binary_search_by(|(k, _)| k.as_str().cmp(name))
            {
                Ok(i) => {
                    seen.set(i);
                    path.push(Segment::Key(name));
                    self.check(&node.properties[i].1, v, path, out, depth + 1);
                    path.pop();
                }
                Err(_) => match &node.additional {
                    Additional::Allowed => {}
                    Additional::Forbidden => push(out, path, format!("unknown property {name:?}")),
                    Additional::Schema(schema) => {
                        path.push(Segment::Key(name));
                        self.check(schema, v, path, out, depth + 1);
                        path.pop();
                    }
                },
            }
        }
        let missing: Vec<Violation> = node
            .required_indexes
            .iter()
            .filter(|(name, index)| match index {
                Some(i) => !seen.get(*i),
                None => !map.contains_key(name),
            })
            .map(|(name, _)| Violation {
                path: render_path(path),
                message: format!("missing required property {name:?}"),
            })
            .collect();
        out.splice(mark..mark, missing);
    }
}

/// Which properties of an object were present: a bit mask, or a vector past 64.
enum Seen {
    Bits(u64),
    Many(Vec<bool>),
}

impl Seen {
    fn new(len: usize) -> Self {
        if len <= 64 {
            Seen::Bits(0)
        } else {
            Seen::Many(vec![false; len])
        }
    }

    fn set(&mut self, i: usize) {
        match self {
            Seen::Bits(bits) => *bits |= 1 << i,
            Seen::Many(v) => v[i] = true,
        }
    }

    fn get(&self, i: usize) -> bool {
        match self {
            Seen::Bits(bits) => bits & (1 << i) != 0,
            Seen::Many(v) => v[i],
        }
    }
}

fn check_count(
    min: Option<u64>,
    max: Option<u64>,
    len: usize,
    unit: &str,
    path: &[Segment<'_>],
    out: &mut Vec<Violation>,
) {
    let len = len as u64;
    if let Some(min) = min.filter(|&m| len < m) {
        push(
            out,
            path,
            format!("expected at least {min} {unit}{}, got {len}", plural(min)),
        );
    }
    if let Some(max) = max.filter(|&m| len > m) {
        push(
            out,
            path,
            format!("expected at most {max} {unit}{}, got {len}", plural(max)),
        );
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn check_range(node: &Node, n: f64, path: &[Segment<'_>], out: &mut Vec<Violation>) {
    let checks = [
        (
            node.minimum,
            ">=",
            n >= node.minimum.unwrap_or(f64::NEG_INFINITY),
        ),
        (
            node.maximum,
            "<=",
            n <= node.maximum.unwrap_or(f64::INFINITY),
        ),
        (
            node.exclusive_minimum,
            ">",
            n > node.exclusive_minimum.unwrap_or(f64::NEG_INFINITY),
        ),
        (
            node.exclusive_maximum,
            "<",
            n < node.exclusive_maximum.unwrap_or(f64::INFINITY),
        ),
    ];
    for (bound, op, ok) in checks {
        if let Some(bound) = bound.filter(|_| !ok) {
            push(
                out,
                path,
                format!("expected a number {op} {bound}, got number {n}"),
            );
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Segment<'v> {
    Key(&'v str),
    Index(usize),
}

/// Records `expected <what>, got <value>`.
fn mismatch(out: &mut Vec<Violation>, path: &[Segment<'_>], what: &str, value: &Value) {
    push(
        out,
        path,
        format!("expected {what}, got {}", describe_value(value)),
    );
}

fn push(out: &mut Vec<Violation>, path: &[Segment<'_>], message: String) {
    out.push(Violation {
        path: render_path(path),
        message,
    });
}

fn render_path(path: &[Segment<'_>]) -> String {
    let mut out = String::from("input");
    for segment in path {
        match segment {
            Segment::Key(k) if is_identifier(k) => {
                out.push('.');
                out.push_str(k);
            }
            Segment::Key(k) => {
                out.push('[');
                out.push_str(&Value::String((*k).to_owned()).to_string());
                out.push(']');
            }
            Segment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

fn is_identifier(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
