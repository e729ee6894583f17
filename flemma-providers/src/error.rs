//! Provider errors, from HTTP error bodies of any shape.

use serde_json::Value;

/// What a provider answered instead of a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// An HTTP error status with the provider's message.
    #[error("HTTP {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The provider's message (from JSON, the HTML title, or the plain text).
        message: String,
        /// The provider's error type, when it says (`invalid_request_error`).
        kind: Option<String>,
    },
}

/// Reads an error body: JSON (`{"error": {"message", "type"}}`, `{"error": "..."}`,
/// `{"message": ...}`, Vertex's `[{"error": ...}]`), HTML (its `<title>`, else its text) or plain
/// text.
///
/// ```
/// let err = flemma_providers::error_from_body(502, "<html><head><title>502 Bad Gateway</title></head></html>");
/// assert_eq!(err.to_string(), "HTTP 502: 502 Bad Gateway");
/// ```
pub fn error_from_body(status: u16, body: &str) -> ProviderError {
    let trimmed = body.trim();
    if let Ok(json) = serde_json::from_str::<Value>(trimmed) {
        let json = json
            .as_array()
            .and_then(|a| a.first())
            .cloned()
            .unwrap_or(json);
        let error = json.get("error").unwrap_or(&json);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .or_else(|| error.as_str())
            .map_or_else(|| shorten(trimmed), str::to_owned);
        let kind = error
            .get("type")
            .or_else(|| error.get("status"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        return ProviderError::Http {
            status,
            message,
            kind,
        };
    }
    let message = if trimmed.starts_with('<') {
        html_message(trimmed)
    } else {
        shorten(trimmed)
    };
    ProviderError::Http {
        status,
        message,
        kind: None,
    }
}

fn html_message(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    if let (Some(start), Some(end)) = (lower.find("<title>"), lower.find("</title>"))
        && start + 7 <= end
    {
        return html[start + 7..end].trim().to_owned();
    }
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    shorten(&text.split_whitespace().collect::<Vec<_>>().join(" "))
}

fn shorten(text: &str) -> String {
    let mut out: String = text.chars().take(500).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    if out.is_empty() {
        "(empty error body)".to_owned()
    } else {
        out
    }
}
