//! The check that a tool-use fence holds a JSON object, run while parsing.

use crate::messages as msg;

/// Checks that a tool-use fence body decodes to a JSON object (the language defaults to
/// `json`), without building the value.
///
/// The check runs `serde_json`'s own decoder over the text ([`Checked`] accepts what
/// `serde_json::Value` accepts, storing nothing), so whatever passes here decodes later in
/// [`ToolUse::input`](crate::ToolUse::input): numbers out of range, lone surrogates and inputs
/// nested deeper than [`MAX_INPUT_DEPTH`] are refused here, with a diagnostic, instead of being
/// read later as an empty input.
pub(crate) fn check_input(language: Option<&str>, content: &str) -> Result<(), String> {
    let language = language.unwrap_or("json");
    if language != "json" {
        return Err(format!("{}{language}", msg::NO_PARSER_PREFIX));
    }
    let mut de = serde_json::Deserializer::from_str(content);
    // `Checked` bounds the depth itself (iteratively cheap: one counter per level), with a
    // message that says why; serde_json's own limit would stop at the same depth.
    de.disable_recursion_limit();
    let kind = serde::de::DeserializeSeed::deserialize(Checked { depth: 1 }, &mut de)
        .and_then(|kind| de.end().map(|()| kind))
        .map_err(|err| err.to_string())?;
    match kind {
        JsonKind::Object => Ok(()),
        other => Err(format!("{}{}", msg::INPUT_NOT_OBJECT_PREFIX, other.name())),
    }
}

/// The deepest nesting of arrays and objects a tool input may have, the input object itself
/// counting as 1: `serde_json`'s recursion limit, which [`ToolUse::input`](crate::ToolUse::input)
/// and the providers' stream decoders apply. A deeper input is a diagnostic, never a
/// truncated or empty input.
pub const MAX_INPUT_DEPTH: usize = 127;

/// The JSON type of a checked value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JsonKind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl JsonKind {
    fn name(self) -> &'static str {
        match self {
            JsonKind::Null => "null",
            JsonKind::Bool => "a boolean",
            JsonKind::Number => "a number",
            JsonKind::String => "a string",
            JsonKind::Array => "an array",
            JsonKind::Object => "an object",
        }
    }
}

/// Validates one JSON value at nesting `depth` the way `serde_json::Value` decodes it, keeping
/// only its type.
#[derive(Debug, Clone, Copy)]
struct Checked {
    depth: usize,
}

impl Checked {
    /// The seed for a value inside this container.
    fn inner(self) -> Self {
        Self {
            depth: self.depth + 1,
        }
    }

    /// Refuses a container deeper than [`MAX_INPUT_DEPTH`] before anything inside it is read,
    /// so the decoder's recursion stays bounded however deep the text nests.
    fn enter<E: serde::de::Error>(self) -> Result<(), E> {
        if self.depth > MAX_INPUT_DEPTH {
            return Err(E::custom(format_args!(
                "the input nests deeper than {MAX_INPUT_DEPTH} levels (the most a tool input may)"
            )));
        }
        Ok(())
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Checked {
    type Value = JsonKind;

    fn deserialize<D: serde::Deserializer<'de>>(self, de: D) -> Result<JsonKind, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Checked {
    type Value = JsonKind;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<JsonKind, E> {
        Ok(JsonKind::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<JsonKind, E> {
        Ok(JsonKind::Bool)
    }

    fn visit_i64<E>(self, _: i64) -> Result<JsonKind, E> {
        Ok(JsonKind::Number)
    }

    fn visit_u64<E>(self, _: u64) -> Result<JsonKind, E> {
        Ok(JsonKind::Number)
    }

    fn visit_f64<E>(self, _: f64) -> Result<JsonKind, E> {
        Ok(JsonKind::Number)
    }

    fn visit_borrowed_str<E>(self, _: &'de str) -> Result<JsonKind, E> {
        Ok(JsonKind::String)
    }

    fn visit_str<E>(self, _: &str) -> Result<JsonKind, E> {
        Ok(JsonKind::String)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<JsonKind, A::Error> {
        self.enter()?;
        while seq.next_element_seed(self.inner())?.is_some() {}
        Ok(JsonKind::Array)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<JsonKind, A::Error> {
        self.enter()?;
        // A key is a string: it cannot nest, and it is checked as `Value` would check it.
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self.inner())?;
        }
        Ok(JsonKind::Object)
    }
}
