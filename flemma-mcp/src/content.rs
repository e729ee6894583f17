//! A `tools/call` result as a [`ToolOutput`]: text joined, binary content as short
//! placeholders (saved to the conversation's result store when the call has one), `isError`
//! as a failure, structured content as JSON (the crate documentation's "Results" section
//! says why binary content is no file part).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use flemma_core::{ExecutionContext, ToolOutput};
use flemma_store::{VersionBackup, format_size, write_atomic};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

/// The tool output of a call's result, without a result store (nothing is written).
///
/// - Text blocks are kept as they are; all blocks are joined with newlines, in order.
///   Annotations (`audience`, `priority`) do not filter: the transcript is read by both the
///   model and the user.
/// - An image or audio block is `[image/png, 3.9KB]` (its MIME type, and its decoded size as
///   [`format_size`] writes sizes).
/// - An embedded blob resource is `[resource demo://x: application/gzip, 20B]` (MIME type
///   `application/octet-stream` when the server gives none).
/// - An embedded text resource is `[resource demo://x]`, a newline, then its text.
/// - A resource link is `[resource link: demo://x (name), MIME, SIZE]` (MIME and size when
///   the server gives them).
/// - A content type newer than this crate is its JSON, so nothing is lost.
/// - Structured content is the JSON result (a `json` fence) when the server sent no
///   content; otherwise it is appended as JSON text unless the text blocks already hold it:
///   a text block that is the same JSON value (the copy the MCP spec asks servers to send
///   for older clients), or text blocks that contain every string and number of it
///   (server-filesystem sends its file's text and `{"content": TEXT}`; the other blocks'
///   JSON counts too, for servers that repeat them there).
/// - `isError: true` makes the text the failure's message (an error result).
///
/// [`tool_output_in`] is the same, and saves binary content to the call's result store.
///
/// ```
/// use rmcp::model::{CallToolResult, ContentBlock};
///
/// let result = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::image("iVBORw0KGgo=", "image/png")]);
/// assert_eq!(flemma_mcp::tool_output(&result).result_text(), "a\n[image/png, 8B]");
/// let failed = CallToolResult::error(vec![ContentBlock::text("no such file")]);
/// assert!(!flemma_mcp::tool_output(&failed).is_success());
/// ```
pub fn tool_output(result: &CallToolResult) -> ToolOutput {
    assemble(result, |_| None)
}

/// [`tool_output`], with each image, audio clip and embedded blob resource also written to
/// the call's result store (when `ctx` has one) and named in its placeholder:
/// `[image/png, 3.9KB, saved to /notes/.flemma/a.chat/tool_srv__shot_toolu_01-1.png]`.
///
/// The file is the call's store path with `-N` (the binary block's number,
/// from 1) and an extension from the MIME type (`png`, `jpg`, `wav`, `pdf`, `gz`, …; the
/// resource URI's own extension, else `bin`) in place of `.txt`; an existing file is kept as
/// a numbered version (the `version` backup). A block whose data is not valid base64, or
/// that cannot be written (logged as a warning), keeps the placeholder without a path; the
/// call's result is never lost to the store.
///
/// ```
/// use std::sync::Arc;
/// use flemma_ids::{ToolName, ToolUseId};
/// use rmcp::model::{CallToolResult, ContentBlock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = std::env::temp_dir().join(format!("flemma-mcp-doc-{}", std::process::id()));
/// let options = flemma_config::Config::new().options()?.tools.store;
/// let store = flemma_store::Store::new(&options, Some(&dir.join("a.chat")), "1")?;
/// let ctx = flemma_core::ExecutionContext::builder(ToolUseId::new("toolu_01")?, ToolName::new("srv.shot")?)
///     .store(Arc::new(store))
///     .build()?;
/// let result = CallToolResult::success(vec![ContentBlock::image("iVBORw0KGgo=", "image/png")]);
/// let file = dir.join(".flemma/a.chat/tool_srv__shot_toolu_01-1.png");
/// assert_eq!(
///     flemma_mcp::tool_output_in(&result, &ctx).await.result_text(),
///     format!("[image/png, 8B, saved to {}]", file.display())
/// );
/// assert_eq!(std::fs::read(&file)?, b"\x89PNG\r\n\x1a\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
pub async fn tool_output_in(result: &CallToolResult, ctx: &ExecutionContext) -> ToolOutput {
    let Some(store) = ctx.store() else {
        return tool_output(result);
    };
    let base = match store.path_for(ctx.tool_id(), Some(ctx.tool_name())) {
        Ok(base) => base,
        Err(error) => {
            tracing::warn!(tool_id = %ctx.tool_id(), %error, "MCP result files not stored");
            return tool_output(result);
        }
    };
    let files = binary_files(result, &base);
    if files.is_empty() {
        return tool_output(result);
    }
    let written = match tokio::task::spawn_blocking(move || write_files(files)).await {
        Ok(written) => written,
        Err(error) => {
            tracing::warn!(%error, "MCP result files not stored");
            Vec::new()
        }
    };
    assemble(result, |index| {
        written
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, path)| path.clone())
    })
}

