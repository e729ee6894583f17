//! Request bodies as a tree that borrows from the prompt, written straight to JSON.
//!
//! The adapters build a [`RequestBody`] instead of a `serde_json::Value`: text, tool inputs and
//! signatures stay borrowed from the [`Prompt`](crate::Prompt) (and so from the document), and
//! the body is serialized once, keys sorted as it goes. Building a request thus costs little
//! more than writing it.

use std::borrow::Cow;
use std::fmt;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{Map, Number, Value};

use crate::request::Sorted;

/// A JSON value of a request body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Number(Box<Number>),
    Str(Cow<'a, str>),
    /// Any JSON (a declaration); its objects' keys are written sorted. Boxed: a body holds
    /// few of them and many small values, which stay a third of the size.
    Value(Box<Value>),
    /// A tool declaration shared with other bodies (built once, see
    /// [`Declared`](crate::adapters::Declared)); keys written sorted.
    Shared(std::sync::Arc<Declaration>),
    /// A borrowed JSON object (a tool input), keys written sorted.
    Map(&'a Map<String, Value>),
    Array(Vec<Json<'a>>),
    /// An object whose entries are sorted by key (see [`Json::object`]).
    Object(Vec<(&'static str, Json<'a>)>),
}

/// A tool declaration as the bodies that offer the tool share it: its JSON, and the text
/// [`RequestBody::to_json`] writes for it (keys sorted), made once.
#[derive(Debug, PartialEq)]
pub(crate) struct Declaration {
    pub(crate) value: Value,
    text: String,
}

impl Declaration {
    pub(crate) fn new(value: Value) -> Self {
        // Writing to a String cannot fail, and every key is a string.
        let text = serde_json::to_string(&Sorted(&value)).unwrap_or_default();
        Self { value, text }
    }
}

impl<'a> Json<'a> {
    /// An object from its entries, in any order; the keys must be unique.
    pub(crate) fn object(mut entries: Vec<(&'static str, Json<'a>)>) -> Self {
        entries.sort_unstable_by_key(|(k, _)| *k);
        Json::Object(entries)
    }

    /// Inserts (or replaces) `key` of an object, keeping the keys sorted; nothing for another
    /// value.
    pub(crate) fn insert(&mut self, key: &'static str, value: Json<'a>) {
        if let Json::Object(entries) = self {
            match entries.binary_search_by_key(&key, |(k, _)| *k) {
                Ok(i) => entries[i].1 = value,
                Err(i) => entries.insert(i, (key, value)),
            }
        }
    }

    /// The value as a `serde_json::Value`.
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number((**n).clone()),
            Json::Str(s) => Value::String(s.as_ref().to_owned()),
            Json::Value(v) => (**v).clone(),
            Json::Shared(d) => d.value.clone(),
            Json::Map(m) => Value::Object((*m).clone()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

impl Json<'_> {
    /// Appends the JSON text of the value to `out`: what its [`Serialize`] gives through
    /// `serde_json`, a shared declaration's text copied as it was written once.
    fn write_json(&self, out: &mut Vec<u8>) {
        match self {
            Json::Shared(declaration) => out.extend_from_slice(declaration.text.as_bytes()),
            Json::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write_json(out);
                }
                out.push(b']');
            }
            Json::Object(entries) => {
                out.push(b'{');
                for (i, (key, value)) in entries.iter().enumerate() {
                    write_entry(out, i, key, value);
                }
                out.push(b'}');
            }
            // Writing to a Vec cannot fail, and every key is a string.
            other => {
                let _ = serde_json::to_writer(&mut *out, other);
            }
        }
    }
}

/// Appends `"key":value` to an object's text in `out`, after a comma unless it is the first.
fn write_entry(out: &mut Vec<u8>, i: usize, key: &str, value: &Json<'_>) {
    if i > 0 {
        out.push(b',');
    }
    let _ = serde_json::to_writer(&mut *out, key);
    out.push(b':');
    value.write_json(out);
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::Str(s) => serializer.serialize_str(s),
            Json::Value(v) => Sorted(v).serialize(serializer),
            Json::Shared(d) => Sorted(&d.value).serialize(serializer),
            Json::Map(m) => Sorted::map(m, serializer),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'a> From<&'a str> for Json<'a> {
    fn from(s: &'a str) -> Self {
        Json::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Json<'_> {
    fn from(s: String) -> Self {
        Json::Str(Cow::Owned(s))
    }
}

impl<'a> From<Cow<'a, str>> for Json<'a> {
    fn from(s: Cow<'a, str>) -> Self {
        Json::Str(s)
    }
}

impl<'a> From<&'a Cow<'_, str>> for Json<'a> {
    fn from(s: &'a Cow<'_, str>) -> Self {
        Json::Str(Cow::Borrowed(s.as_ref()))
    }
}

impl From<bool> for Json<'_> {
    fn from(b: bool) -> Self {
        Json::Bool(b)
    }
}

