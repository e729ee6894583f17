//! The protocol's framing as `flemma lsp` reads it on standard input ([`flemma_lsp::serve_io`],
//! what `serve_stdio` runs): frames that are not messages are refused, answered when they
//! have an id, and the server goes on to answer the next request.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use flemma_lsp::{MAX_FRAME, ServerOptions};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Standard output, shared with the test.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn frame(message: &Value) -> String {
    let body = message.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len())
}

/// The messages written in the protocol's framing.
fn messages(out: &[u8]) -> Vec<Value> {
    let mut rest = out;
    let mut messages = Vec::new();
    while !rest.is_empty() {
        let text = String::from_utf8_lossy(rest);
        let end = text.find("\r\n\r\n").unwrap();
        let length: usize = text[..end]
            .strip_prefix("Content-Length: ")
            .unwrap()
            .parse()
            .unwrap();
        let body = &rest[end + 4..end + 4 + length];
        messages.push(serde_json::from_slice(body).unwrap());
        rest = &rest[end + 4 + length..];
    }
    messages
}

#[test]
fn frames_that_are_not_messages_are_refused_and_the_server_goes_on() {
    let request = |id: Value| json!({"jsonrpc": "2.0", "id": id, "method": "x/unknown"});
    let input = [
        frame(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})),
        frame(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})),
        // Lengths that overflowed an allocation, then aborted on one.
        format!("Content-Length: {}\r\n\r\n{}", u64::MAX, request(json!(2))),
        format!("Content-Length: 100000000000\r\n\r\n{}", request(json!("three"))),
        format!("Content-Length: {}\r\n\r\n{}", MAX_FRAME + 1, request(json!(4))),
        // Not a number, missing, a garbage line (escape sequences are not echoed raw).
        format!("Content-Length: 1e3\r\n\r\n{}", request(json!(5))),
        format!("Content-Type: text\r\n\r\n{}", request(json!(6))),
        "\u{1b}]0;pwned\u{7}\r\n".to_owned(),
        frame(&json!({"jsonrpc": "2.0", "id": 7, "method": "x/unknown"})),
        frame(&json!({"jsonrpc": "2.0", "id": 8, "method": 8})),
        "Content-Length: 5\r\n\r\nhello".to_owned(),
        frame(&json!({"jsonrpc": "2.0", "id": 9, "method": "shutdown"})),
        frame(&json!({"jsonrpc": "2.0", "method": "exit"})),
    ]
    .concat();
    let output = Output::default();
    let served = flemma_lsp::serve_io(
        ServerOptions::default(),
        std::io::Cursor::new(input.into_bytes()),
        output.clone(),
    );
    assert!(served.is_ok(), "{served:?}");
    let out = output.0.lock().unwrap().clone();
    let messages = messages(&out);
    // In the order of their ids: a refusal is answered as the frame is read, and may come
    // before the answers to the requests before it.
    let answers: BTreeMap<String, Value> = messages
        .iter()
        .filter(|m| m.get("id").is_some())
        .map(|m| (m["id"].to_string(), m["error"]["code"].clone()))
        .collect();
    // Refused frames with an id: `InvalidRequest`; the unknown method: `MethodNotFound`.
    assert_eq!(
        answers,
        BTreeMap::from(
            [
                (json!(1), Value::Null),
                (json!(2), json!(-32600)),
                (json!("three"), json!(-32600)),
                (json!(4), json!(-32600)),
                (json!(5), json!(-32600)),
                (json!(6), json!(-32600)),
                (json!(7), json!(-32601)),
                (json!(8), json!(-32600)),
                (json!(9), Value::Null),
            ]
            .map(|(id, code)| (id.to_string(), code))
        )
    );
    let logged: Vec<&str> = messages
        .iter()
        .filter(|m| m["method"] == "window/logMessage")
        .map(|m| m["params"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert!(logged[0].contains(r#""\u{1b}]0;pwned\u{7}""#), "{logged:?}");
    assert!(logged[1].contains("not JSON"), "{logged:?}");
    assert!(!String::from_utf8_lossy(&out).contains('\u{1b}'));
    let error = |id: Value| {
        messages.iter().find(|m| m["id"] == id).unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        error(json!(2))
            .contains("Content-Length 18446744073709551615 is over the limit of 67108864 bytes"),
        "{}",
        error(json!(2))
    );
    assert!(error(json!(5)).contains(r#"Content-Length "1e3" is not a length"#));
    assert!(error(json!(6)).contains("no Content-Length"));
}
