//! Strict mode: DSL schemas marked strict pass the independent checker, and `compile_strict`
//! turns lenient schemas into strict ones that read inputs back as they were meant.

use flemma_schema::dsl::{
    self, Schema, boolean, enumeration, integer, list, literal, number, object, string, union,
};
use flemma_schema::{Dialect, Mode, Validator, check_strict, compile_strict};
use pretty_assertions::assert_eq;
use proptest::prelude::*;
use serde_json::json;

/// Any DSL node that strict mode can express.
fn strict_node() -> impl Strategy<Value = Schema> {
    let leaf = prop_oneof![
        Just(string()),
        Just(number()),
        Just(integer()),
        Just(boolean()),
        Just(enumeration(["a", "b"])),
        Just(literal("x")),
        Just(literal(3)),
        Just(literal(serde_json::Value::Null)),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            inner.clone().prop_map(list),
            inner.clone().prop_map(Schema::nullable),
            prop::collection::vec(inner.clone(), 1..3).prop_map(union),
            prop::collection::btree_map("[a-z]{1,3}", inner.clone(), 0..4).prop_map(object),
            (inner, "[a-z ]{0,8}").prop_map(|(s, d)| s.describe(d)),
        ]
    })
}

/// Any DSL node, optional fields, maps and passthrough objects included.
fn lenient_node() -> impl Strategy<Value = Schema> {
    strict_node().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::btree_map(
                "[a-z]{1,3}",
                inner.clone().prop_map(Schema::optional),
                0..4
            )
            .prop_map(object),
            prop::collection::btree_map("[a-z]{1,3}", inner.clone(), 0..3)
                .prop_map(|f| object(f).passthrough()),
            inner.prop_map(dsl::map),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn strict_dsl_schemas_pass_the_independent_checker(fields in prop::collection::btree_map("[a-z]{1,4}", strict_node(), 0..6)) {
        let schema = object(fields).to_json_schema(Mode::Strict).unwrap();
        prop_assert_eq!(check_strict(&schema), Vec::<String>::new(), "{}", schema);
        prop_assert!(Validator::new(&schema).is_ok());
    }

    #[test]
    fn compiled_schemas_are_strict_or_the_error_names_a_path(fields in prop::collection::btree_map("[a-z]{1,4}", lenient_node(), 0..6)) {
        let lenient = object(fields).to_json_schema(Mode::Lenient).unwrap();
        match compile_strict(&lenient, Dialect::OpenAiResponses) {
            Ok(compiled) => prop_assert_eq!(check_strict(compiled.schema()), Vec::<String>::new(), "{}", compiled.schema()),
            Err(err) => prop_assert!(err.to_string().starts_with('/'), "{}", err),
        }
    }
}

#[test]
fn optional_fields_become_nullable_and_read_back_as_absent() {
    let lenient = object([
        ("path", string()),
        ("depth", integer().optional()),
        ("mode", enumeration(["fast", "slow"]).optional()),
        (
            "nested",
            list(object([("x", string().optional())])).optional(),
        ),
    ])
    .to_json_schema(Mode::Lenient)
    .unwrap();
    let compiled = compile_strict(&lenient, Dialect::OpenAiResponses).unwrap();
    assert_eq!(
        compiled.schema(),
        &json!({
            "additionalProperties": false,
            "properties": {
                "depth": {"type": ["integer", "null"]},
                "mode": {"enum": ["fast", "slow", null], "type": ["string", "null"]},
                "nested": {"items": {"additionalProperties": false, "properties": {"x": {"type": ["string", "null"]}},
                                     "required": ["x"], "type": "object"},
                           "type": ["array", "null"]},
                "path": {"type": "string"}
            },
            "required": ["depth", "mode", "nested", "path"],
            "type": "object"
        })
    );
    let model_says =
        json!({"path": "a", "depth": null, "mode": "fast", "nested": [{"x": null}, {"x": "y"}]});
    Validator::new(compiled.schema())
        .unwrap()
        .validate(&model_says)
        .unwrap();
    assert_eq!(
        compiled.decode(model_says),
        json!({"path": "a", "mode": "fast", "nested": [{}, {"x": "y"}]})
    );
}

#[test]
fn refs_are_kept_for_openai_and_inlined_for_gemini() {
    let raw = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Input",
        "type": "object",
        "properties": {"point": {"$ref": "#/$defs/Point"}, "n": {"type": "number", "format": "double"}},
        "required": ["point"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer", "format": "int32"}, "label": {"type": "string"}}, "required": ["x"]}}
    });
    let openai = compile_strict(&raw, Dialect::OpenAiResponses).unwrap();
    assert!(check_strict(openai.schema()).is_empty());
    assert_eq!(
        openai.schema()["properties"]["point"],
        json!({"$ref": "#/$defs/Point"})
    );
    assert_eq!(
        openai.schema()["$defs"]["Point"]["required"],
        json!(["label", "x"])
    );
    assert_eq!(
        openai.schema()["properties"]["n"],
        json!({"type": ["number", "null"]})
    );
    assert_eq!(
        openai.decode(json!({"point": {"x": 1, "label": null}, "n": null})),
        json!({"point": {"x": 1}})
    );

    let gemini = compile_strict(&raw, Dialect::Gemini).unwrap();
    assert!(gemini.schema().get("$defs").is_none());
    assert_eq!(
        gemini.schema()["properties"]["point"]["properties"]["label"],
        json!({"type": ["string", "null"]})
    );
    assert_eq!(
        gemini.decode(json!({"point": {"x": 1, "label": null}})),
        json!({"point": {"x": 1}})
    );
}

#[test]
fn one_of_reads_as_any_of_and_single_all_of_is_inlined() {
    let raw = json!({"type": "object", "properties": {
        "v": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "w": {"allOf": [{"type": "boolean"}], "description": "flag"}
    }, "required": ["v", "w"]});
    let compiled = compile_strict(&raw, Dialect::Anthropic).unwrap();
    assert_eq!(
        compiled.schema()["properties"]["v"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    );
    assert_eq!(
        compiled.schema()["properties"]["w"],
        json!({"description": "flag", "type": "boolean"})
    );
}
