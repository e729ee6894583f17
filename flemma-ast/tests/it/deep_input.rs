//! Tool inputs the decoder cannot hold: the parser says so with a diagnostic, and a tool use it
//! keeps always decodes to the input written in the transcript (never to `{}`).

use flemma_ast::{DiagnosticKind, Document, Segment, parse};
use serde_json::Value;

/// A tool use whose input object holds `depth - 1` nested arrays under `"nest"`, beside a
/// `"command"`: `depth` counts the input object itself.
fn transcript(depth: usize) -> String {
    let inner = match depth {
        1 => "0".to_owned(),
        _ => format!("{}{}", "[".repeat(depth - 1), "]".repeat(depth - 1)),
    };
    format!(
        "@Assistant:\n**Tool Use:** `bash` (`toolu_deep`)\n\n```json\n{{\"command\":\"echo hi\",\"nest\":{inner}}}\n```\n"
    )
}

/// The document's tool uses.
fn tool_uses(doc: &Document) -> Vec<&flemma_ast::ToolUse> {
    doc.messages
        .iter()
        .flat_map(|m| &m.segments)
        .filter_map(|s| match s {
            Segment::ToolUse(call) => Some(&**call),
            _ => None,
        })
        .collect()
}

/// The diagnostic a refused depth gets, on the tool use's header line.
fn assert_refused(doc: &Document) {
    assert!(tool_uses(doc).is_empty(), "a refused input is no tool use");
    let [diagnostic] = doc.diagnostics.as_slice() else {
        panic!("one diagnostic expected, got {:?}", doc.diagnostics);
    };
    assert_eq!(diagnostic.kind, DiagnosticKind::ToolUse);
    assert_eq!(diagnostic.line, 2);
    assert!(
        diagnostic.message.starts_with(
            "Failed to parse tool input: the input nests deeper than 127 levels (the most a tool input may)"
        ),
        "{}",
        diagnostic.message
    );
}

/// Runs `f` in a thread with the default test stack (2 MiB), so a recursion that depends on
/// the input's depth shows as a stack overflow rather than passing on a larger main stack.
fn in_test_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn depth_127_is_kept_and_decodes_to_what_was_written() {
    in_test_thread(|| {
        let doc = parse(&transcript(127));
        assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
        let [call] = tool_uses(&doc)[..] else {
            panic!("one tool use expected");
        };
        let written: Value = serde_json::from_str(call.raw_input()).unwrap();
        assert_eq!(&Value::Object(call.input().clone()), &written);
        assert_eq!(call.input()["command"], "echo hi");
    });
}

#[test]
fn depth_128_is_a_diagnostic_not_an_empty_input() {
    in_test_thread(|| assert_refused(&parse(&transcript(128))));
}

#[test]
fn depth_1000_is_a_diagnostic_not_an_empty_input() {
    in_test_thread(|| assert_refused(&parse(&transcript(1_000))));
}

#[test]
fn depth_100_000_is_a_diagnostic_without_overflowing_the_stack() {
    in_test_thread(|| assert_refused(&parse(&transcript(100_000))));
}

#[test]
fn the_parser_keeps_exactly_the_inputs_serde_json_decodes() {
    // Texts serde_json's skipping reader takes but its decoder refuses: each was once parsed
    // as a tool use whose input was `{}`.
    let cases = [
        r#"{"command":"echo hi","n":1e400}"#,
        r#"{"command":"echo hi","s":"\ud800"}"#,
        r#"{"command":"echo hi","\udc00":1}"#,
        r#"{"command":"echo hi","n":-1e309}"#,
        r#"{"command":"echo hi","n":[1,{"a":[2e999]}]}"#,
    ];
    for input in cases {
        let text = format!("@Assistant:\n**Tool Use:** `bash` (`t1`)\n\n```json\n{input}\n```\n");
        let doc = parse(&text);
        let decoded = serde_json::from_str::<Value>(input);
        match tool_uses(&doc)[..] {
            [call] => {
                let Ok(Value::Object(object)) = decoded else {
                    panic!("kept {input} as a tool use, but it decodes as {decoded:?}");
                };
                assert_eq!(call.input(), &object, "{input}");
            }
            [] => {
                assert!(decoded.is_err(), "refused {input}, which decodes");
                assert_eq!(doc.diagnostics.len(), 1, "{input}: {:?}", doc.diagnostics);
            }
            _ => panic!("one tool use at most"),
        }
    }
}

#[test]
fn the_depth_limit_is_serde_jsons_own() {
    // Every depth up to past the limit: a tool use exactly when `Value` decodes the input.
    for depth in 1..=140 {
        let text = transcript(depth);
        let input = text.lines().nth(4).unwrap();
        let decodes = serde_json::from_str::<Value>(input).is_ok();
        let kept = !tool_uses(&parse(&text)).is_empty();
        assert_eq!(kept, decodes, "depth {depth}");
        assert_eq!(kept, depth <= flemma_ast::MAX_INPUT_DEPTH, "depth {depth}");
    }
}