impl From<u64> for Json<'_> {
    fn from(n: u64) -> Self {
        Json::Number(Box::new(n.into()))
    }
}

impl From<f64> for Json<'_> {
    fn from(n: f64) -> Self {
        Number::from_f64(n).map_or(Json::Null, |n| Json::Number(Box::new(n)))
    }
}

impl From<Value> for Json<'_> {
    fn from(v: Value) -> Self {
        Json::Value(Box::new(v))
    }
}

impl<'a> From<Vec<Json<'a>>> for Json<'a> {
    fn from(items: Vec<Json<'a>>) -> Self {
        Json::Array(items)
    }
}

/// `obj! { "key": value, … }`: a [`Json::Object`], values converted with `Json::from`.
macro_rules! obj {
    ($($key:literal : $value:expr),* $(,)?) => {
        $crate::body::Json::object(vec![$(($key, $crate::body::Json::from($value))),*])
    };
}
pub(crate) use obj;

/// A provider request body, ready to send.
///
/// It borrows from the [`Prompt`](crate::Prompt) it was built from. [`to_json`](Self::to_json)
/// writes the exact bytes to send: keys sorted at every level, except that the conversation
/// and the tools come last at the top level, so that the stable prefix of the body stays
/// byte-identical across turns (prompt caching). [`to_value`](Self::to_value) gives a
/// `serde_json::Value` to inspect.
///
/// ```
/// use flemma_providers::{RequestOptions, anthropic_request, build_prompt};
///
/// let doc = flemma_ast::parse("@You:\nHi!\n");
/// let prompt = build_prompt(&doc);
/// let body = anthropic_request(&prompt, &RequestOptions::new("claude-sonnet-4-5"));
/// assert_eq!(body.to_value()["messages"][0]["role"], "user");
/// assert!(body.to_json().ends_with(
///     r#""messages":[{"content":[{"cache_control":{"type":"ephemeral"},"text":"Hi!","type":"text"}],"role":"user"}]}"#
/// ));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RequestBody<'a> {
    /// The top-level entries, sorted by key.
    fields: Json<'a>,
    /// The keys written last, in this order.
    trailing: &'static [&'static str],
}

impl<'a> RequestBody<'a> {
    pub(crate) fn new(fields: Json<'a>, trailing: &'static [&'static str]) -> Self {
        Self { fields, trailing }
    }

    /// The top-level keys written last, in their order (`["system", "tools", "messages"]`
    /// for Anthropic).
    pub fn trailing_keys(&self) -> &'static [&'static str] {
        self.trailing
    }

