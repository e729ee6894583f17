//! Request bodies: a provider-neutral [`Prompt`](crate::Prompt) encoded for each provider.

pub(crate) mod anthropic;
pub(crate) mod chat;
pub(crate) mod openai;
pub(crate) mod vertex;

use std::sync::{Arc, Mutex, PoisonError};

use flemma_schema::{Dialect, ToolSpec};
use serde_json::Value;

use crate::body::{Declaration, Json};
use crate::prompt::{Part, PromptMessage, PromptRole};
use crate::request::RequestOptions;
use crate::template::FilePart;
use flemma_ids::encode_tool_name;

/// The tool declarations of one request format built lately: a session offers the same tools
/// in every request, so each declaration is built once (the spec's
/// [`to_provider`](flemma_schema::ToolSpec::to_provider) and what the adapter adds) and
/// shared by the bodies after, for as long as the spec is the same.
pub(crate) struct Declared {
    dialect: Dialect,
    /// What the adapter adds to each declaration.
    finish: fn(&mut Value),
    /// The specs and their declarations, the newest last.
    built: Mutex<Vec<(ToolSpec, Arc<Declaration>)>>,
}

/// At most this many declarations are kept by each [`Declared`] (the oldest go first).
const DECLARED: usize = 64;

impl Declared {
    pub(crate) const fn new(dialect: Dialect, finish: fn(&mut Value)) -> Self {
        Self {
            dialect,
            finish,
            built: Mutex::new(Vec::new()),
        }
    }

    /// The offered tools declared, in the options' order. A tool whose declaration cannot be
    /// built (an unresolvable `$ref`) is left out.
    pub(crate) fn of(&self, options: &RequestOptions) -> Vec<Arc<Declaration>> {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        options
            .tools
            .iter()
            .filter_map(|spec| {
                if let Some((_, declared)) = built.iter().find(|(known, _)| same_spec(known, spec))
                {
                    return Some(Arc::clone(declared));
                }
                let mut declaration = spec.to_provider(self.dialect).ok()?;
                (self.finish)(&mut declaration);
                let declared = Arc::new(Declaration::new(declaration));
                if built.len() >= DECLARED {
                    built.remove(0);
                }
                built.push((spec.clone(), Arc::clone(&declared)));
                Some(declared)
            })
            .collect()
    }
}

/// Whether two specs are equal; the question every request asks of every offered tool, whose
/// spec is then a clone of the one declared, so its schema is first compared entry by entry in
/// order (no key looked up), and only when that differs as JSON objects compare (any order).
fn same_spec(known: &ToolSpec, spec: &ToolSpec) -> bool {
    known.name == spec.name
        && known.strict == spec.strict
        && known.description == spec.description
        && (same_in_order(&known.input_schema, &spec.input_schema)
            || known.input_schema == spec.input_schema)
}

/// Whether `a` and `b` are equal with every object's entries in the same order (equal JSON
/// then; `false` says nothing).
fn same_in_order(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && same_in_order(va, vb))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_in_order(a, b))
        }
        (a, b) => a == b,
    }
}

/// Adds nothing to a declaration.
pub(crate) fn as_declared(_: &mut Value) {}

/// Sets `tools` to the offered tools declared by `declared`, with `tool_choice: "auto"`, when
/// any is offered (the OpenAI formats).
fn insert_tools(body: &mut Json<'_>, options: &RequestOptions, declared: &Declared) {
    let tools: Vec<Json<'_>> = declared.of(options).into_iter().map(Json::Shared).collect();
    if !tools.is_empty() {
        body.insert("tools", Json::Array(tools));
        body.insert("tool_choice", Json::from("auto"));
    }
}

/// The prefix of the synthetic tool-call ids the Vertex decoder makes.
const SYNTHETIC_ID_PREFIX: &str = "urn:flemma:tool:";

/// The wire name sent with a tool result: the matching tool use's name, else the name inside
/// a synthetic id `urn:flemma:tool:<name>:<suffix>`.
fn result_name<'a>(
    name: Option<&'a str>,
    tool_use_id: &'a str,
) -> Option<std::borrow::Cow<'a, str>> {
    name.map(encode_tool_name).or_else(|| {
        let (name, _suffix) = tool_use_id
            .strip_prefix(SYNTHETIC_ID_PREFIX)?
            .rsplit_once(':')?;
        (!name.is_empty()).then(|| encode_tool_name(name))
    })
}

/// Tool-result parts as one text, for providers whose results are text only: text and text
/// files as they are, other files as `[binary file: <name> (<mime>)]`.
fn text_with_file_names<'p>(parts: &'p [Part<'_>]) -> std::borrow::Cow<'p, str> {
    if let Some(text) = Part::textual(parts) {
        return text;
    }
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Text { text } => out.push_str(text),
            Part::File(file) => out.push_str(&file.as_text_fallback()),
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The `[binary file: <name>]` text Anthropic and OpenAI are sent for an unsupported file.
fn unsupported_text(file: &FilePart) -> String {
    format!("[binary file: {}]", file.filename())
}

/// The messages as (role, parts), with consecutive messages of one role merged when `merge`
/// says so for that role.
fn merged<'p, 'd>(
    messages: &'p [PromptMessage<'d>],
    merge: impl Fn(PromptRole) -> bool,
) -> Vec<(PromptRole, Vec<&'p Part<'d>>)> {
    let mut out: Vec<(PromptRole, Vec<&'p Part<'d>>)> = Vec::with_capacity(messages.len());
    for message in messages {
        match out.last_mut() {
            Some((role, parts)) if *role == message.role && merge(*role) => {
                parts.extend(&message.parts);
            }
            _ => out.push((message.role, message.parts.iter().collect())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn spec(schema: Value) -> ToolSpec {
        ToolSpec {
            name: flemma_ids::ToolName::new("bash").unwrap_or_else(|e| panic!("{e}")),
            description: "Runs a command.".to_owned(),
            input_schema: schema,
            strict: false,
        }
    }

    #[test]
    fn a_spec_is_the_same_as_its_clone_and_as_its_keys_in_another_order() {
        let a = spec(json!({"type": "object", "properties": {"a": {}, "b": {"x": [1, 2]}}}));
        assert!(same_spec(&a, &a.clone()));
        let reordered =
            spec(json!({"properties": {"b": {"x": [1, 2]}, "a": {}}, "type": "object"}));
        assert!(!same_in_order(&a.input_schema, &reordered.input_schema));
        assert!(same_spec(&a, &reordered));
        let other = spec(json!({"type": "object", "properties": {"a": {}, "b": {"x": [2, 1]}}}));
        assert!(!same_spec(&a, &other));
        let mut described = a.clone();
        described.description.push('.');
        assert!(!same_spec(&a, &described));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (-3_i64..3).prop_map(Value::from),
            "[ab]{0,2}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[abc]", inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Entry by entry in order never calls two different values the same, and a value is
        /// always the same as its clone.
        #[test]
        fn in_order_equality_implies_equality(a in json_value(), b in json_value()) {
            if same_in_order(&a, &b) {
                prop_assert_eq!(&a, &b);
            }
            prop_assert!(same_in_order(&a, &a.clone()));
        }
    }
}
