//! [`PromptBuilder`] and [`build_prompt`]: a parsed transcript as a [`Prompt`].

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use flemma_ast::escape::unescape_assistant;
use flemma_ast::{Document, JobResult, Message, Role, Segment, Template, ToolResult, ToolStatus};
use flemma_ids::Severity;
use serde_json::{Map, Value};

use super::{
    COMPACTION_PREFIX, NO_RESULT_PROVIDED, Part, Prompt, PromptDiagnostic, PromptDiagnosticKind,
    PromptMessage, PromptRole, ThinkingSignature,
};
use crate::template::jinja::MiniJinjaEngine;
use crate::template::{FileAccess, FilePart, Scope, TemplateEngine};
use crate::text::Joined;

/// Builds prompts: the template engine, the conversation's path and variables, and which
/// tools' results are templates.
///
/// ```
/// use flemma_providers::{Part, PromptBuilder};
///
/// let dir = std::env::temp_dir().join(format!("flemma-doc-builder-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("notes.txt"), "remember the milk")?;
/// let doc = flemma_ast::parse("@You:\nRead @./notes.txt, {{ who }}.\n");
/// let mut vars = serde_json::Map::new();
/// vars.insert("who".into(), "please".into());
/// let prompt = PromptBuilder::new()
///     .chat_path(dir.join("talk.chat"))
///     .variables(vars)
///     .build(&doc);
/// assert!(matches!(&prompt.messages[0].parts[1], Part::File(f) if f.filename() == "./notes.txt"));
/// assert_eq!(prompt.messages[0].parts[2], Part::Text { text: ", please.".into() });
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PromptBuilder {
    engine: Arc<dyn TemplateEngine>,
    chat_path: Option<PathBuf>,
    variables: Map<String, Value>,
    template_tools: HashSet<String>,
    files: FileAccess,
}

impl Default for PromptBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PromptBuilder {
    /// A builder with the minijinja engine, no chat path (relative references resolve against
    /// the working directory), no variables, and the built-in tools that declare
    /// [`Capability::EmitsTemplate`](flemma_schema::Capability::EmitsTemplate) (`read`) as the
    /// tools whose results are templates.
    pub fn new() -> Self {
        Self {
            engine: Arc::new(MiniJinjaEngine::new()),
            chat_path: None,
            variables: Map::new(),
            template_tools: flemma_schema::builtin::with_capability(
                flemma_schema::Capability::EmitsTemplate,
            )
            .map(|b| b.name.to_owned())
            .collect(),
            files: FileAccess::default(),
        }
    }

    /// The template engine.
    #[must_use]
    pub fn engine(mut self, engine: Arc<dyn TemplateEngine>) -> Self {
        self.engine = engine;
        self
    }

    /// The conversation's file: `__filename`, and the directory `@./file` references and
    /// `include()` resolve against.
    #[must_use]
    pub fn chat_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.chat_path = Some(path.into());
        self
    }

    /// The template variables (the frontmatter's).
    #[must_use]
    pub fn variables(mut self, variables: Map<String, Value>) -> Self {
        self.variables = variables;
        self
    }

    /// The tools whose results are templates (those that declare `emits_template`); the
    /// built-in ones that declare it (`read`) by default.
    #[must_use]
    pub fn template_tools<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.template_tools = names.into_iter().map(Into::into).collect();
        self
    }

    /// Which files `include()` and `@./file` references may read: by default
    /// [`FileAccess::Project`], the conversation's project only (the reference implementation
    /// reads any file: [`FileAccess::Any`]).
    ///
    /// ```
    /// use flemma_providers::{FileAccess, PromptBuilder};
    ///
    /// let doc = flemma_ast::parse("@You:\nMy key: @~/.ssh/id_ed25519\n");
    /// let prompt = PromptBuilder::new().file_access(FileAccess::None).build(&doc);
    /// assert!(prompt.diagnostics[0].message.contains("not allowed"));
    /// ```
    #[must_use]
    pub fn file_access(mut self, files: FileAccess) -> Self {
        self.files = files;
        self
    }

    /// Builds the prompt of `doc` (see [`build_prompt`]).
    pub fn build<'d>(&self, doc: &'d Document) -> Prompt<'d> {
        let scope = Scope::with_file_access(
            Arc::clone(&self.engine),
            self.chat_path.as_deref(),
            self.variables.clone(),
            self.files.clone(),
        );
        build(
            doc,
            &Builder {
                scope,
                template_tools: &self.template_tools,
            },
        )
    }
}

