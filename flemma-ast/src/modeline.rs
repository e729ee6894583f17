//! The modeline tokenizer: `key=value` pairs and positionals with quoting and
//! coercion, as found inside the parentheses of a `**Tool Result:**` header.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::line::is_space;

/// A value produced by the modeline tokenizer.
///
/// Unquoted words are coerced: `true`/`false` become booleans, numeric literals numbers,
/// `nil`/`null`/empty text nothing, and words with a comma outside quotes lists. Quoted words are
/// always strings.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `nil`, `null` or an empty item (only inside lists).
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer literal.
    Integer(i64),
    /// Any other numeric literal.
    Float(f64),
    /// Text.
    String(String),
    /// Comma-separated items.
    List(Vec<Value>),
}

impl Value {
    /// The value as text when it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Writes the value so that the tokenizer reads it back unchanged.
    ///
    /// Strings that would be coerced (or that hold whitespace, quotes or commas) are quoted.
    pub(crate) fn write_token(&self, out: &mut String, positional: bool) {
        match self {
            Value::Null => out.push_str("nil"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Integer(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) => write_float(out, *f),
            Value::String(s) => write_string(out, s, positional),
            Value::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    match item {
                        Value::Null => {}
                        Value::List(_) => write_string(out, "", true),
                        other => other.write_token(out, true),
                    }
                }
                if items.len() < 2 {
                    out.push(',');
                }
            }
        }
    }
}

fn write_float(out: &mut String, f: f64) {
    if f.is_finite() {
        let mut text = format!("{f:?}");
        if !text.contains(['.', 'e', 'E']) {
            text.push_str(".0");
        }
        out.push_str(&text);
    } else {
        // Not producible by the tokenizer; keep it readable and string-typed on re-read.
        write_string(out, &f.to_string(), true);
    }
}

fn write_string(out: &mut String, s: &str, positional: bool) {
    let needs_quotes = s.is_empty()
        || s.contains(|c: char| {
            (c.is_ascii() && is_space(c as u8)) || matches!(c, '"' | '\'' | ',')
        })
        || coerce(s) != Value::String(s.to_owned())
        || (positional && keyword_split(s).is_some());
    let plain = !needs_quotes;
    if plain {
        out.push_str(s);
        return;
    }
    out.push('"');
    for c in s.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => serializer.serialize_none(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Integer(i) => serializer.serialize_i64(*i),
            Value::Float(f) => serializer.serialize_f64(*f),
            Value::String(s) => serializer.serialize_str(s),
            Value::List(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
        }
    }
}

/// The key of a modeline entry: a `key=` name or the 1-based index of a positional token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// A `key=value` entry.
    Named(String),
    /// The n-th positional token (1-based).
    Positional(u32),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Named(name) => f.write_str(name),
            Key::Positional(index) => write!(f, "{index}"),
        }
    }
}

/// The tokens of one modeline, in the order they were written.
///
/// Keyword entries whose value resolves to nothing are dropped; a later duplicate key replaces
/// the earlier value in place. Positional indexes advance for every positional token, so a
/// `nil` positional leaves a gap (see [`Modeline::positionals`]).
///
/// ```
/// use flemma_ast::modeline::{self, Key, Value};
///
/// let line = modeline::parse(r#"error job=job_k7x2m tags=a,b note="two words""#);
/// assert_eq!(line.get(&Key::Positional(1)), Some(&Value::String("error".into())));
/// assert_eq!(line.named("job"), Some(&Value::String("job_k7x2m".into())));
/// assert_eq!(
///     line.named("tags"),
///     Some(&Value::List(vec![Value::String("a".into()), Value::String("b".into())]))
/// );
/// assert_eq!(line.named("note").and_then(Value::as_str), Some("two words"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Modeline {
    entries: Vec<(Key, Value)>,
}

