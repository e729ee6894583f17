//! What a server wrote on stdout that flemma could not decode, and which request it answered.
//!
//! A message that cannot be decoded (over the size limit, not UTF-8, not JSON, no JSON-RPC
//! message) would otherwise be dropped, and the call it answered would wait for its
//! `tool_timeout`. The request it answered is found from the message's `id`, read from the
//! message when it is JSON, else from its first members (`{"jsonrpc":"2.0","id":7,…`, as
//! rmcp and the Python SDK write) or its last (`…,"jsonrpc":"2.0","id":7}`, as the TypeScript
//! SDK writes).

use std::sync::Arc;

use rmcp::model::RequestId;
use serde_json::Value;

/// Why a message from the server could not be decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum DecodeError {
    /// The line is longer than the limit (the rest of it was dropped, never held).
    #[error("the message is over the size limit of {} MiB ({limit} bytes; {size} received)", limit / (1024 * 1024))]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
        /// The message's size, in bytes.
        size: usize,
    },
    /// The line is not UTF-8.
    #[error("the message is not valid UTF-8")]
    InvalidUtf8(#[source] std::str::Utf8Error),
    /// The line is not JSON (truncated, or not JSON at all).
    #[error("the message is not valid JSON")]
    InvalidJson(#[source] Arc<serde_json::Error>),
    /// The line is JSON but no JSON-RPC message of MCP.
    #[error("the message is not a JSON-RPC message flemma can read")]
    NotJsonRpc(#[source] Arc<serde_json::Error>),
}

/// The `id` of a message, when `value` is a JSON-RPC answer (it has no `method`).
pub(crate) fn answer_id(value: &Value) -> Option<RequestId> {
    let object = value.as_object()?;
    if object.contains_key("method") {
        return None;
    }
    scalar_id(object.get("id")?)
}

fn scalar_id(value: &Value) -> Option<RequestId> {
    match value {
        Value::Number(_) | Value::String(_) => serde_json::from_value(value.clone()).ok(),
        _ => None,
    }
}

/// The `id` among the first members of the object `head` starts, read as long as their
/// values are scalars.
pub(crate) fn head_id(head: &[u8]) -> Option<RequestId> {
    let mut at = skip_ws(head, 0);
    if head.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        at = skip_ws(head, at);
        let key_end = string_end(head, at)?;
        let key: String = serde_json::from_slice(&head[at..key_end]).ok()?;
        at = skip_ws(head, key_end);
        if head.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(head, at + 1);
        let value_end = match head.get(at)? {
            b'"' => string_end(head, at)?,
            b'{' | b'[' => return None,
            _ => {
                at + head[at..]
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n'))?
            }
        };
        if key == "id" {
            let value: Value = serde_json::from_slice(&head[at..value_end]).ok()?;
            return scalar_id(&value);
        }
        at = skip_ws(head, value_end);
        if head.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
}

/// The `id` of the object `end` ends, when it is its last member (`…,"id":7}`): a nested
/// object's closing brace would follow the value otherwise.
pub(crate) fn tail_id(end: &[u8]) -> Option<RequestId> {
    let end = trim_end(end);
    let end = trim_end(end.strip_suffix(b"}")?);
    let value_start = if end.ends_with(b"\"") {
        let inner = &end[..end.len() - 1];
        let start = inner.iter().rposition(|b| {
            !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
        })?;
        if inner[start] != b'"' {
            return None;
        }
        start
    } else {
        end.iter()
            .rposition(|b| !(b.is_ascii_digit() || *b == b'-'))
            .map_or(0, |at| at + 1)
    };
    let value: Value = serde_json::from_slice(&end[value_start..]).ok()?;
    let before = trim_end(trim_end(&end[..value_start]).strip_suffix(b":")?);
    let before = trim_end(before.strip_suffix(b"\"id\"")?);
    matches!(before.last(), Some(b',' | b'{')).then(|| scalar_id(&value))?
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

fn trim_end(bytes: &[u8]) -> &[u8] {
    let len = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |at| at + 1);
    &bytes[..len]
}

/// The end (past the closing quote) of the JSON string starting at `at`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    while let Some(b) = bytes.get(i) {
        match b {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    #[expect(
        clippy::unnecessary_wraps,
        reason = "compared with what the scanners return"
    )]
    fn n(id: i64) -> Option<RequestId> {
        Some(NumberOrString::Number(id))
    }

    #[test]
    fn the_id_is_read_from_the_first_members() {
        assert_eq!(
            head_id(br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"#),
            n(7)
        );
        assert_eq!(
            head_id(br#" { "id" : "a-1" , "result": "#),
            Some(NumberOrString::String("a-1".into()))
        );
        assert_eq!(head_id(br#"{"jsonrpc":"2.\"0","id":3}"#), n(3));
        // Stops at the first value that is not a scalar.
        assert_eq!(head_id(br#"{"result":{"id":5},"id":7}"#), None);
        assert_eq!(head_id(br#"{"jsonrpc":"2.0","#), None);
        assert_eq!(head_id(b"not json"), None);
    }

    #[test]
    fn the_id_is_read_from_the_last_member() {
        assert_eq!(tail_id(br#"xxxx"}]},"jsonrpc":"2.0","id":12}"#), n(12));
        assert_eq!(tail_id(b"xx\"}]},\"id\": -4 }\r"), n(-4));
        assert_eq!(
            tail_id(br#"x"},"id":"req-9"}"#),
            Some(NumberOrString::String("req-9".into()))
        );
        // A nested object's `id` is not the message's.
        assert_eq!(tail_id(br#"{"structuredContent":{"id":3}}}"#), None);
        // Inside a string: the quote before `id` is escaped, so no `,` or `{` precedes it.
        assert_eq!(tail_id(br#"\"id\":3}"#), None);
        assert_eq!(tail_id(br"xxxxx"), None);
    }

    #[test]
    fn an_answer_has_no_method() {
        let answer: Value = serde_json::json!({"jsonrpc": "2.0", "id": 4, "result": "x"});
        assert_eq!(answer_id(&answer), n(4));
        let request: Value = serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "ping"});
        assert_eq!(answer_id(&request), None);
    }
}