/// What the builder renders with.
struct Builder<'b> {
    scope: Scope,
    template_tools: &'b HashSet<String>,
}

/// Builds the provider-neutral prompt of a transcript with the
/// default [`PromptBuilder`].
///
/// * Templates and `@./file` references in `@System:` and `@You:` text, and in the results of
///   template tools (`read`), are rendered; a template that fails is sent as written with an
///   error diagnostic, and a reference to a file that cannot be read stays text with a
///   warning.
/// * `system` is the trimmed text of the last `@System:` message; roles other than `@You:`,
///   `@Assistant:` and `@System:` are dropped, and so are messages left without parts.
/// * In `@You:` messages, final tool results (no status, or `error`) become
///   [`Part::ToolResult`]s named after their tool use; results with a lifecycle status
///   (`pending`, `approved`, `rejected`, `denied`, `aborted`) are dropped. Text becomes
///   [`Part::Text`] (whitespace-only text is skipped).
/// * A Job Result becomes the text `[Job result for <tool> (<tool_use_id>)]\n<content>`, or
///   `[Job result for unknown tool (job: <job_id>)]\n<content>` (plus a diagnostic) when no
///   tool result carries its `job=` id. The `(error)` status of a Job Result is not conveyed
///   separately: a failed job sends its text alone, which says what went wrong
///   (`Job lost: session ended before completion.`, `Command exited with code 2`). Empty
///   content sends nothing.
/// * In `@Assistant:` messages, text, thinking (empty unsigned plain thinking is skipped) and
///   tool uses are kept; text and thinking as the model wrote them (the escape that kept its
///   structure-looking lines text is taken off: [`flemma_ast::escape`]). Abort markers are dropped, with the whitespace-only text after
///   them, when the message has a tool use, and become the text `<!-- MESSAGE -->` otherwise.
/// * A compacted conversation (see [`Document::compacted_at`]) is sent from the `@You:`
///   message holding its last `**Compaction:**` block on: the messages above it are not sent
///   (`@System:` ones aside), and the block becomes the text [`COMPACTION_PREFIX`] followed by
///   its summary.
/// * Malformed segments are never sent.
/// * Every tool call without a final result anywhere in the document gets a diagnostic and a
///   synthetic [`NO_RESULT_PROVIDED`] error result; these are sent together in one extra user
///   message after the history.
///
/// ```
/// use flemma_providers::{Part, PromptRole, build_prompt};
///
/// let doc = flemma_ast::parse("@System:\n Be brief. \n\n@You:\nHi!\n");
/// let prompt = build_prompt(&doc);
/// assert_eq!(prompt.system.as_deref(), Some("Be brief."));
/// assert_eq!(prompt.messages[0].role, PromptRole::User);
/// assert_eq!(prompt.messages[0].parts, vec![Part::text("Hi!")]);
/// ```
pub fn build_prompt(doc: &Document) -> Prompt<'_> {
    PromptBuilder::new().build(doc)
}

fn build<'d>(doc: &'d Document, builder: &Builder<'_>) -> Prompt<'d> {
    // A compacted conversation is sent from its last compaction on: the summary stands for
    // the messages above it (but the system prompt).
    let start = doc.compacted_at().unwrap_or(0);
    let context = Context::new(&doc.messages[start..]);
    let mut prompt = Prompt {
        system: None,
        messages: Vec::new(),
        diagnostics: Vec::new(),
    };
    prompt
        .diagnostics
        .extend(
            flemma_ast::unknown_roles(doc)
                .into_iter()
                .map(|d| PromptDiagnostic {
                    kind: PromptDiagnosticKind::Role,
                    severity: d.severity,
                    line: d.line,
                    message: d.message,
                }),
        );
    for (index, message) in doc.messages.iter().enumerate() {
        if index < start && message.role != Role::System {
            continue;
        }
        let (role, parts) = match &message.role {
            Role::System => {
                prompt.system = Some(system_text(message, builder, &mut prompt.diagnostics));
                continue;
            }
            Role::You => (
                PromptRole::User,
                user_parts(message, &context, builder, &mut prompt.diagnostics),
            ),
            Role::Assistant => (PromptRole::Assistant, assistant_parts(message)),
            Role::Other(_) => continue,
        };
        if !parts.is_empty() {
            prompt.messages.push(PromptMessage { role, parts });
        }
    }
    let synthetic = unresolved_results(&doc.messages[start..], &context, &mut prompt.diagnostics);
    if !synthetic.is_empty() {
        prompt.messages.push(PromptMessage {
            role: PromptRole::User,
            parts: synthetic,
        });
    }
    prompt
}