impl Modeline {
    /// An empty modeline.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Value)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value of the `name=` entry.
    pub fn named(&self, name: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| matches!(k, Key::Named(n) if n == name))
            .map(|(_, v)| v)
    }

    /// Positional values from index 1 upwards, stopping at the first gap.
    pub fn positionals(&self) -> impl Iterator<Item = &Value> {
        let mut positionals: Vec<(u32, &Value)> = self
            .entries
            .iter()
            .filter_map(|(k, v)| match k {
                Key::Positional(i) => Some((*i, v)),
                Key::Named(_) => None,
            })
            .collect();
        positionals.sort_by_key(|(i, _)| *i);
        positionals
            .into_iter()
            .zip(1..)
            .map_while(|((index, value), expected)| (index == expected).then_some(value))
    }

    /// Sets `key` to `value`, replacing an existing entry in place.
    pub fn insert(&mut self, key: Key, value: Value) {
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Removes and returns the value under `key`.
    pub fn remove(&mut self, key: &Key) -> Option<Value> {
        let index = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(index).1)
    }

    /// Renumbers positional entries 1..n, keeping their order.
    pub(crate) fn renumber_positionals(&mut self) {
        let mut next = 1;
        for (key, _) in &mut self.entries {
            if let Key::Positional(index) = key {
                *index = next;
                next += 1;
            }
        }
    }

    /// Writes the entries as modeline tokens, positionals as bare values.
    ///
    /// Reading the text back with [`parse`] gives an equal modeline when positional indexes are
    /// 1..n in order (as [`crate::ToolResult::meta`] keeps them).
    pub fn to_modeline_string(&self) -> String {
        let mut out = String::new();
        self.write_tokens(&mut out);
        out
    }

    pub(crate) fn write_tokens(&self, out: &mut String) {
        for (key, value) in &self.entries {
            if !out.is_empty() {
                out.push(' ');
            }
            match key {
                Key::Named(name) => {
                    out.push_str(name);
                    out.push('=');
                    value.write_token(out, false);
                }
                Key::Positional(_) => value.write_token(out, true),
            }
        }
    }
}

impl Serialize for Modeline {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.entries.len()))?;
        for (key, value) in &self.entries {
            map.serialize_entry(&key.to_string(), value)?;
        }
        map.end()
    }
}

/// Tokenizes a modeline.
///
/// Never fails: an unterminated quote runs to the end of the input.
pub fn parse(input: &str) -> Modeline {
    let mut line = Modeline::new();
    // Where each key sits in `line`, so that many tokens stay linear.
    let mut slots: HashMap<Key, usize> = HashMap::new();
    let mut positional = 0;
    for raw in split_tokens(input) {
        let (key, value) = if let Some((key, value)) = keyword_split(raw) {
            (Key::Named(key.to_owned()), resolve(value))
        } else {
            positional += 1;
            (Key::Positional(positional), resolve(raw))
        };
        if value == Value::Null {
            continue;
        }
        if let Some(&slot) = slots.get(&key) {
            line.entries[slot].1 = value;
        } else {
            slots.insert(key.clone(), line.entries.len());
            line.entries.push((key, value));
        }
    }
    line
}

