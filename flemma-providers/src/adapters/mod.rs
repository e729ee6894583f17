//! Request bodies: a provider-neutral [`Prompt`](crate::Prompt) encoded for each provider.

pub(crate) mod anthropic;
pub(crate) mod chat;
pub(crate) mod openai;
pub(crate) mod vertex;

use std::sync::{Arc, Mutex, PoisonError};

use flemma_schema::{Dialect, ToolSpec};
use serde_json::Value;

use crate::body::Json;
use crate::prompt::{Part, PromptMessage, PromptRole};
use crate::request::RequestOptions;
use crate::template::FilePart;
use flemma_ids::encode_tool_name;

/// The tool declarations of one request format built lately: a session offers the same tools
/// in every request, so each declaration is built once (the spec's
/// [`to_provider`](flemma_schema::ToolSpec::to_provider) and what the adapter adds) and
/// shared by the bodies after, for as long as the spec is the same.
pub(crate) struct Declared {
    dialect: Dialect,
    /// What the adapter adds to each declaration.
    finish: fn(&mut Value),
    /// The specs and their declarations, the newest last.
    built: Mutex<Vec<(ToolSpec, Arc<Value>)>>,
}

/// At most this many declarations are kept by each [`Declared`] (the oldest go first).
const DECLARED: usize = 64;

impl Declared {
    pub(crate) const fn new(dialect: Dialect, finish: fn(&mut Value)) -> Self {
        Self {
            dialect,
            finish,
            built: Mutex::new(Vec::new()),
        }
    }

    /// The offered tools declared, in the options' order. A tool whose declaration cannot be
    /// built (an unresolvable `$ref`) is left out.
    pub(crate) fn of(&self, options: &RequestOptions) -> Vec<Arc<Value>> {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        options
            .tools
            .iter()
            .filter_map(|spec| {
                if let Some((_, declared)) = built.iter().find(|(known, _)| known == spec) {
                    return Some(Arc::clone(declared));
                }
                let mut declaration = spec.to_provider(self.dialect).ok()?;
                (self.finish)(&mut declaration);
                let declared = Arc::new(declaration);
                if built.len() >= DECLARED {
                    built.remove(0);
                }
                built.push((spec.clone(), Arc::clone(&declared)));
                Some(declared)
            })
            .collect()
    }
}

/// Adds nothing to a declaration.
pub(crate) fn as_declared(_: &mut Value) {}

/// Sets `tools` to the offered tools declared by `declared`, with `tool_choice: "auto"`, when
/// any is offered (the OpenAI formats).
fn insert_tools(body: &mut Json<'_>, options: &RequestOptions, declared: &Declared) {
    let tools: Vec<Json<'_>> = declared.of(options).into_iter().map(Json::Shared).collect();
    if !tools.is_empty() {
        body.insert("tools", Json::Array(tools));
        body.insert("tool_choice", Json::from("auto"));
    }
}

/// The prefix of the synthetic tool-call ids the Vertex decoder makes.
const SYNTHETIC_ID_PREFIX: &str = "urn:flemma:tool:";

/// The wire name sent with a tool result: the matching tool use's name, else the name inside
/// a synthetic id `urn:flemma:tool:<name>:<suffix>`.
fn result_name<'a>(
    name: Option<&'a str>,
    tool_use_id: &'a str,
) -> Option<std::borrow::Cow<'a, str>> {
    name.map(encode_tool_name).or_else(|| {
        let (name, _suffix) = tool_use_id
            .strip_prefix(SYNTHETIC_ID_PREFIX)?
            .rsplit_once(':')?;
        (!name.is_empty()).then(|| encode_tool_name(name))
    })
}

/// Tool-result parts as one text, for providers whose results are text only: text and text
/// files as they are, other files as `[binary file: <name> (<mime>)]`.
fn text_with_file_names<'p>(parts: &'p [Part<'_>]) -> std::borrow::Cow<'p, str> {
    if let Some(text) = Part::textual(parts) {
        return text;
    }
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Text { text } => out.push_str(text),
            Part::File(file) => out.push_str(&file.as_text_fallback()),
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The `[binary file: <name>]` text Anthropic and OpenAI are sent for an unsupported file.
fn unsupported_text(file: &FilePart) -> String {
    format!("[binary file: {}]", file.filename())
}

/// The messages as (role, parts), with consecutive messages of one role merged when `merge`
/// says so for that role.
fn merged<'p, 'd>(
    messages: &'p [PromptMessage<'d>],
    merge: impl Fn(PromptRole) -> bool,
) -> Vec<(PromptRole, Vec<&'p Part<'d>>)> {
    let mut out: Vec<(PromptRole, Vec<&'p Part<'d>>)> = Vec::with_capacity(messages.len());
    for message in messages {
        match out.last_mut() {
            Some((role, parts)) if *role == message.role && merge(*role) => {
                parts.extend(&message.parts);
            }
            _ => out.push((message.role, message.parts.iter().collect())),
        }
    }
    out
}
