//! The typed AST of a `.chat` transcript.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::modeline::Modeline;
use flemma_ids::{JobId, ToolUseId};

mod diagnostic;
mod span;
mod tool;

pub use diagnostic::{Diagnostic, DiagnosticKind};
pub use span::{FenceLayout, LineSpan, TextSpan};
pub use tool::{JsonObject, ToolStatus, ToolUse};

/// A parsed transcript.
///
/// Produced by [`parse`](crate::parse); positions are 1-based line numbers of the source text.
/// Serializes to the JSON contract of `flemma parse --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Document {
    /// The fenced block on line 1, when there is one.
    pub frontmatter: Option<Frontmatter>,
    /// Lines between the frontmatter and the first role marker. They belong to no message and
    /// are never sent anywhere; they are kept so that printing loses nothing.
    pub preamble: Option<String>,
    /// The messages in document order.
    pub messages: Vec<Message>,
    /// Everything the parser found wrong, in document order.
    pub diagnostics: Vec<Diagnostic>,
    /// Number of lines in the source; a final newline ends the last line, it does not start one.
    pub line_count: u32,
}

impl Document {
    /// Whether the parser reported no diagnostics.
    pub fn is_clean(&self) -> bool {
        self.diagnostics.is_empty()
    }

    /// The index of the last `@You:` message holding a [`Compaction`] block: the messages
    /// before it (but `@System:` ones) are not sent to a model, its summary stands for them.
    /// `None` when the conversation was never compacted.
    ///
    /// ```
    /// let doc = flemma_ast::parse(
    ///     "@System:\nBe brief.\n\n@You:\nHi\n\n@You:\n**Compaction:**\n```\nThey said hi.\n```\n\n@Assistant:\nHello.\n",
    /// );
    /// assert_eq!(doc.compacted_at(), Some(2));
    /// ```
    pub fn compacted_at(&self) -> Option<usize> {
        self.messages
            .iter()
            .rposition(|m| m.role == Role::You && m.compaction().is_some())
    }
}

/// The fenced block on the first line of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Frontmatter {
    /// The language word after the opening backticks (`lua`, `json`).
    pub language: String,
    /// The lines between the fences joined by `\n`.
    pub code: String,
    /// Line 1 to the closing fence.
    pub span: LineSpan,
}

/// Who speaks a message.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// `@System:`
    System,
    /// `@You:` (the user).
    You,
    /// `@Assistant:`
    Assistant,
    /// Any other `@Word:` marker. Parsed like `System`, dropped from provider requests.
    Other(String),
}

impl Role {
    /// Maps a marker word to a role.
    pub fn from_marker(word: &str) -> Self {
        match word {
            "System" => Role::System,
            "You" => Role::You,
            "Assistant" => Role::Assistant,
            other => Role::Other(other.to_owned()),
        }
    }

    /// The marker word (`You` for `@You:`).
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "System",
            Role::You => "You",
            Role::Assistant => "Assistant",
            Role::Other(word) => word,
        }
    }
}

impl fmt::Debug for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One `@Role:` message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The content, split into segments.
    pub segments: Vec<Segment>,
    /// From the marker line to the line before the next marker (or the last line).
    pub span: LineSpan,
}

impl Message {
    /// Whether the message holds nothing but whitespace (the empty `@You:` a complete response
    /// leaves for the user).
    ///
    /// ```
    /// let doc = flemma_ast::parse("@Assistant:\nDone.\n\n@You:\n\n");
    /// assert!(!doc.messages[0].is_blank());
    /// assert!(doc.messages[1].is_blank());
    /// ```
    pub fn is_blank(&self) -> bool {
        self.segments
            .iter()
            .all(|s| matches!(s, Segment::Text(t) if t.value.trim().is_empty()))
    }

    /// Whether the last segment that is not whitespace-only text is an abort marker.
    pub fn is_aborted(&self) -> bool {
        self.segments
            .iter()
            .rev()
            .find(|s| !matches!(s, Segment::Text(t) if t.value.trim().is_empty()))
            .is_some_and(|s| matches!(s, Segment::Aborted(_)))
    }