/// A binary block to save: its index in the content, its bytes, where it goes.
struct BinaryFile {
    index: usize,
    bytes: Vec<u8>,
    path: PathBuf,
}

/// The binary blocks of `result` whose data decodes, each with its file next to `base`.
fn binary_files(result: &CallToolResult, base: &Path) -> Vec<BinaryFile> {
    let mut files = Vec::new();
    for (index, block) in result.content.iter().enumerate() {
        let Some((data, mime, uri)) = binary_data(block) else {
            continue;
        };
        let Some(bytes) = decode(data) else {
            tracing::warn!(
                index,
                "MCP result block with invalid base64 data not stored"
            );
            continue;
        };
        let number = files.len() + 1;
        files.push(BinaryFile {
            index,
            bytes,
            path: part_path(base, number, extension(mime, uri)),
        });
    }
    files
}

/// Writes each file; returns the index and path of those written.
fn write_files(files: Vec<BinaryFile>) -> Vec<(usize, PathBuf)> {
    files
        .into_iter()
        .filter_map(
            |file| match write_atomic(&file.path, &file.bytes, &VersionBackup) {
                Ok(path) => Some((file.index, path)),
                Err(error) => {
                    tracing::warn!(path = %file.path.display(), %error, "MCP result file not stored");
                    None
                }
            },
        )
        .collect()
}

/// `base` (`…/tool_NAME_ID.txt`) as `…/tool_NAME_ID-N.EXT`.
fn part_path(base: &Path, number: usize, extension: &str) -> PathBuf {
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    base.with_file_name(format!("{stem}-{number}.{extension}"))
}

/// The base64 data, MIME type and URI (resources) of a binary block.
fn binary_data(block: &ContentBlock) -> Option<(&str, &str, Option<&str>)> {
    match block {
        ContentBlock::Image(image) => Some((&image.data, &image.mime_type, None)),
        ContentBlock::Audio(audio) => Some((&audio.data, &audio.mime_type, None)),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => Some((blob, blob_mime(mime_type.as_deref()), Some(uri))),
            _ => None,
        },
        _ => None,
    }
}

fn blob_mime(mime: Option<&str>) -> &str {
    mime.unwrap_or("application/octet-stream")
}

/// The file extension for `mime`, else the one of `uri`'s last segment, else `bin`.
fn extension<'a>(mime: &str, uri: Option<&'a str>) -> &'a str {
    let essence = mime.split(';').next().unwrap_or_default().trim();
    let known = match essence.to_ascii_lowercase().as_str() {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        "image/svg+xml" => Some("svg"),
        "image/bmp" => Some("bmp"),
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        "audio/ogg" => Some("ogg"),
        "audio/flac" => Some("flac"),
        "audio/webm" | "video/webm" => Some("webm"),
        "application/pdf" => Some("pdf"),
        "application/gzip" | "application/x-gzip" => Some("gz"),
        "application/zip" => Some("zip"),
        "application/json" => Some("json"),
        "text/plain" => Some("txt"),
        _ => None,
    };
    if let Some(known) = known {
        return known;
    }
    uri.and_then(|uri| uri.rsplit('/').next())
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, ext)| ext)
        .filter(|ext| {
            !ext.is_empty() && ext.len() <= 8 && ext.bytes().all(|b| b.is_ascii_alphanumeric())
        })
        .unwrap_or("bin")
}