/// A hash map keyed by the document's ids (foldhash: ids are not attacker-chosen keys of a
/// long-lived table, and `SipHash` showed in profiles).
type IdMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What the builder looks up across the document, gathered in one pass.
struct Context<'d> {
    /// Tool use id → what the document says of it. One map for the names and the final
    /// results, so that each id is hashed once per segment that names it.
    ids: IdMap<&'d str, IdInfo<'d>>,
    /// Job id → (tool use id, tool name) of the tool result that started it.
    jobs: IdMap<&'d str, (&'d str, &'d str)>,
}

/// What the document says of one tool use id.
#[derive(Default, Clone, Copy)]
struct IdInfo<'d> {
    /// The tool name of the first tool use with the id.
    name: Option<&'d str>,
    /// Whether a final result has the id.
    resolved: bool,
}

impl<'d> Context<'d> {
    /// What `messages` (the messages sent) say.
    fn new(messages: &'d [Message]) -> Self {
        let mut ids: IdMap<&'d str, IdInfo<'d>> = IdMap::default();
        let mut started = Vec::new();
        for message in messages {
            for segment in &message.segments {
                match segment {
                    Segment::ToolUse(u) => {
                        let info = ids.entry(u.id.as_str()).or_default();
                        info.name = info.name.or(Some(u.name.as_str()));
                    }
                    Segment::ToolResult(r) => {
                        let job_id = r.job_id();
                        if r.is_final() {
                            ids.entry(r.tool_use_id.as_str()).or_default().resolved = true;
                        }
                        if let Some(job_id) = job_id {
                            started.push((job_id, r.tool_use_id.as_str()));
                        }
                    }
                    _ => {}
                }
            }
        }
        let mut jobs = IdMap::default();
        for (job_id, id) in started {
            let name = ids.get(id).and_then(|i| i.name).unwrap_or("unknown");
            jobs.entry(job_id).or_insert((id, name));
        }
        Self { ids, jobs }
    }

    /// The tool name of the first tool use with `id`.
    fn tool_name(&self, id: &str) -> Option<&'d str> {
        self.ids.get(id).and_then(|i| i.name)
    }

    /// Whether a final result has `id`.
    fn resolved(&self, id: &str) -> bool {
        self.ids.get(id).is_some_and(|i| i.resolved)
    }

    /// Whether every tool use has a final result.
    fn all_resolved(&self) -> bool {
        self.ids.values().all(|i| i.name.is_none() || i.resolved)
    }
}

/// Text segments concatenated, templates re-rendered as written (what a failed template
/// sends).
fn inline_text(segments: &[Segment]) -> String {
    let mut out = String::new();
    for segment in segments {
        push_inline(&mut out, segment);
    }
    out
}

/// Appends a text or template segment to `out`; other segments add nothing.
fn push_inline(out: &mut String, segment: &Segment) {
    match segment {
        Segment::Text(t) => out.push_str(&t.value),
        Segment::Expression(t) => push_template(out, "{{", t, "}}"),
        Segment::Code(t) => push_template(out, "{%", t, "%}"),
        _ => {}
    }
}

fn push_template(out: &mut String, open: &str, t: &Template, close: &str) {
    out.push_str(open);
    if t.trim_before {
        out.push('-');
    }
    out.push_str(&t.code);
    if t.trim_after {
        out.push('-');
    }
    out.push_str(close);
}

/// Whether a segment is text or a template.
fn is_inline(segment: &Segment) -> bool {
    matches!(
        segment,
        Segment::Text(_) | Segment::Expression(_) | Segment::Code(_)
    )
}

/// The first line of a run of segments (`fallback` when none has a position).
fn first_line(segments: &[Segment], fallback: u32) -> u32 {
    segments
        .iter()
        .find_map(|s| s.lines().map(|l| l.start_line))
        .unwrap_or(fallback)
}

