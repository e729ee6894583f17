//! A `tools/call` result as a [`ToolOutput`]: text joined, other content as short
//! placeholders, `isError` as a failure, structured content as JSON.

use flemma_tools::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

/// The tool output of a call's result.
///
/// Text blocks are joined with newlines. `ToolOutput` carries no file parts, so an image or
/// audio block becomes `[image: image/png, 1234 bytes]`, an embedded blob resource
/// `[resource demo://x: application/gzip, 20 bytes]`, an embedded text resource its URI line
/// then its text, a resource link `[resource link: demo://x (name)]`. Structured content is
/// the JSON result when the server sent no content, and is appended as JSON text when no text
/// block already holds it. `isError: true` makes the text the failure's message.
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
///
/// let result = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::image("iVBORw0KGgo=", "image/png")]);
/// assert_eq!(flemma_mcp::tool_output(&result).result_text(), "a\n[image: image/png, 8 bytes]");
/// let failed = CallToolResult::error(vec![ContentBlock::text("no such file")]);
/// assert!(!flemma_mcp::tool_output(&failed).is_success());
/// ```
pub fn tool_output(result: &CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = result.content.iter().map(block_text).collect();
    if let Some(structured) = &result.structured_content {
        if parts.is_empty() && result.is_error != Some(true) {
            return ToolOutput::json(structured.clone());
        }
        let already = result.content.iter().any(|block| match block {
            ContentBlock::Text(text) => {
                serde_json::from_str::<Value>(&text.text).is_ok_and(|v| &v == structured)
            }
            _ => false,
        });
        if !already {
            parts.push(structured.to_string());
        }
    }
    let text = parts.join("\n");
    if result.is_error == Some(true) {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    }
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image: {}, {} bytes]",
            image.mime_type,
            decoded_len(&image.data)
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {} bytes]",
            audio.mime_type,
            decoded_len(&audio.data)
        ),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource {uri}: {}, {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                decoded_len(blob)
            ),
            other => serde_json::to_string(other).unwrap_or_default(),
        },
        ContentBlock::ResourceLink(link) => {
            let mut parts = vec![format!("{} ({})", link.uri, link.name)];
            parts.extend(link.mime_type.clone());
            parts.extend(link.size.map(|size| format!("{size} bytes")));
            format!("[resource link: {}]", parts.join(", "))
        }
        // A content type newer than this crate: its JSON, so nothing is lost.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The number of bytes base64 `data` decodes to (padded or not).
fn decoded_len(data: &str) -> usize {
    let significant = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    // Each full group of 4 characters is 3 bytes; a tail of 2 or 3 characters is 1 or 2.
    (significant / 4) * 3 + (significant % 4).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoded_lengths() {
        assert_eq!(decoded_len(""), 0);
        assert_eq!(decoded_len("YQ=="), 1);
        assert_eq!(decoded_len("YWI="), 2);
        assert_eq!(decoded_len("YWJj"), 3);
        assert_eq!(decoded_len("YWJjZA"), 4);
        assert_eq!(decoded_len("YWJj\nZA=="), 4);
    }

    #[test]
    fn structured_content_is_json_or_appended_once() {
        let value = serde_json::json!({"t": 1});
        let mut only = CallToolResult::success(vec![]);
        only.structured_content = Some(value.clone());
        assert_eq!(tool_output(&only), ToolOutput::json(value.clone()));

        let mut both = CallToolResult::success(vec![ContentBlock::text("{\"t\": 1}")]);
        both.structured_content = Some(value.clone());
        assert_eq!(tool_output(&both).result_text(), "{\"t\": 1}");

        let mut other = CallToolResult::success(vec![ContentBlock::text("sunny")]);
        other.structured_content = Some(value);
        assert_eq!(tool_output(&other).result_text(), "sunny\n{\"t\":1}");
    }
}
