//! Error bodies of every shape become a status and the provider's message.

use flemma_providers::{ProviderError, error_from_body};
use pretty_assertions::assert_eq;

use crate::peer;

fn body(name: &str) -> String {
    String::from_utf8(peer(name)).unwrap()
}

#[test]
fn recorded_error_bodies() {
    assert_eq!(
        error_from_body(502, &body("openai_html_error.txt")),
        ProviderError::Http {
            status: 502,
            message: "502 Bad Gateway".into(),
            kind: None
        }
    );
    assert_eq!(
        error_from_body(503, &body("openai_plain_text_error.txt")),
        ProviderError::Http {
            status: 503,
            message: "Service temporarily unavailable. Please try again later.".into(),
            kind: None
        }
    );
    let err = error_from_body(401, &body("openai_invalid_key_error.txt"));
    let ProviderError::Http {
        status,
        message,
        kind,
    } = err
    else {
        panic!()
    };
    assert_eq!(
        (status, kind.as_deref()),
        (401, Some("invalid_request_error"))
    );
    assert!(
        message.starts_with("You didn't provide an API key."),
        "{message}"
    );
}

#[test]
fn other_shapes() {
    let cases = [
        (
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            "Overloaded",
            Some("overloaded_error"),
        ),
        (
            r#"[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]"#,
            "Resource exhausted",
            Some("RESOURCE_EXHAUSTED"),
        ),
        (r#"{"error":"bad key"}"#, "bad key", None),
        (
            "<html><body><h1>Oops</h1><p>try later</p></body></html>",
            "Oops try later",
            None,
        ),
        ("", "(empty error body)", None),
    ];
    for (body, message, kind) in cases {
        let ProviderError::Http {
            message: m,
            kind: k,
            ..
        } = error_from_body(500, body)
        else {
            panic!()
        };
        assert_eq!((m.as_str(), k.as_deref()), (message, kind), "{body}");
    }
}