    /// The exact JSON text to send (what the body's [`Serialize`] gives through `serde_json`;
    /// the tool declarations, the same in every request, are copied from the text made when
    /// each was built).
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(16 * 1024);
        match &self.fields {
            Json::Object(entries) => {
                out.push(b'{');
                let last = self
                    .trailing
                    .iter()
                    .filter_map(|key| entries.iter().find(|(k, _)| k == key));
                let ordered = entries
                    .iter()
                    .filter(|(k, _)| !self.trailing.contains(k))
                    .chain(last);
                for (i, (key, value)) in ordered.enumerate() {
                    write_entry(&mut out, i, key, value);
                }
                out.push(b'}');
            }
            other => other.write_json(&mut out),
        }
        // serde_json writes UTF-8 only, and the declarations' texts are its output.
        String::from_utf8(out).unwrap_or_default()
    }

    /// The body as a `serde_json::Value` (copies everything it borrows).
    pub fn to_value(&self) -> Value {
        self.fields.to_value()
    }
}

impl fmt::Display for RequestBody<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl Serialize for RequestBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Json::Object(entries) = &self.fields else {
            return self.fields.serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(entries.len()))?;
        for (k, v) in entries {
            if !self.trailing.contains(k) {
                map.serialize_entry(k, v)?;
            }
        }
        for key in self.trailing {
            if let Some((k, v)) = entries.iter().find(|(k, _)| k == key) {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_stay_small() {
        // A text block's value is a string: the boxed variants keep every value at 32 bytes.
        assert!(std::mem::size_of::<Json<'_>>() <= 32);
    }

    #[test]
    fn objects_write_sorted_keys_and_the_trailing_ones_last() {
        let input: Map<String, Value> =
            serde_json::from_str(r#"{"b":1,"a":{"d":2,"c":3}}"#).unwrap();
        let mut fields = obj! {
            "messages": vec![obj! {"z": true, "y": "text"}],
            "model": "m",
            "tools": json!([{"name": "t", "a": null}]),
            "input": Json::Map(&input),
        };
        fields.insert("max_tokens", Json::from(5u64));
        let body = RequestBody::new(fields, &["tools", "messages"]);
        assert_eq!(
            body.to_json(),
            r#"{"input":{"a":{"c":3,"d":2},"b":1},"max_tokens":5,"model":"m","tools":[{"a":null,"name":"t"}],"messages":[{"y":"text","z":true}]}"#
        );
        assert_eq!(
            crate::body_to_string(&body.to_value(), body.trailing_keys()),
            body.to_json()
        );
    }

    /// `to_json` writes what the body's `Serialize` gives through `serde_json`, a shared
    /// declaration (copied from its text) and escapes included.
    #[test]
    fn the_text_written_is_what_serde_writes() {
        let declaration = std::sync::Arc::new(Declaration::new(json!({
            "name": "t\"ool\u{1}",
            "input_schema": {"type": "object", "properties": {"b": {}, "a": {"x": [1.5, -2, "é"]}}},
        })));
        let input: Map<String, Value> = serde_json::from_str(r#"{"z":"\n","y":[null]}"#).unwrap();
        let fields = obj! {
            "tools": Json::Array(vec![
                Json::Shared(std::sync::Arc::clone(&declaration)),
                Json::Shared(declaration),
            ]),
            "messages": vec![obj! {"content": "line\n\"quoted\"\t", "input": Json::Map(&input)}],
            "temperature": Json::from(0.25),
            "stream": true,
            "stop": Json::Null,
            "empty": Json::Array(Vec::new()),
            "nothing": obj! {},
        };
        for trailing in [&[][..], &["tools", "messages"][..], &["absent"][..]] {
            let body = RequestBody::new(fields.clone(), trailing);
            let written = body.to_json();
            assert_eq!(written, serde_json::to_string(&body).unwrap());
            assert_eq!(
                crate::body_to_string(&body.to_value(), body.trailing_keys()),
                written
            );
        }
        let bare = RequestBody::new(Json::Array(vec![Json::from("a")]), &[]);
        assert_eq!(bare.to_json(), r#"["a"]"#);
    }
}
