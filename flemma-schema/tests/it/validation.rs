//! Validation messages, snapshotted: every violation, with its path.

use flemma_schema::builtin;
use flemma_schema::dsl::{enumeration, integer, list, literal, map, number, object, string, union};
use flemma_schema::{Mode, Validator};
use serde_json::{Value, json};

fn messages(schema: &Value, input: &Value) -> String {
    match Validator::new(schema).unwrap().validate(input) {
        Ok(()) => "ok".to_owned(),
        Err(err) => err.to_string(),
    }
}

#[test]
fn builtin_inputs() {
    let bash = builtin::bash().spec(true).unwrap().input_schema;
    let cases = [
        json!({"label": "t", "command": "ls", "timeout": null, "flemma.background": null, "flemma.save_to": null}),
        json!({"label": "t", "command": "ls", "timeout": "30", "flemma.background": null, "flemma.save_to": null}),
        json!({"command": 5, "timeout": 1.5, "flemma.background": "yes", "flemma.save_to": 3, "extra": true}),
        json!([]),
    ];
    let report: Vec<String> = cases
        .iter()
        .map(|c| format!("{c}\n{}\n", messages(&bash, c)))
        .collect();
    insta::assert_snapshot!("validation__bash", report.join("\n"));
}

#[test]
fn every_keyword() {
    let schema = object([
        ("mode", enumeration(["fast", "slow"])),
        ("count", integer()),
        ("tags", list(string())),
        ("env", map(string())),
        ("either", union([string(), list(integer())])),
        ("fixed", literal("v1")),
        (
            "nested",
            object([("deep", object([("x", number().nullable())]))]),
        ),
    ])
    .passthrough()
    .to_json_schema(Mode::Lenient)
    .unwrap();
    let cases = [
        json!({"mode": "fast", "count": 2, "tags": [], "env": {}, "either": [1], "fixed": "v1", "nested": {"deep": {"x": null}}}),
        json!({"mode": "medium", "count": 2.5, "tags": ["a", 1, null], "env": {"A": 1}, "either": true, "fixed": "v2",
               "nested": {"deep": {"x": "1", "y": 0}}, "unknown": "allowed: passthrough"}),
        json!({"either": [1, "two"], "nested": {}}),
    ];
    let report: Vec<String> = cases
        .iter()
        .map(|c| format!("{c}\n{}\n", messages(&schema, c)))
        .collect();
    insta::assert_snapshot!("validation__keywords", report.join("\n"));
}

#[test]
fn bounds_refs_and_odd_keys() {
    let schema = json!({
        "type": "object",
        "properties": {
            "n": {"type": "number", "minimum": 1, "exclusiveMaximum": 10},
            "s": {"type": "string", "minLength": 2, "maxLength": 3},
            "list": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"$ref": "#/$defs/Node"}},
            "odd key": {"type": "boolean"}
        },
        "$defs": {"Node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}},
                           "required": ["next"], "additionalProperties": false}}
    });
    let cases = [
        json!({"n": 0, "s": "abcd", "list": [], "odd key": "no"}),
        json!({"n": 10, "s": "é", "list": [{"next": {"next": {"next": 3}}}, {"next": null}]}),
    ];
    let report: Vec<String> = cases
        .iter()
        .map(|c| format!("{c}\n{}\n", messages(&schema, c)))
        .collect();
    insta::assert_snapshot!("validation__bounds_and_refs", report.join("\n"));
}