/// Renders a run of text and template segments into text and file parts. A failed template
/// sends the run as written, with an error; a reference not attached stays text, with a
/// warning. Text without templates or references is borrowed.
fn render_run<'d>(
    segments: &'d [Segment],
    fallback_line: u32,
    builder: &Builder<'_>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Vec<Part<'d>> {
    let line = first_line(segments, fallback_line);
    match builder.scope.render_parts(segments, true) {
        Ok((parts, warnings)) => {
            diagnostics.extend(warnings.into_iter().map(|warning| PromptDiagnostic {
                kind: PromptDiagnosticKind::File,
                severity: Severity::Warning,
                line: warning.line,
                message: warning.message,
            }));
            parts
        }
        Err(err) => {
            diagnostics.push(PromptDiagnostic {
                kind: PromptDiagnosticKind::Template,
                severity: Severity::Error,
                line: err.line().unwrap_or(line),
                message: format!(
                    "Template error (the text is sent as written): {}",
                    flemma_ids::error_chain(&err)
                ),
            });
            vec![Part::text(inline_text(segments))]
        }
    }
}

/// Pushes the non-blank text parts and the file parts of `rendered`.
fn push_rendered<'d>(parts: &mut Vec<Part<'d>>, rendered: Vec<Part<'d>>) {
    parts.extend(rendered.into_iter().filter(|part| match part {
        Part::Text { text } => !text.trim().is_empty(),
        _ => true,
    }));
}

/// The system prompt, trimmed: the rendered text, text files inlined; other files cannot go
/// in a system prompt and are named instead, with a warning.
fn system_text<'d>(
    message: &'d Message,
    builder: &Builder<'_>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Cow<'d, str> {
    let line = message.span.start_line;
    let mut text = Joined::default();
    for part in render_run(&message.segments, line, builder, diagnostics) {
        match part {
            Part::Text { text: t } => text.push(t),
            Part::File(FilePart::TextFile { text: t, .. }) => text.push(t),
            Part::File(file) => {
                diagnostics.push(PromptDiagnostic {
                    kind: PromptDiagnosticKind::File,
                    severity: Severity::Warning,
                    line,
                    message: format!(
                        "{} ({}) cannot be attached to the system prompt; it is named instead.",
                        file.filename(),
                        file.mime_type()
                    ),
                });
                text.push(file.as_text_fallback());
            }
            _ => {}
        }
    }
    text.take_trimmed().unwrap_or_default()
}

fn user_parts<'d>(
    message: &'d Message,
    context: &Context<'d>,
    builder: &Builder<'_>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Vec<Part<'d>> {
    let mut parts = Vec::with_capacity(message.segments.len());
    let segments = &message.segments;
    let mut i = 0;
    while i < segments.len() {
        if is_inline(&segments[i]) {
            let run = segments[i..].iter().take_while(|s| is_inline(s)).count();
            let rendered = render_run(
                &segments[i..i + run],
                message.span.start_line,
                builder,
                diagnostics,
            );
            push_rendered(&mut parts, rendered);
            i += run;
            continue;
        }
        match &segments[i] {
            Segment::ToolResult(result) => {
                if let Some(part) = tool_result_part(result, context, builder, diagnostics) {
                    parts.push(part);
                }
            }
            Segment::JobResult(job) => {
                if let Some(part) = job_result_part(job, context, diagnostics) {
                    parts.push(part);
                }
            }
            Segment::Compaction(compaction) => {
                parts.push(Part::text(format!(
                    "{COMPACTION_PREFIX}{}",
                    compaction.content
                )));
            }
            _ => {}
        }
        i += 1;
    }
    parts
}

fn tool_result_part<'d>(
    result: &'d ToolResult,
    context: &Context<'d>,
    builder: &Builder<'_>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Option<Part<'d>> {
    if !result.is_final() {
        return None;
    }
    let id = result.tool_use_id.as_str();
    let name = context.tool_name(id);
    let parts = if name.is_some_and(|n| builder.template_tools.contains(n)) {
        let segments = result.segments();
        render_run(&segments, result.span.start_line, builder, diagnostics)
            .into_iter()
            .map(Part::into_owned)
            .collect()
    } else if result.content.is_empty() {
        Vec::new()
    } else {
        vec![Part::text(result.content.as_str())]
    };
    Some(Part::ToolResult {
        tool_use_id: Cow::Borrowed(id),
        name: name.map(Cow::Borrowed),
        parts,
        is_error: result.status == Some(ToolStatus::Error),
    })
}

