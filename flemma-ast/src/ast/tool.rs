//! Tool uses and the status words of results.

use std::fmt;

use serde::{Serialize, Serializer};

use super::span::{FenceLayout, LineSpan};
use flemma_ids::{ToolName, ToolUseId};

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
    /// use flemma_ast::{LineSpan, ToolUse};
    /// use flemma_ids::{ToolName, ToolUseId};
    /// let input = serde_json::json!({"command": "ls"}).as_object().cloned().unwrap();
    /// let call = ToolUse::new(ToolUseId::new("t1")?, ToolName::new("bash")?, input, LineSpan::new(1, 4));
    /// assert_eq!(call.raw_input(), r#"{"command":"ls"}"#);
    /// assert_eq!(call.input()["command"], "ls");
    /// # Ok::<(), flemma_ids::InvalidId>(())
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