/// The output of `result`; `saved(i)` is where block `i` was written, if it was.
fn assemble(result: &CallToolResult, saved: impl Fn(usize) -> Option<PathBuf>) -> ToolOutput {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .enumerate()
        .map(|(index, block)| block_text(block, saved(index).as_deref()))
        .collect();
    if let Some(structured) = &result.structured_content {
        if parts.is_empty() && result.is_error != Some(true) {
            return ToolOutput::json(structured.clone());
        }
        if !holds(&result.content, structured) {
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

/// Whether the content already holds `structured`: a text block is the same JSON value (the
/// copy the MCP spec asks servers to send), or the text blocks (and the other blocks' JSON)
/// contain each string and number in it (server-filesystem's `{"content": TEXT}`, or its
/// blocks repeated as `{"content": [BLOCKS]}`).
fn holds(content: &[ContentBlock], structured: &Value) -> bool {
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect();
    if content.is_empty() {
        return false;
    }
    if texts
        .iter()
        .any(|text| serde_json::from_str::<Value>(text).is_ok_and(|v| &v == structured))
    {
        return true;
    }
    // The text, and the other blocks as JSON (a server may repeat its blocks there).
    let mut joined = texts.join("\n");
    for block in content
        .iter()
        .filter(|b| !matches!(b, ContentBlock::Text(_)))
    {
        joined.push('\n');
        joined.push_str(&serde_json::to_string(block).unwrap_or_default());
    }
    let mut leaves = Vec::new();
    scalar_leaves(structured, &mut leaves);
    leaves.iter().all(|leaf| joined.contains(leaf.as_str()))
}

/// The strings and numbers of `value`, as text.
fn scalar_leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Number(number) => out.push(number.to_string()),
        Value::Array(items) => items.iter().for_each(|item| scalar_leaves(item, out)),
        Value::Object(fields) => fields.values().for_each(|field| scalar_leaves(field, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// `[LABEL, SIZE]`, or `[LABEL, SIZE, saved to PATH]`.
fn placeholder(label: &str, data: &str, saved: Option<&Path>) -> String {
    let size = format_size(decoded_len(data));
    match saved {
        Some(path) => format!("[{label}, {size}, saved to {}]", path.display()),
        None => format!("[{label}, {size}]"),
    }
}

fn block_text(block: &ContentBlock, saved: Option<&Path>) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => placeholder(&image.mime_type, &image.data, saved),
        ContentBlock::Audio(audio) => placeholder(&audio.mime_type, &audio.data, saved),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => placeholder(
                &format!("resource {uri}: {}", blob_mime(mime_type.as_deref())),
                blob,
                saved,
            ),
            other => serde_json::to_string(other).unwrap_or_default(),
        },
        ContentBlock::ResourceLink(link) => {
            let mut parts = vec![format!("{} ({})", link.uri, link.name)];
            parts.extend(link.mime_type.clone());
            parts.extend(
                link.size
                    .map(|size| format_size(usize::try_from(size).unwrap_or(usize::MAX))),
            );
            format!("[resource link: {}]", parts.join(", "))
        }
        // A content type newer than this crate: its JSON, so nothing is lost.
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// `data` decoded from base64 (standard alphabet, padded or not, whitespace ignored).
fn decode(data: &str) -> Option<Vec<u8>> {
    let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let trimmed = compact.trim_end_matches('=');
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(trimmed)
        .ok()
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
        assert_eq!(decode("YWJj\nZA==").as_deref(), Some(&b"abcd"[..]));
        assert_eq!(decode("YWJjZA").as_deref(), Some(&b"abcd"[..]));
        assert_eq!(decode("not base64!"), None);
    }

    #[test]
    fn extensions_come_from_the_mime_type_then_the_uri() {
        assert_eq!(extension("image/png", None), "png");
        assert_eq!(extension("IMAGE/JPEG; q=1", None), "jpg");
        assert_eq!(extension("application/gzip", Some("demo://a.tar.gz")), "gz");
        assert_eq!(
            extension("application/x-thing", Some("file:///a/b.thing")),
            "thing"
        );
        assert_eq!(extension("application/x-thing", Some("demo://a/b")), "bin");
        assert_eq!(
            extension("application/x-thing", Some("demo://a/b.../x")),
            "bin"
        );
        assert_eq!(
            part_path(Path::new("/s/tool_a__b_t1.txt"), 2, "png"),
            Path::new("/s/tool_a__b_t1-2.png")
        );
    }

    #[test]
    fn placeholders_name_the_type_and_the_size() {
        let image = ContentBlock::image("A".repeat(5464), "image/png");
        assert_eq!(block_text(&image, None), "[image/png, 4.0KB]");
        assert_eq!(
            block_text(&image, Some(Path::new("/s/x-1.png"))),
            "[image/png, 4.0KB, saved to /s/x-1.png]"
        );
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
        other.structured_content = Some(value.clone());
        assert_eq!(tool_output(&other).result_text(), "sunny\n{\"t\":1}");

        let mut wrapped = CallToolResult::success(vec![ContentBlock::text("a\nb")]);
        wrapped.structured_content = Some(serde_json::json!({"content": "a\nb", "ok": true}));
        assert_eq!(tool_output(&wrapped).result_text(), "a\nb");

        let mut partly = CallToolResult::success(vec![ContentBlock::text("a, 3 lines")]);
        partly.structured_content = Some(serde_json::json!({"content": "a", "lines": 4}));
        assert_eq!(
            tool_output(&partly).result_text(),
            "a, 3 lines\n{\"content\":\"a\",\"lines\":4}"
        );

        let mut failed = CallToolResult::error(vec![]);
        failed.structured_content = Some(value);
        assert_eq!(tool_output(&failed), ToolOutput::error("{\"t\":1}"));
    }
}
