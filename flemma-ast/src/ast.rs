//! The typed AST of a `.chat` transcript (spec §1.14).

use std::fmt;

use serde::{Serialize, Serializer};

use crate::modeline::Modeline;
use flemma_ids::{JobId, ToolName, ToolUseId};

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
}

/// A line range, 1-based and inclusive on both ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct LineSpan {
    /// First line.
    pub start_line: u32,
    /// Last line.
    pub end_line: u32,
}

impl LineSpan {
    /// A span covering `start_line..=end_line`.
    pub fn new(start_line: u32, end_line: u32) -> Self {
        Self {
            start_line,
            end_line,
        }
    }

    /// Whether `line` lies inside the span.
    pub fn contains_line(&self, line: u32) -> bool {
        (self.start_line..=self.end_line).contains(&line)
    }
}

/// A span inside text: 1-based lines and 1-based inclusive byte columns.
///
/// An empty segment has `end_col == start_col - 1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TextSpan {
    /// First line.
    pub start_line: u32,
    /// Byte column of the first byte on `start_line`.
    pub start_col: u32,
    /// Last line.
    pub end_line: u32,
    /// Byte column of the last byte on `end_line`.
    pub end_col: u32,
}

impl TextSpan {
    /// The covered lines.
    pub fn lines(&self) -> LineSpan {
        LineSpan::new(self.start_line, self.end_line)
    }

    /// Whether (`line`, `col`) lies inside the span.
    pub fn contains(&self, line: u32, col: u32) -> bool {
        (self.start_line, self.start_col) <= (line, col)
            && (line, col) <= (self.end_line, self.end_col)
    }
}

/// The fenced block on the first line of a file (spec §1.2).
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
    /// Whether the last segment that is not whitespace-only text is an abort marker (spec §1.10).
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

/// How a fenced block was written, kept so printing reproduces it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FenceLayout {
    /// The language word after the opening backticks (`json`), if any.
    pub language: Option<String>,
    /// Whatever follows the language word after whitespace, if anything.
    pub info: Option<String>,
    /// Text glued to the language word without whitespace (the `**x**` of ```` ```json**x** ````),
    /// kept verbatim so that printing does not change what the line means. When set, `info`
    /// is `None`.
    pub glued: Option<String>,
    /// Whether a blank line separates the header from the fence.
    pub blank_after_header: bool,
    /// Backticks of the fence as written; `0` lets the printer size it to the content.
    ///
    /// Kept because a fence's length can matter to the lines around it: a block fenced with
    /// one backtick inside a message-level ```` ``` ```` region does not close that region,
    /// where a three-backtick fence would.
    pub ticks: usize,
    /// Backticks of the closing fence as written; it may be longer than the opener's.
    /// Ignored when [`ticks`](Self::ticks) is `0` or this is shorter than it.
    pub closing_ticks: usize,
}

/// A JSON object, as tool inputs are.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// A `**Tool Use:**` block: the model asking for a tool.
///
/// The input is kept as written and decoded on first use: the parser only checks that it is a
/// JSON object, which keeps parsing large transcripts fast and lean.
#[derive(Debug, Clone)]
pub struct ToolUse {
    /// The call id.
    pub id: ToolUseId,
    /// The tool name as written.
    pub name: ToolName,
    /// How the fence was written.
    pub layout: FenceLayout,
    /// From the header to the closing fence.
    pub span: LineSpan,
    /// The fence content exactly as written (a JSON object).
    raw_input: String,
    decoded: std::sync::OnceLock<JsonObject>,
}

impl ToolUse {
    /// A tool use with `input` written as one line of JSON, the way the harness writes it.
    ///
    /// ```
    /// use flemma_ast::{LineSpan, ToolName, ToolUse, ToolUseId};
    /// let input = serde_json::json!({"command": "ls"}).as_object().cloned().unwrap();
    /// let call = ToolUse::new(ToolUseId::new("t1")?, ToolName::new("bash")?, input, LineSpan::new(1, 4));
    /// assert_eq!(call.raw_input(), r#"{"command":"ls"}"#);
    /// assert_eq!(call.input()["command"], "ls");
    /// # Ok::<(), flemma_ast::InvalidId>(())
    /// ```
    pub fn new(id: ToolUseId, name: ToolName, input: JsonObject, span: LineSpan) -> Self {
        let raw_input = serde_json::to_string(&input).unwrap_or_else(|_| "{}".to_owned());
        Self {
            id,
            name,
            layout: FenceLayout {
                language: Some("json".to_owned()),
                info: None,
                glued: None,
                blank_after_header: true,
                ticks: 0,
                closing_ticks: 0,
            },
            span,
            raw_input,
            decoded: std::sync::OnceLock::from(input),
        }
    }

