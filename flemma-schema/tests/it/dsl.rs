//! The DSL's JSON Schema emission rules (spec §3.3, §3.4), one by one.

use flemma_schema::Mode;
use flemma_schema::dsl::{
    boolean, enumeration, integer, list, literal, map, nullable, number, object, optional, string,
    union,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn lenient(schema: &flemma_schema::Schema) -> Value {
    schema.to_json_schema(Mode::Lenient).unwrap()
}

#[test]
fn scalars_defaults_and_descriptions() {
    assert_eq!(
        lenient(&string().with_default("urn:flemma:buffer:path")),
        json!({"type": "string", "default": "urn:flemma:buffer:path"})
    );
    assert_eq!(
        lenient(&number().describe("n")),
        json!({"type": "number", "description": "n"})
    );
    assert_eq!(
        lenient(&integer().with_default(3)),
        json!({"type": "integer", "default": 3})
    );
    assert_eq!(
        lenient(&boolean().with_default(false)),
        json!({"type": "boolean", "default": false})
    );
    assert_eq!(
        lenient(&enumeration(["a", "b"])),
        json!({"type": "string", "enum": ["a", "b"]})
    );
    assert_eq!(
        lenient(&list(string())),
        json!({"type": "array", "items": {"type": "string"}})
    );
    assert_eq!(
        lenient(&map(integer())),
        json!({"type": "object", "additionalProperties": {"type": "integer"}})
    );
}

#[test]
fn literals_carry_their_json_type() {
    assert_eq!(
        lenient(&literal("x")),
        json!({"type": "string", "const": "x"})
    );
    assert_eq!(lenient(&literal(2)), json!({"type": "integer", "const": 2}));
    assert_eq!(
        lenient(&literal(2.5)),
        json!({"type": "number", "const": 2.5})
    );
    assert_eq!(
        lenient(&literal(true)),
        json!({"type": "boolean", "const": true})
    );
    assert_eq!(lenient(&literal(Value::Null)), json!({"type": "null"}));
}

#[test]
fn objects_sort_properties_and_leave_optional_fields_out_of_required() {
    let schema = object([
        ("zeta", string()),
        (
            "alpha",
            optional(string().describe("inner survives")).describe("wrapper is lost"),
        ),
        ("mid", nullable(integer())),
    ]);
    let emitted = lenient(&schema);
    assert_eq!(
        emitted.to_string(),
        json!({
            "additionalProperties": false,
            "properties": {
                "alpha": {"description": "inner survives", "type": "string"},
                "mid": {"type": ["integer", "null"]},
                "zeta": {"type": "string"}
            },
            "required": ["mid", "zeta"],
            "type": "object"
        })
        .to_string()
    );
    assert_eq!(
        lenient(&object([("a", string().optional())]))["required"],
        Value::Null,
        "no empty `required`"
    );
    assert_eq!(
        lenient(&object([("a", string())]).passthrough()).get("additionalProperties"),
        None
    );
}

#[test]
fn nullable_rules() {
    assert_eq!(
        lenient(&string().nullable()),
        json!({"type": ["string", "null"]})
    );
    assert_eq!(
        lenient(&string().nullable().nullable()),
        json!({"type": ["string", "null"]})
    );
    assert_eq!(
        lenient(&enumeration(["a"]).nullable()),
        json!({"type": ["string", "null"], "enum": ["a", null]})
    );
    assert_eq!(
        lenient(&union([string(), integer()]).nullable()),
        json!({"anyOf": [{"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"type": "null"}]})
    );
    assert_eq!(
        lenient(&number().describe("inner").nullable().describe("wrapper")),
        json!({"type": ["number", "null"], "description": "wrapper"})
    );
}

#[test]
fn unions_take_the_first_branch_default() {
    let schema = union([
        string(),
        integer().with_default(1),
        boolean().with_default(true),
    ]);
    assert_eq!(
        lenient(&schema),
        json!({"anyOf": [{"type": "string"}, {"type": "integer", "default": 1}, {"type": "boolean", "default": true}], "default": 1})
    );
}

#[test]
fn extend_adds_and_replaces_fields() {
    let base = object([("a", string()), ("b", string())]);
    let extended = base.extend([("b", integer()), ("c", boolean())]);
    assert_eq!(
        lenient(&extended)["properties"],
        json!({"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}})
    );
}

#[cfg(feature = "typed")]
#[test]
fn builtin_inputs_decode_from_model_output() {
    use flemma_schema::builtin::inputs::GrepInput;
    use flemma_schema::{Dialect, decode_input, strict_schema_for};
    let schema = strict_schema_for::<GrepInput>(Dialect::OpenAiResponses).unwrap();
    let input: GrepInput = decode_input(
        &schema,
        json!({"label": "l", "pattern": "fn", "path": null, "glob": "*.rs", "limit": null}),
    )
    .unwrap();
    assert_eq!(
        (input.path, input.glob.as_deref(), input.limit),
        (None, Some("*.rs"), None)
    );
    let err = decode_input::<GrepInput>(&schema, json!({"label": "l"})).unwrap_err();
    assert_eq!(err.to_string(), "cannot decode the tool input");
    let cause = std::error::Error::source(&err).unwrap().to_string();
    assert!(cause.starts_with("missing field `pattern`"), "{cause}");
}
