//! Request bodies: a provider-neutral [`Prompt`](crate::Prompt) encoded for each provider
//! (spec §13).

pub(crate) mod anthropic;
pub(crate) mod chat;
pub(crate) mod openai;
pub(crate) mod vertex;

use flemma_schema::Dialect;
use serde_json::Value;

use crate::body::Json;
use crate::prompt::{Part, PromptMessage, PromptRole};
use crate::request::RequestOptions;
use crate::template::FilePart;
use flemma_ids::encode_tool_name;

/// The offered tools declared in `dialect`, in the options' order. A tool whose declaration
/// cannot be built (an unresolvable `$ref`) is left out.
fn declarations(options: &RequestOptions, dialect: Dialect) -> Vec<Value> {
    options
        .tools
        .iter()
        .filter_map(|spec| spec.to_provider(dialect).ok())
        .collect()
}

/// Sets `tools` to the offered tools declared in `dialect`, with `tool_choice: "auto"`, when
/// any is offered (the OpenAI formats).
fn insert_tools(body: &mut Json<'_>, options: &RequestOptions, dialect: Dialect) {
    let tools: Vec<Json<'_>> = declarations(options, dialect)
        .into_iter()
        .map(Json::from)
        .collect();
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