    /// Wraps fence content the parser has checked to be a JSON object.
    pub(crate) fn from_checked(
        id: ToolUseId,
        name: ToolName,
        raw_input: String,
        layout: FenceLayout,
        span: LineSpan,
    ) -> Self {
        Self {
            id,
            name,
            layout,
            span,
            raw_input,
            decoded: std::sync::OnceLock::new(),
        }
    }

    /// The decoded input object (JSON `null` values are kept).
    ///
    /// A parsed tool use always decodes: the parser checks its text with the same decoder
    /// and the same nesting limit ([`MAX_INPUT_DEPTH`](crate::MAX_INPUT_DEPTH)), and keeps
    /// anything it refuses as a malformed segment with a diagnostic, so no call is ever run
    /// with an input other than the one written. The empty object below is never reached.
    pub fn input(&self) -> &JsonObject {
        self.decoded
            .get_or_init(|| serde_json::from_str(&self.raw_input).unwrap_or_default())
    }

    /// The fence content exactly as written.
    pub fn raw_input(&self) -> &str {
        &self.raw_input
    }

    /// The `label` input field, when it is a string.
    pub fn label(&self) -> Option<&str> {
        self.input()
            .get("label")
            .and_then(serde_json::Value::as_str)
    }
}

impl PartialEq for ToolUse {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
            && self.name == other.name
            && self.layout == other.layout
            && self.span == other.span
            && (self.raw_input == other.raw_input || self.input() == other.input())
    }
}

impl Serialize for ToolUse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("ToolUse", 4)?;
        s.serialize_field("id", &self.id)?;
        s.serialize_field("name", &self.name)?;
        s.serialize_field("input", self.input())?;
        s.serialize_field("span", &self.span)?;
        s.end()
    }
}

/// The status word in a `**Tool Result:**` header suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// Waiting for a human decision; blocks sending.
    Pending,
    /// Approved, waiting to run.
    Approved,
    /// Rejected by the user.
    Rejected,
    /// Blocked by policy.
    Denied,
    /// The response that asked for the tool was interrupted.
    Aborted,
    /// A final error result.
    Error,
}

impl ToolStatus {
    /// Reads a status word or one of its aliases (`reject`, `deny`).
    pub fn from_word(word: &str) -> Option<Self> {
        Some(match word {
            "pending" => ToolStatus::Pending,
            "approved" => ToolStatus::Approved,
            "rejected" | "reject" => ToolStatus::Rejected,
            "denied" | "deny" => ToolStatus::Denied,
            "aborted" => ToolStatus::Aborted,
            "error" => ToolStatus::Error,
            _ => return None,
        })
    }

    /// The canonical word.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Pending => "pending",
            ToolStatus::Approved => "approved",
            ToolStatus::Rejected => "rejected",
            ToolStatus::Denied => "denied",
            ToolStatus::Aborted => "aborted",
            ToolStatus::Error => "error",
        }
    }

    /// Whether this is a lifecycle placeholder status (everything but `error`).
    pub fn is_lifecycle(self) -> bool {
        self != ToolStatus::Error
    }
}

impl fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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

    /// The content parsed for `{{ }}` / `{% %}` templates, with positions (spec §1.7).
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

/// Which construct a diagnostic is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// A `**Tool Use:**` block.
    ToolUse,
    /// A `**Tool Result:**` block.
    ToolResult,
    /// A `<thinking>` block.
    Thinking,
}

impl DiagnosticKind {
    /// The kind's name as in the JSON contract.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::ToolUse => "tool_use",
            DiagnosticKind::ToolResult => "tool_result",
            DiagnosticKind::Thinking => "thinking",
        }
    }
}

/// How serious a diagnostic is: the one severity of every flemma diagnostic, owned by
/// `flemma-ids` and the same type as `flemma_config::Severity`.
pub use flemma_ids::Severity;

/// Something the parser found wrong, with the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The construct concerned.
    pub kind: DiagnosticKind,
    /// How serious it is.
    pub severity: Severity,
    /// The exact text (spec §1.13).
    pub message: String,
    /// The 1-based line the construct starts on.
    pub line: u32,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: {} ({}): {}",
            self.line,
            self.severity.as_str(),
            self.kind.as_str(),
            self.message
        )
    }
}
