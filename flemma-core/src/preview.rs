//! Previews of tool calls: what a pending placeholder shows about the call it
//! waits for, as `<tool>: <detail> — <label>`.

use serde_json::{Map, Value};

/// What a tool says about one of its calls: a detail (the technical summary: a command, a
/// path) and a label (the model's stated intent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preview {
    /// The model's stated intent (`input.label`).
    pub label: Option<String>,
    /// The technical summary.
    pub detail: Option<String>,
}

impl Preview {
    /// A preview with only a detail.
    pub fn detail(detail: impl Into<String>) -> Self {
        Self {
            label: None,
            detail: Some(detail.into()),
        }
    }

    /// A detail built from parts joined with two spaces (`config.lua  +100,50`), empty parts
    /// left out.
    pub fn parts<I, S>(parts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined = parts
            .into_iter()
            .filter(|p| !p.as_ref().is_empty())
            .map(|p| p.as_ref().to_owned())
            .collect::<Vec<_>>()
            .join("  ");
        Self {
            label: None,
            detail: (!joined.is_empty()).then_some(joined),
        }
    }

    /// Adds a label.
    #[must_use]
    pub fn with_label(mut self, label: Option<impl Into<String>>) -> Self {
        self.label = label.map(Into::into);
        self
    }

    /// The `label` string of a call's input, if it has one (built-in tools take it this way).
    pub fn label_of(input: &Value) -> Option<String> {
        input
            .get("label")
            .and_then(Value::as_str)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
    }
}

impl From<String> for Preview {
    /// A plain string is a detail (its label is never taken from the input).
    fn from(detail: String) -> Self {
        Preview::detail(detail)
    }
}

impl From<&str> for Preview {
    fn from(detail: &str) -> Self {
        Preview::detail(detail)
    }
}

/// The preview of a tool without a formatter: the input as `{key: value, …}` on one line when
/// it fits in `max_len` characters, else as `key: value` lines; a string `label` is promoted to
/// the label and left out of the body. Strings and compound values are JSON-encoded; the
/// harness parameters (`flemma.background`, `flemma.save_to`) are left out.
///
/// ```
/// use flemma_core::preview::generic_preview;
///
/// let input = serde_json::json!({"query": "search term", "limit": 10, "label": "looking it up"});
/// let preview = generic_preview(&input, 80);
/// assert_eq!(preview.detail.as_deref(), Some(r#"{query: "search term", limit: 10}"#));
/// assert_eq!(preview.label.as_deref(), Some("looking it up"));
/// ```
pub fn generic_preview(input: &Value, max_len: usize) -> Preview {
    let empty = Map::new();
    let object = input.as_object().unwrap_or(&empty);
    let label = Preview::label_of(input);
    let pairs: Vec<(&String, String)> = object
        .iter()
        .filter(|(key, _)| !(label.is_some() && key.as_str() == "label"))
        .filter(|(key, _)| !matches!(key.as_str(), "flemma.background" | "flemma.save_to"))
        .map(|(key, value)| (key, value.to_string()))
        .collect();
    let detail = if pairs.is_empty() {
        None
    } else {
        let inline = format!(
            "{{{}}}",
            pairs
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if inline.chars().count() <= max_len {
            Some(inline)
        } else {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
    };
    Preview { label, detail }
}

/// Renders a preview as one line of at most `width` characters: `<tool>: <detail> — <label>`
/// (either part optional), line breaks shown as `↵`, the detail shortened first (with `…`),
/// then the label.
///
/// ```
/// use flemma_core::preview::{Preview, render_preview};
///
/// let p = Preview::detail("$ git status").with_label(Some("checking repo"));
/// assert_eq!(render_preview("bash", &p, 80), "bash: $ git status — checking repo");
/// assert_eq!(render_preview("bash", &p, 24), "bash: $… — checking repo");
/// ```
pub fn render_preview(tool: &str, preview: &Preview, width: usize) -> String {
    let clean = |s: &Option<String>| {
        s.as_deref()
            .map(|s| {
                s.replace("\r\n", "\u{21b5}")
                    .replace(['\n', '\r'], "\u{21b5}")
            })
            .filter(|s| !s.is_empty())
    };
    let mut detail = clean(&preview.detail);
    let mut label = clean(&preview.label);
    let prefix = format!("{tool}: ");
    let render = |detail: &Option<String>, label: &Option<String>| match (detail, label) {
        (Some(d), Some(l)) => format!("{prefix}{d} \u{2014} {l}"),
        (Some(only), None) | (None, Some(only)) => format!("{prefix}{only}"),
        (None, None) => tool.to_owned(),
    };
    let full = render(&detail, &label);
    let over = full.chars().count().saturating_sub(width);
    if over == 0 {
        return full;
    }
    // Shorten the detail first, keeping at least one character and the ellipsis.
    if let Some(d) = detail.as_mut() {
        let len = d.chars().count();
        let keep = len.saturating_sub(over + 1).max(1);
        if keep < len {
            *d = shorten(d, keep);
        }
    }
    let over = render(&detail, &label)
        .chars()
        .count()
        .saturating_sub(width);
    if over > 0
        && let Some(l) = label.as_mut()
    {
        let len = l.chars().count();
        let keep = len.saturating_sub(over + 1).max(1);
        if keep < len {
            *l = shorten(l, keep);
        }
    }
    render(&detail, &label)
}

fn shorten(text: &str, keep: usize) -> String {
    let mut out: String = text.chars().take(keep).collect();
    // No blank before the ellipsis.
    let trimmed = out.trim_end().len();
    if trimmed > 0 {
        out.truncate(trimmed);
    }
    out.push('\u{2026}');
    out
}