fn job_result_part(
    job: &JobResult,
    context: &Context<'_>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Option<Part<'static>> {
    if job.content.is_empty() {
        return None;
    }
    let job_id = job.job_id.as_str();
    let mut text = if let Some((tool_use_id, name)) = context.jobs.get(job_id) {
        format!("[Job result for {name} ({tool_use_id})]\n")
    } else {
        diagnostics.push(PromptDiagnostic {
            kind: PromptDiagnosticKind::JobResult,
            severity: Severity::Warning,
            line: job.span.start_line,
            message: format!(
                "Job result '{job_id}' matches no tool result; it is sent as the result of an unknown tool."
            ),
        });
        format!("[Job result for unknown tool (job: {job_id})]\n")
    };
    // Spec §8.6: the `(error)` status is not conveyed separately, only the text.
    text.push_str(&job.content);
    Some(Part::text(text))
}

fn assistant_parts(message: &Message) -> Vec<Part<'_>> {
    let has_tool_use = message.tool_uses().next().is_some();
    let mut parts = Vec::with_capacity(message.segments.len());
    let mut text = Joined::default();
    for segment in &message.segments {
        match segment {
            Segment::Text(t) => {
                // What the model wrote, its structure-looking lines without the escape.
                text.push(unescape_assistant(&t.value));
                continue;
            }
            Segment::Expression(_) | Segment::Code(_) => {
                let mut written = String::new();
                push_inline(&mut written, segment);
                text.push(written);
                continue;
            }
            _ => parts.extend(text.take_unless_blank().map(Part::text)),
        }
        match segment {
            Segment::Thinking(thinking) => {
                if thinking.content.trim().is_empty()
                    && thinking.signature.is_none()
                    && !thinking.redacted
                {
                    continue;
                }
                parts.push(Part::Thinking {
                    content: unescape_assistant(&thinking.content),
                    signature: thinking.signature.as_ref().map(|s| ThinkingSignature {
                        provider: Cow::Borrowed(&s.provider),
                        value: Cow::Borrowed(&s.value),
                    }),
                    redacted: thinking.redacted,
                });
            }
            Segment::ToolUse(tool_use) => parts.push(Part::ToolUse {
                id: Cow::Borrowed(tool_use.id.as_str()),
                name: Cow::Borrowed(tool_use.name.as_str()),
                input: Cow::Borrowed(tool_use.input()),
            }),
            // With a tool use the marker is dropped; the whitespace-only text around it is
            // skipped like any other whitespace-only text.
            Segment::Aborted(aborted) if !has_tool_use => {
                parts.push(Part::text(format!("<!-- {} -->", aborted.message)));
            }
            _ => {}
        }
    }
    parts.extend(text.take_unless_blank().map(Part::text));
    parts
}

/// Synthetic error results for every tool call without a final result, with their warnings.
fn unresolved_results<'d>(
    messages: &'d [Message],
    context: &Context<'d>,
    diagnostics: &mut Vec<PromptDiagnostic>,
) -> Vec<Part<'d>> {
    if context.all_resolved() {
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut parts = Vec::new();
    for tool_use in messages.iter().flat_map(Message::tool_uses) {
        let id = tool_use.id.as_str();
        if context.resolved(id) || !seen.insert(id) {
            continue;
        }
        let name = tool_use.name.as_str();
        diagnostics.push(PromptDiagnostic {
            kind: PromptDiagnosticKind::ToolUse,
            severity: Severity::Warning,
            line: tool_use.span.start_line,
            message: format!(
                "Tool call '{name}' ({id}) has no matching tool result. A synthetic '{NO_RESULT_PROVIDED}' error response will be sent to the API."
            ),
        });
        parts.push(Part::ToolResult {
            tool_use_id: Cow::Borrowed(id),
            name: Some(Cow::Borrowed(name)),
            parts: vec![Part::text(NO_RESULT_PROVIDED)],
            is_error: true,
        });
    }
    parts
}
