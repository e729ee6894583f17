//! Misuse and unsupported constructs are typed errors naming a JSON path, never panics.

use flemma_schema::dsl::{boolean, map, object, string};
use flemma_schema::{
    Dialect, InputSchema, JsonPath, Mode, SchemaError, ToolSpec, Validator, compile_strict,
};
use pretty_assertions::assert_eq;
use serde_json::json;

fn path(pointer: &str) -> JsonPath {
    pointer
        .split('/')
        .skip(1)
        .fold(JsonPath::root(), |p, s| p.join(s))
}

#[test]
fn dsl_misuse_in_strict_mode() {
    let optional = object([("a", object([("b", string().optional())]))]);
    assert_eq!(
        optional.to_json_schema(Mode::Strict),
        Err(SchemaError::OptionalInStrict {
            path: path("/properties/a/properties/b")
        })
    );
    assert!(optional.to_json_schema(Mode::Lenient).is_ok());
    let open = object([("env", map(string()))]);
    assert_eq!(
        open.to_json_schema(Mode::Strict),
        Err(SchemaError::OpenObjectInStrict {
            path: path("/properties/env")
        })
    );
    let passthrough = object([("x", object::<&str>([]).passthrough())]);
    assert!(matches!(
        passthrough.to_json_schema(Mode::Strict),
        Err(SchemaError::OpenObjectInStrict { .. })
    ));
    let bad_default = object([("flag", boolean().with_default("yes"))]);
    let err = bad_default.to_json_schema(Mode::Lenient).unwrap_err();
    assert_eq!(
        err.to_string(),
        "/properties/flag: default \"yes\" does not match the schema"
    );
    // A strict tool built from a misused DSL schema fails at build time.
    let spec = ToolSpec::builder(flemma_ids::ToolName::new("t").unwrap(), "d")
        .input(optional)
        .strict(true)
        .build();
    assert!(matches!(spec, Err(SchemaError::OptionalInStrict { .. })));
}

#[test]
fn what_strict_mode_cannot_express() {
    let cases = [
        (
            json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}}}),
            "/properties/m/additionalProperties: strict mode cannot express an object with arbitrary keys",
        ),
        (
            json!({"type": "object", "patternProperties": {"^x": {}}}),
            "/patternProperties: strict mode does not support `patternProperties`",
        ),
        (
            json!({"type": "object", "properties": {"a": {"not": {"type": "string"}}}}),
            "/properties/a/not: strict mode does not support `not`",
        ),
        (
            json!({"type": "object", "properties": {"a": {"allOf": [{}, {}]}}}),
            "/properties/a/allOf: strict mode does not support `allOf`",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}),
            "/properties/a/$ref: cannot resolve `$ref` \"#/$defs/Missing\"",
        ),
        (
            json!({"type": "object", "properties": {"a": true}}),
            "/properties/a: strict mode cannot express an object with arbitrary keys",
        ),
        (
            json!({"type": "object", "required": ["ghost"]}),
            "/required: invalid schema: \"ghost\" is required but not a property",
        ),
        (
            json!({"type": "string"}),
            "/: invalid schema: a tool's input schema must be an object",
        ),
        (json!([1]), "/: invalid schema: a schema must be an object"),
    ];
    for (raw, message) in cases {
        let err = compile_strict(&raw, Dialect::OpenAiResponses).unwrap_err();
        assert_eq!(err.to_string(), message, "{raw}");
    }
}

#[test]
fn recursive_refs_cannot_be_inlined_for_gemini() {
    let raw = json!({"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}, "required": ["n"],
                     "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}});
    assert!(compile_strict(&raw, Dialect::OpenAiResponses).is_ok());
    let err = compile_strict(&raw, Dialect::Gemini).unwrap_err();
    assert!(matches!(err, SchemaError::RecursiveRef { .. }), "{err}");
    let spec = ToolSpec::builder(flemma_ids::ToolName::new("t").unwrap(), "d")
        .input(InputSchema::Raw(raw))
        .build()
        .unwrap();
    assert!(matches!(
        spec.to_provider(Dialect::Gemini),
        Err(SchemaError::RecursiveRef { .. })
    ));
}

#[test]
fn invalid_raw_schemas_for_the_validator() {
    let cases = [
        (
            json!({"type": "strnig"}),
            "/type: invalid schema: unknown type",
        ),
        (
            json!({"required": "a"}),
            "/required: invalid schema: `required` must be an array of strings",
        ),
        (
            json!({"minimum": "1"}),
            "/minimum: invalid schema: must be a number",
        ),
        (
            json!({"$ref": "http://example.com/x"}),
            "/$ref: cannot resolve `$ref` \"http://example.com/x\"",
        ),
        (
            json!(3),
            "/: invalid schema: a schema must be an object or a boolean",
        ),
    ];
    for (raw, message) in cases {
        assert_eq!(
            Validator::new(&raw).unwrap_err().to_string(),
            message,
            "{raw}"
        );
    }
}

#[test]
fn tool_names() {
    for (name, ok) in [
        ("bash", true),
        ("flemma.jobs.status", true),
        ("my-tool_2", true),
        ("", false),
        ("a__b", false),
        ("a..b", false),
        (".a", false),
        ("slack:channels", false),
        ("naïve", false),
    ] {
        let result = flemma_ids::ToolName::new(name);
        assert_eq!(result.is_ok(), ok, "{name}: {result:?}");
    }
}