    /// The tool uses of the message, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUse> {
        self.segments.iter().filter_map(|s| match s {
            Segment::ToolUse(u) => Some(&**u),
            _ => None,
        })
    }

    /// The tool results of the message, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.segments.iter().filter_map(|s| match s {
            Segment::ToolResult(r) => Some(&**r),
            _ => None,
        })
    }

    /// The message's compaction block, when it holds one (the first, when it holds several).
    ///
    /// ```
    /// let doc = flemma_ast::parse(
    ///     "@You:\nOld question\n\n@You:\n**Compaction:** (messages=1)\n```\nThey asked.\n```\n",
    /// );
    /// assert!(doc.messages[0].compaction().is_none());
    /// assert_eq!(doc.messages[1].compaction().unwrap().content, "They asked.");
    /// ```
    pub fn compaction(&self) -> Option<&Compaction> {
        self.segments.iter().find_map(|s| match s {
            Segment::Compaction(c) => Some(&**c),
            _ => None,
        })
    }

    /// The job results of the message, in order.
    pub fn job_results(&self) -> impl Iterator<Item = &JobResult> {
        self.segments.iter().filter_map(|s| match s {
            Segment::JobResult(r) => Some(&**r),
            _ => None,
        })
    }
}

/// A piece of message content.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Segment {
    /// Plain text.
    Text(Text),
    /// A `{{ … }}` template expression.
    Expression(Template),
    /// A `{% … %}` template statement.
    Code(Template),
    /// A `<thinking>` block.
    Thinking(Box<Thinking>),
    /// A `**Tool Use:**` block.
    ToolUse(Box<ToolUse>),
    /// A `**Tool Result:**` block.
    ToolResult(Box<ToolResult>),
    /// A `**Job Result:**` block.
    JobResult(Box<JobResult>),
    /// A `**Compaction:**` block: the summary that stands for the messages above its message.
    Compaction(Box<Compaction>),
    /// An abort marker.
    Aborted(Aborted),
    /// Lines the parser could not read as the construct they start (each comes with a
    /// diagnostic). They are kept verbatim so nothing is lost, and are never sent to a provider.
    Malformed(Malformed),
}

impl Segment {
    /// The lines the segment covers, when it has a position.
    pub fn lines(&self) -> Option<LineSpan> {
        match self {
            Segment::Text(t) => t.span.map(|s| s.lines()),
            Segment::Expression(t) | Segment::Code(t) => Some(t.span.lines()),
            Segment::Thinking(t) => Some(t.span),
            Segment::ToolUse(t) => Some(t.span),
            Segment::ToolResult(t) => Some(t.span),
            Segment::JobResult(t) => Some(t.span),
            Segment::Compaction(t) => Some(t.span),
            Segment::Aborted(t) => Some(t.span),
            Segment::Malformed(t) => Some(t.span),
        }
    }

    /// Whether the segment is inline template text (text, expression or code).
    pub(crate) fn is_inline(&self) -> bool {
        matches!(
            self,
            Segment::Text(_) | Segment::Expression(_) | Segment::Code(_)
        )
    }
}

/// Plain text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Text {
    /// The text, lines joined by `\n`.
    pub value: String,
    /// Where it stands; absent for the empty text of an empty message.
    pub span: Option<TextSpan>,
}

/// A template expression (`{{ code }}`) or statement (`{% code %}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Template {
    /// The code between the delimiters, without trim dashes.
    pub code: String,
    /// A `-` right after the opener.
    pub trim_before: bool,
    /// A `-` right before the closer.
    pub trim_after: bool,
    /// Where it stands, delimiters included.
    pub span: TextSpan,
}

/// A provider signature on a thinking block (`anthropic:signature="…"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signature {
    /// The provider word (`anthropic`, `openai`, `vertex`, …).
    pub provider: String,
    /// The opaque signature.
    pub value: String,
}

/// A `<thinking>` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Thinking {
    /// The lines between the tags joined by `\n`.
    pub content: String,
    /// The provider signature, when the open tag has one.
    pub signature: Option<Signature>,
    /// `<thinking redacted>`: the content is opaque provider data.
    pub redacted: bool,
    /// Written as one self-closing tag (`<thinking p:signature="…"/>`).
    #[serde(skip)]
    pub self_closing: bool,
    /// From the open tag to the close tag.
    pub span: LineSpan,
}

/// A `**Tool Result:**` block.
///
/// Serializes with its template [`segments`](Self::segments) included.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    /// The id of the tool use it answers.
    pub tool_use_id: ToolUseId,
    /// The status from the header suffix; `None` for a final successful result.
    pub status: Option<ToolStatus>,
    /// The other suffix tokens, kept for round trips (`job=…`). Positionals are numbered 1..n.
    pub meta: Modeline,
    /// The fence content verbatim.
    pub content: String,
    /// How the fence was written.
    pub layout: FenceLayout,
    /// From the header to the closing fence.
    pub span: LineSpan,
}

