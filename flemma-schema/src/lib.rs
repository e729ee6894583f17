//! Tool input schemas for flemma: a DSL, JSON Schema emission, OpenAI strict mode, validation
//! and the harness parameters.
//!
//! A tool describes its input once; this crate turns that description into what each party
//! needs. Providers get JSON Schema with deterministic bytes (prompt caching depends on it),
//! strict-shaped for OpenAI's strict function calling; the executor gets a [`Validator`] with
//! readable messages (`input.timeout: expected number or null, got string "30"`) and
//! [`strip_harness_parameters`] to take `flemma.background` / `flemma.save_to` out of a call.
//!
//! The key decision: optional parameters of strict tools are *nullable and required*, and a
//! `null` maps back to "absent" when the input is decoded ([`StrictSchema::decode`]), so models
//! are never forced to invent values for parameters they mean to leave out.
//!
//! ```
//! use flemma_schema::dsl::{number, object, string};
//! use flemma_schema::{HarnessParameters, ToolSpec, Validator};
//! use flemma_ids::ToolName;
//!
//! let spec = ToolSpec::builder(ToolName::new("bash")?, "Run a command.")
//!     .input(object([
//!         ("command", string().describe("The bash command to execute")),
//!         ("timeout", number().nullable().describe("Timeout in seconds (default: 30)")),
//!     ]))
//!     .strict(true)
//!     .harness(HarnessParameters::for_tool(true, false, false))
//!     .build()?;
//! assert_eq!(
//!     spec.input_schema["required"],
//!     serde_json::json!(["command", "timeout", "flemma.background", "flemma.save_to"])
//! );
//!
//! let validator = Validator::new(&spec.input_schema)?;
//! let err = validator
//!     .validate(&serde_json::json!({"command": "ls", "timeout": "30",
//!                                   "flemma.background": null, "flemma.save_to": null}))
//!     .unwrap_err();
//! assert_eq!(err.to_string(), "input.timeout: expected number or null, got string \"30\"");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
pub mod builtin;
mod capability;
pub mod dsl;
mod emit;
mod error;
mod harness;
mod json;
mod messages;
mod spec;
mod strict;
#[cfg(feature = "typed")]
mod typed;
mod validate;

pub use capability::{Capabilities, Capability};
pub use dsl::Schema;
pub use emit::Mode;
pub use error::{JsonPath, SchemaError};
pub use harness::{
    BACKGROUND, Directives, HarnessParameters, SAVE_TO, inject_harness_parameters,
    strip_harness_parameters,
};
pub use spec::{Dialect, InputSchema, ToolSpec, ToolSpecBuilder};
pub use strict::{StrictSchema, check_strict, compile_strict};
#[cfg(feature = "typed")]
pub use typed::{DecodeError, decode_input, strict_schema_for};
pub use validate::{ValidationError, Validator, Violation};
