//! The provider-neutral prompt and its builder.
//!
//! [`build_prompt`] turns a parsed transcript into a [`Prompt`]: the system text, the
//! user/assistant history as generic [`Part`]s, and the warnings found on the way.
//! Provider adapters turn a [`Prompt`] into their request bodies; they wire-encode tool names
//! and normalise tool ids themselves.
//!
//! The text of `@System:` and `@You:` messages, and the results of tools that declare
//! `emits_template`, go through a [`TemplateEngine`] (minijinja unless
//! [`PromptBuilder::engine`] says otherwise); `@./file` references in them become
//! [`Part::File`]s.

pub(crate) mod builder;

use std::borrow::Cow;

use flemma_ast::JsonObject;
use flemma_ids::Severity;
use serde::Serialize;

use crate::template::FilePart;

/// The content of a synthetic result sent for a tool call that has no final result.
pub const NO_RESULT_PROVIDED: &str = "No result provided";

/// What the summary of a `**Compaction:**` block is sent after: the model is told that the
/// summary stands for the earlier conversation and whose words it is (a model's, not the
/// user's).
pub const COMPACTION_PREFIX: &str = "[The earlier part of this conversation was compacted. \
What follows is a summary of it written by a model: it reports what the user asked for and what was \
done, in the model's words, not the user's.]\n\n";

/// A conversation ready to be encoded for a provider.
///
/// A prompt borrows the text of the [`Document`](flemma_ast::Document) it was built from wherever it is sent as
/// written (`'d`), so building one copies only what templates render;
/// [`into_owned`](Self::into_owned) detaches it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prompt<'d> {
    /// The trimmed text of the last `@System:` message, when there is one.
    pub system: Option<Cow<'d, str>>,
    /// The history, in document order, followed by at most one user message holding the
    /// synthetic results of unresolved tool calls.
    pub messages: Vec<PromptMessage<'d>>,
    /// What was found while building: unresolved tool calls, job results of unknown jobs,
    /// templates that failed (errors) and file references not attached.
    pub diagnostics: Vec<PromptDiagnostic>,
}

impl Prompt<'_> {
    /// The prompt with everything it borrows copied, so that it outlives the document.
    pub fn into_owned(self) -> Prompt<'static> {
        Prompt {
            system: self.system.map(|s| Cow::Owned(s.into_owned())),
            messages: self
                .messages
                .into_iter()
                .map(PromptMessage::into_owned)
                .collect(),
            diagnostics: self.diagnostics,
        }
    }

    /// Whether a diagnostic is an error: some text was sent as written because its template
    /// failed. A host usually shows the errors rather than send the request.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Who speaks a [`PromptMessage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptRole {
    /// The user (`@You:`).
    User,
    /// The model (`@Assistant:`).
    Assistant,
}

/// One message of the history; never empty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptMessage<'d> {
    /// Who speaks.
    pub role: PromptRole,
    /// The content, in document order.
    pub parts: Vec<Part<'d>>,
}

impl PromptMessage<'_> {
    /// The message with everything it borrows copied.
    pub fn into_owned(self) -> PromptMessage<'static> {
        PromptMessage {
            role: self.role,
            parts: self.parts.into_iter().map(Part::into_owned).collect(),
        }
    }
}

/// A provider signature carried by a thinking part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThinkingSignature<'d> {
    /// The provider that produced the signature (`anthropic`, `openai`, `vertex`, …).
    pub provider: Cow<'d, str>,
    /// The opaque signature value.
    pub value: Cow<'d, str>,
}

/// A provider-neutral piece of message content.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part<'d> {
    /// Plain text.
    Text {
        /// The text.
        text: Cow<'d, str>,
    },
    /// A file from an `@./file` reference or a binary `include()`.
    File(FilePart),
    /// A thinking block of an assistant message.
    Thinking {
        /// The thinking text (opaque provider data when `redacted`).
        content: Cow<'d, str>,
        /// The provider signature, when the block has one.
        signature: Option<ThinkingSignature<'d>>,
        /// Whether the content is redacted (encrypted) provider data.
        redacted: bool,
    },
    /// A tool call of an assistant message.
    ToolUse {
        /// The call id as written in the transcript.
        id: Cow<'d, str>,
        /// The tool name as written in the transcript (adapters wire-encode it).
        name: Cow<'d, str>,
        /// The call input.
        input: Cow<'d, JsonObject>,
    },
    /// The final result of a tool call, in a user message.
    ToolResult {
        /// The id of the call it answers.
        tool_use_id: Cow<'d, str>,
        /// The tool name, taken from the matching tool use when there is one.
        name: Option<Cow<'d, str>>,
        /// The content: one text part with the raw content (none when it is empty), or, for a
        /// tool that declares `emits_template`, the rendered text and file parts.
        parts: Vec<Part<'d>>,
        /// Whether the result is an error (status `error`).
        is_error: bool,
    },
}

impl<'d> Part<'d> {
    /// A text part.
    pub fn text(text: impl Into<Cow<'d, str>>) -> Self {
        Part::Text { text: text.into() }
    }

    /// The text of a tool result's parts when they are all textual (text and text files),
    /// joined; `None` when one of them is an image, a PDF or an unsupported file.
    pub fn textual<'p>(parts: &'p [Part<'_>]) -> Option<Cow<'p, str>> {
        let text = |part: &'p Part<'_>| match part {
            Part::Text { text } => Some(text.as_ref()),
            Part::File(FilePart::TextFile { text, .. }) => Some(text.as_str()),
            _ => None,
        };
        match parts {
            [] => Some(Cow::Borrowed("")),
            [one] => text(one).map(Cow::Borrowed),
            _ => parts
                .iter()
                .map(text)
                .collect::<Option<String>>()
                .map(Cow::Owned),
        }
    }

    /// The part with everything it borrows copied.
    pub fn into_owned(self) -> Part<'static> {
        let own = |s: Cow<'_, str>| Cow::Owned(s.into_owned());
        match self {
            Part::Text { text } => Part::Text { text: own(text) },
            Part::File(file) => Part::File(file),
            Part::Thinking {
                content,
                signature,
                redacted,
            } => Part::Thinking {
                content: own(content),
                signature: signature.map(|s| ThinkingSignature {
                    provider: own(s.provider),
                    value: own(s.value),
                }),
                redacted,
            },
            Part::ToolUse { id, name, input } => Part::ToolUse {
                id: own(id),
                name: own(name),
                input: Cow::Owned(input.into_owned()),
            },
            Part::ToolResult {
                tool_use_id,
                name,
                parts,
                is_error,
            } => Part::ToolResult {
                tool_use_id: own(tool_use_id),
                name: name.map(own),
                parts: parts.into_iter().map(Part::into_owned).collect(),
                is_error,
            },
        }
    }
}

/// Something found while building a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptDiagnostic {
    /// What it is about.
    pub kind: PromptDiagnosticKind,
    /// `error` when text was sent as written because its template failed; `warning` otherwise.
    pub severity: Severity,
    /// The 1-based line of the construct concerned.
    pub line: u32,
    /// What is wrong and what is sent instead.
    pub message: String,
}

/// What a [`PromptDiagnostic`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PromptDiagnosticKind {
    /// A tool call without a final result (a synthetic error result is sent).
    ToolUse,
    /// A job result whose job no tool result names.
    JobResult,
    /// A template that failed to render (the text is sent as written).
    Template,
    /// A file reference that could not be attached (the reference is sent as text), or a file
    /// that cannot go where it stands (a binary file in the system prompt).
    File,
    /// A role marker that names no role: its message is not sent (see
    /// [`flemma_ast::unknown_roles`]).
    Role,
}