/// Splits on whitespace outside quotes; quote characters stay in the tokens.
fn split_tokens(input: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut start = None;
    for (i, b, outside) in outside_quotes(input.as_bytes()) {
        if !outside {
            continue;
        }
        if is_space(b) {
            if let Some(s) = start.take() {
                tokens.push(&input[s..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        tokens.push(&input[s..]);
    }
    tokens
}

/// Each byte with its offset and whether it is outside quotes (`"…"`, `'…'`, inside which `\`
/// escapes the quote and itself): an opening quote is outside, the rest of its string inside.
fn outside_quotes(bytes: &[u8]) -> impl Iterator<Item = (usize, u8, bool)> + '_ {
    let mut quote = None;
    let mut escaped = false;
    bytes.iter().enumerate().map(move |(i, &b)| {
        let Some(q) = quote else {
            if b == b'"' || b == b'\'' {
                quote = Some(b);
            }
            return (i, b, true);
        };
        if escaped {
            escaped = false;
        } else if b == b'\\' && bytes.get(i + 1).is_some_and(|&n| n == q || n == b'\\') {
            escaped = true;
        } else if b == q {
            quote = None;
        }
        (i, b, false)
    })
}

/// `^([A-Za-z0-9_]+)=(.*)$`
fn keyword_split(raw: &str) -> Option<(&str, &str)> {
    let eq = raw.find('=')?;
    let key = &raw[..eq];
    (!key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .then(|| (key, &raw[eq + 1..]))
}

fn resolve(raw: &str) -> Value {
    if let Some(inner) = fully_quoted(raw) {
        return Value::String(unescape(inner, raw.as_bytes()[0]));
    }
    let commas = commas_outside_quotes(raw);
    if !commas.is_empty() {
        let mut items = Vec::with_capacity(commas.len() + 1);
        let mut start = 0;
        for comma in commas {
            items.push(resolve(&raw[start..comma]));
            start = comma + 1;
        }
        items.push(resolve(&raw[start..]));
        while items.last() == Some(&Value::Null) {
            items.pop();
        }
        return Value::List(items);
    }
    coerce(raw)
}

/// The inner text when `raw` is one quoted region from its first to its last character.
fn fully_quoted(raw: &str) -> Option<&str> {
    let bytes = raw.as_bytes();
    let q = *bytes.first()?;
    if bytes.len() < 2 || (q != b'"' && q != b'\'') {
        return None;
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\\' && i + 1 < bytes.len() && (bytes[i + 1] == q || bytes[i + 1] == b'\\') {
            i += 2;
            continue;
        }
        if b == q {
            return (i == bytes.len() - 1).then(|| &raw[1..i]);
        }
        i += 1;
    }
    None
}

fn unescape(inner: &str, quote: u8) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&next) = chars.peek()
            && (next == char::from(quote) || next == '\\')
        {
            out.push(next);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

fn commas_outside_quotes(raw: &str) -> Vec<usize> {
    outside_quotes(raw.as_bytes())
        .filter(|&(_, b, outside)| outside && b == b',')
        .map(|(i, ..)| i)
        .collect()
}

fn coerce(raw: &str) -> Value {
    match raw {
        "" | "nil" | "null" => Value::Null,
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => parse_number(raw).unwrap_or_else(|| Value::String(raw.to_owned())),
    }
}

/// Numeric literals as Lua's `tonumber` reads them: decimal with optional fraction and exponent,
/// or hexadecimal integers.
fn parse_number(raw: &str) -> Option<Value> {
    let (negative, body) = match raw.as_bytes().first()? {
        b'-' => (true, &raw[1..]),
        b'+' => (false, &raw[1..]),
        _ => (false, raw),
    };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let value = i64::from_str_radix(hex, 16).ok()?;
        return Some(Value::Integer(if negative { -value } else { value }));
    }
    if !is_decimal_literal(body) {
        return None;
    }
    if body.bytes().all(|b| b.is_ascii_digit())
        && let Ok(value) = raw.trim_start_matches('+').parse::<i64>()
    {
        return Some(Value::Integer(value));
    }
    raw.trim_start_matches('+')
        .parse::<f64>()
        .ok()
        .map(Value::Float)
}

fn is_decimal_literal(body: &str) -> bool {
    let bytes = body.as_bytes();
    let mut i = 0;
    let int_digits = count_digits(&bytes[i..]);
    i += int_digits;
    let mut frac_digits = 0;
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = count_digits(&bytes[i..]);
        i += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = count_digits(&bytes[i..]);
        if exp_digits == 0 {
            return false;
        }
        i += exp_digits;
    }
    i == bytes.len()
}

fn count_digits(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

#[cfg(test)]
mod tests;
