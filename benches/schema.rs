//! Schema benchmarks.
//!
//! - `schema/validate_bash`: validating a typical `bash` call input against its strict schema.
//! - `schema/specs_all_builtins`: building the specs of every built-in tool from its definition
//!   (DSL emission, harness parameters injected) and serializing them.
//! - `schema/serialize_built_specs`: serializing the specs of every built-in tool, built once (as
//!   a registry holds them), harness parameters included: the per-request cost.
//! - With `--features bench-jsonschema`, `schema/jsonschema_validate_bash` runs the same
//!   validation with the `jsonschema` crate, for comparison.
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::hint::black_box;

use criterion::Criterion;
use flemma::schema::{Validator, builtin};
use serde_json::json;

fn benches(c: &mut Criterion) {
    let schema = builtin::bash().spec(true).expect("bash spec").input_schema;
    let input = json!({
        "label": "running tests",
        "command": "cargo test -p flemma-schema -- --nocapture",
        "timeout": null,
        "flemma.background": null,
        "flemma.save_to": null
    });
    let validator = Validator::new(&schema).expect("bash schema compiles");
    assert!(validator.validate(&input).is_ok());

    let mut group = c.benchmark_group("schema");
    group.bench_function("validate_bash", |b| {
        b.iter(|| validator.validate(black_box(&input)));
    });
    // Definitions are registered once; specs are built and serialized for every request.
    let builtins = builtin::builtins();
    group.bench_function("specs_all_builtins", |b| {
        b.iter(|| {
            let specs: Vec<_> = black_box(&builtins)
                .iter()
                .map(|t| t.spec(true).expect("builtin spec"))
                .collect();
            serde_json::to_string(black_box(&specs)).expect("serializes")
        });
    });
    let built: Vec<_> = builtins
        .iter()
        .map(|t| t.spec(true).expect("builtin spec"))
        .collect();
    group.bench_function("serialize_built_specs", |b| {
        b.iter(|| serde_json::to_string(black_box(&built)).expect("serializes"));
    });
    #[cfg(feature = "bench-jsonschema")]
    {
        let other = jsonschema::validator_for(&schema).expect("jsonschema compiles the schema");
        assert!(other.is_valid(&input));
        group.bench_function("jsonschema_validate_bash", |b| {
            b.iter(|| other.iter_errors(black_box(&input)).count());
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