impl ToolResult {
    /// Whether the result is final: no status (success) or `error`.
    pub fn is_final(&self) -> bool {
        self.status.is_none_or(|s| !s.is_lifecycle())
    }

    /// The content parsed for `{{ }}` / `{% %}` templates, with positions.
    ///
    /// Empty for lifecycle placeholders (`pending`, `approved`, …), whose content is never
    /// evaluated.
    pub fn segments(&self) -> Vec<Segment> {
        if !self.is_final() {
            return Vec::new();
        }
        let content_lines = if self.content.is_empty() {
            0
        } else {
            memchr::memchr_iter(b'\n', self.content.as_bytes()).count() as u32 + 1
        };
        let first_line = self.span.end_line.saturating_sub(content_lines).max(1);
        crate::template::parse_segments(&self.content, first_line)
    }

    /// The `job=` id of a background placeholder.
    pub fn job_id(&self) -> Option<&str> {
        self.meta
            .named("job")
            .and_then(crate::modeline::Value::as_str)
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("ToolResult", 6)?;
        s.serialize_field("tool_use_id", &self.tool_use_id)?;
        s.serialize_field("status", &self.status)?;
        s.serialize_field("meta", &self.meta)?;
        s.serialize_field("content", &self.content)?;
        s.serialize_field("segments", &self.segments())?;
        s.serialize_field("span", &self.span)?;
        s.end()
    }
}

/// The status a `**Job Result:**` header can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// The job failed.
    Error,
}

/// A `**Job Result:**` block: the delivered output of a background job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobResult {
    /// The job id.
    pub job_id: JobId,
    /// `Some(Error)` for a failed job.
    pub status: Option<JobStatus>,
    /// Other suffix tokens.
    pub meta: Modeline,
    /// The fence content verbatim (empty when there is no block).
    pub content: String,
    /// How the fence was written; `None` when the header has no block.
    #[serde(skip)]
    pub layout: Option<FenceLayout>,
    /// From the header to the closing fence (the header alone when there is no block).
    pub span: LineSpan,
}

/// A `**Compaction:**` block in a `@You:` message: a summary of the conversation above that
/// message, written by a model when the conversation was compacted.
///
/// The messages above the message holding the last such block stay in the file and are not
/// sent: the summary goes in their place. Removing the block sends them again. Its suffix
/// records what was compacted (`messages=48 tokens=182345 summary=2310`, see the accessors).
///
/// ```
/// let doc = flemma_ast::parse(
///     "@You:\n**Compaction:** (messages=12 tokens=90000 summary=800)\n```\nThe user wants a parser.\n```\n",
/// );
/// let block = doc.messages[0].compaction().unwrap();
/// assert_eq!(block.messages(), Some(12));
/// assert_eq!(block.tokens(), Some(90_000));
/// assert_eq!(block.summary_tokens(), Some(800));
/// assert_eq!(flemma_ast::print(&doc), flemma_ast::print(&flemma_ast::parse(&flemma_ast::print(&doc))));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Compaction {
    /// The suffix tokens (`messages=…`, `tokens=…`, `summary=…`, and any others, kept for
    /// round trips).
    pub meta: Modeline,
    /// The summary: the fence content verbatim.
    pub content: String,
    /// How the fence was written.
    #[serde(skip)]
    pub layout: FenceLayout,
    /// From the header to the closing fence.
    pub span: LineSpan,
}

impl Compaction {
    fn count(&self, key: &str) -> Option<u64> {
        match self.meta.named(key)? {
            crate::modeline::Value::Integer(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    /// How many messages the summary stands for (`messages=`).
    pub fn messages(&self) -> Option<u64> {
        self.count("messages")
    }

    /// About how many tokens those messages took in a request (`tokens=`).
    pub fn tokens(&self) -> Option<u64> {
        self.count("tokens")
    }

    /// About how many tokens the summary takes (`summary=`).
    pub fn summary_tokens(&self) -> Option<u64> {
        self.count("summary")
    }
}

/// An abort marker: `<!-- flemma:aborted: MESSAGE -->`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Aborted {
    /// The trimmed message.
    pub message: String,
    /// The marker line.
    pub span: LineSpan,
}

/// Lines kept verbatim because they could not be read (see [`Segment::Malformed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Malformed {
    /// The lines joined by `\n`.
    pub text: String,
    /// Where they stand.
    pub span: LineSpan,
}
