//! Golden JSON: the spec of every built-in tool, strict and not, with harness parameters, and
//! each provider's tool declarations. The snapshots are the bytes providers receive.

use flemma_schema::builtin::builtins;
use flemma_schema::{Dialect, check_strict};

fn pretty(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

#[test]
fn builtin_specs_strict_and_lenient() {
    for builtin in builtins() {
        for strict in [true, false] {
            let spec = builtin.spec(strict).unwrap();
            if strict {
                assert_eq!(
                    check_strict(&spec.input_schema),
                    Vec::<String>::new(),
                    "{}",
                    builtin.name
                );
            }
            let name = format!(
                "builtin__{}__{}",
                builtin.name,
                if strict { "strict" } else { "lenient" }
            );
            insta::assert_snapshot!(name, pretty(&spec));
        }
    }
}

#[test]
fn provider_declarations() {
    for (dialect, name) in [
        (Dialect::OpenAiResponses, "openai_responses"),
        (Dialect::OpenAiChat, "openai_chat"),
        (Dialect::Anthropic, "anthropic"),
        (Dialect::Gemini, "gemini"),
    ] {
        let tools: Vec<serde_json::Value> = builtins()
            .iter()
            .map(|b| b.spec(true).unwrap().to_provider(dialect).unwrap())
            .collect();
        insta::assert_snapshot!(format!("provider__{name}"), pretty(&tools));
    }
}

#[test]
fn emission_is_deterministic_byte_for_byte() {
    let first: Vec<String> = builtins()
        .iter()
        .map(|b| b.spec(true).unwrap().input_schema.to_string())
        .collect();
    for _ in 0..3 {
        let again: Vec<String> = builtins()
            .iter()
            .map(|b| b.spec(true).unwrap().input_schema.to_string())
            .collect();
        assert_eq!(again, first);
    }
    // Keys are sorted at every level, whatever the insertion order of a raw schema.
    let raw = serde_json::json!({"type": "object", "required": ["b"], "properties": {"b": {"type": "string"}, "a": {"type": "string"}}});
    let spec = flemma_schema::ToolSpec::builder(flemma_ids::ToolName::new("t").unwrap(), "d")
        .input(flemma_schema::InputSchema::Raw(raw))
        .build()
        .unwrap();
    assert_eq!(
        spec.input_schema.to_string(),
        r#"{"properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b"],"type":"object"}"#
    );
}

#[cfg(feature = "typed")]
#[test]
fn derived_schemas_of_builtin_input_types_equal_their_dsl_schemas() {
    use flemma_schema::builtin::{self, inputs};
    use flemma_schema::{Mode, strict_schema_for};

    fn derived<T: schemars::JsonSchema>() -> serde_json::Value {
        let mut schema = strict_schema_for::<T>(Dialect::OpenAiResponses)
            .unwrap()
            .into_schema();
        // The type's doc comment becomes a root description; the DSL schemas have none.
        schema.as_object_mut().unwrap().shift_remove("description");
        schema
    }
    let pairs = [
        (builtin::bash(), derived::<inputs::BashInput>()),
        (builtin::read(), derived::<inputs::ReadInput>()),
        (builtin::write(), derived::<inputs::WriteInput>()),
        (builtin::edit(), derived::<inputs::EditInput>()),
        (builtin::grep(), derived::<inputs::GrepInput>()),
        (builtin::find(), derived::<inputs::FindInput>()),
        (builtin::ls(), derived::<inputs::LsInput>()),
        (builtin::jobs_status(), derived::<inputs::JobStatusInput>()),
    ];
    for (builtin, derived) in pairs {
        let dsl = builtin.input.to_json_schema(Mode::Strict).unwrap();
        pretty_assertions::assert_eq!(derived.to_string(), dsl.to_string(), "{}", builtin.name);
    }
}

#[test]
fn output_schema_extends_the_description() {
    let spec =
        flemma_schema::ToolSpec::builder(flemma_ids::ToolName::new("calc").unwrap(), "Evaluate.")
            .output_schema(
                serde_json::json!({"type": "object", "properties": {"value": {"type": "number"}}}),
            )
            .build()
            .unwrap();
    assert_eq!(
        spec.description,
        "Evaluate.\n\nReturns (JSON Schema): {\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"properties\":{\"value\":{\"type\":\"number\"}},\"type\":\"object\"}"
    );
}
