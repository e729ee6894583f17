//! Each content type of a `tools/call` result, from the real server-everything: text,
//! images (with annotations), embedded text and blob resources, resource links, structured
//! content and `isError`; binary content saved to the call's result store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_core::{ExecutionContext, ToolOutput};
use flemma_ids::{ToolName, ToolUseId};
use flemma_runtime::ToolRegistry;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::scratch::Scratch;
use crate::support::{call, everything, registry_with};

/// A fresh directory for one test, removed when dropped.
pub(crate) fn temp_dir(name: &str) -> Scratch {
    Scratch::new(format!("flemma-mcp-{name}-{}", std::process::id()))
}

/// Calls `name` with a context whose result store belongs to `dir/notes.chat`.
async fn call_with_store(
    registry: &ToolRegistry,
    dir: &Path,
    name: &str,
    input: Value,
) -> ToolOutput {
    let options = flemma_config::Config::new().options().unwrap().tools.store;
    let store = flemma_store::Store::new(&options, Some(&dir.join("notes.chat")), "1").unwrap();
    let ctx = ExecutionContext::builder(
        ToolUseId::new("toolu_01").unwrap(),
        ToolName::new(name).unwrap(),
    )
    .store(Arc::new(store))
    .build()
    .unwrap();
    registry.get(name).unwrap().execute(input, &ctx).await
}

/// The store directory of `dir/notes.chat` (the `$chat` preset).
fn store_dir(dir: &Path) -> PathBuf {
    dir.join(".flemma/notes.chat")
}

#[tokio::test]
async fn text_is_kept_and_an_image_is_a_placeholder_naming_its_type_and_size() {
    let (registry, _) = registry_with(vec![everything()]).await;
    assert_eq!(
        call(&registry, "everything.echo", json!({"message": "hi"})).await,
        ToolOutput::text("Echo: hi")
    );
    assert_eq!(
        call(&registry, "everything.get-sum", json!({"a": 2, "b": 40}))
            .await
            .result_text(),
        "The sum of 2 and 40 is 42."
    );
    // The MCP logo is 4033 bytes of PNG; without a store nothing is written.
    assert_eq!(
        call(&registry, "everything.get-tiny-image", json!({})).await,
        ToolOutput::text(
            "Here's the image you requested:\n[image/png, 3.9KB]\nThe image above is the MCP logo."
        )
    );
}

#[tokio::test]
async fn an_image_is_saved_to_the_result_store_and_the_placeholder_names_the_file() {
    let (registry, _) = registry_with(vec![everything()]).await;
    let dir = temp_dir("content-image");
    let out = call_with_store(&registry, &dir, "everything.get-tiny-image", json!({})).await;
    let file = store_dir(&dir).join("tool_everything__get-tiny-image_toolu_01-1.png");
    assert_eq!(
        out,
        ToolOutput::text(format!(
            "Here's the image you requested:\n[image/png, 3.9KB, saved to {}]\nThe image above is the MCP logo.",
            file.display()
        ))
    );
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len(), 4033);
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // A second run of the same call keeps the first file as a version.
    call_with_store(&registry, &dir, "everything.get-tiny-image", json!({})).await;
    assert!(
        store_dir(&dir)
            .join("tool_everything__get-tiny-image_toolu_01-1.1.png")
            .exists()
    );
}

#[tokio::test]
async fn annotated_content_is_kept_whatever_its_audience() {
    let (registry, _) = registry_with(vec![everything()]).await;
    // The text is for the user and the assistant, the image for the user only: both are
    // kept, since the transcript is read by both. `messageType: error` is a success result
    // (the server does not set `isError`).
    assert_eq!(
        call(
            &registry,
            "everything.get-annotated-message",
            json!({"messageType": "error", "includeImage": true})
        )
        .await,
        ToolOutput::text("Error: Operation failed\n[image/png, 3.9KB]")
    );
    assert_eq!(
        call(
            &registry,
            "everything.get-annotated-message",
            json!({"messageType": "debug", "includeImage": false})
        )
        .await,
        ToolOutput::text("Debug: Cache hit ratio 0.95, latency 150ms")
    );
}

#[tokio::test]
async fn an_embedded_text_resource_is_its_uri_then_its_text() {
    let (registry, _) = registry_with(vec![everything()]).await;
    let out = call(
        &registry,
        "everything.get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 1}),
    )
    .await;
    assert!(out.is_success(), "{out:?}");
    let text = out.result_text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Returning resource reference for Resource 1:");
    assert_eq!(lines[1], "[resource demo://resource/dynamic/text/1]");
    assert!(lines[2].contains("Resource 1"), "{text}");
    assert_eq!(
        lines.last(),
        Some(&"You can access this resource using the URI: demo://resource/dynamic/text/1")
    );
}

#[tokio::test]
async fn an_embedded_blob_resource_is_a_placeholder_and_saved_to_the_store() {
    let (registry, _) = registry_with(vec![everything()]).await;
    let input = json!({"resourceType": "Blob", "resourceId": 2});
    let out = call(
        &registry,
        "everything.get-resource-reference",
        input.clone(),
    )
    .await;
    let text = out.result_text();
    assert!(out.is_success(), "{out:?}");
    // The blob is "Resource 2: This is a base64 blob created at " (45 bytes) and the server's
    // local time of day, whose length depends on the hour and locale ("9:58:07 AM",
    // "10:08:07 AM", "10:08:07"): the size shown is the decoded blob's.
    let line = text.lines().nth(1).unwrap_or_default();
    let size = line
        .strip_prefix("[resource demo://resource/dynamic/blob/2: text/plain, ")
        .and_then(|rest| rest.strip_suffix("B]"))
        .and_then(|n| n.parse::<usize>().ok());
    assert!(
        size.is_some_and(|n| (45 + 7..=45 + 11).contains(&n)),
        "{text}"
    );

    // gzip of "hello" through a data: URI (no network), as an embedded resource.
    let dir = temp_dir("content-blob");
    let gzip = json!({
        "name": "hello.txt.gz",
        "data": "data:text/plain;base64,aGVsbG8=",
        "outputType": "resource",
    });
    let out = call_with_store(&registry, &dir, "everything.gzip-file-as-resource", gzip).await;
    let file = store_dir(&dir).join("tool_everything__gzip-file-as-resource_toolu_01-1.gz");
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(&bytes[..2], b"\x1f\x8b", "a gzip file");
    let text = out.result_text();
    assert!(
        text.starts_with("[resource demo://resource/session/hello.txt.gz: application/gzip, "),
        "{text}"
    );
    assert!(
        text.ends_with(&format!("{}B, saved to {}]", bytes.len(), file.display())),
        "{text}"
    );
}

#[tokio::test]
async fn a_resource_link_names_the_uri_name_and_type() {
    let (registry, _) = registry_with(vec![everything()]).await;
    let gzip = json!({
        "name": "link.txt.gz",
        "data": "data:text/plain;base64,aGVsbG8=",
        "outputType": "resourceLink",
    });
    let out = call(&registry, "everything.gzip-file-as-resource", gzip).await;
    assert_eq!(
        out,
        ToolOutput::text(
            "[resource link: demo://resource/session/link.txt.gz (link.txt.gz), application/gzip]"
        )
    );
    let links = call(
        &registry,
        "everything.get-resource-links",
        json!({"count": 2}),
    )
    .await;
    let text = links.result_text();
    assert_eq!(
        text.matches("[resource link: demo://resource/").count(),
        2,
        "{text}"
    );
}

#[tokio::test]
async fn structured_content_is_kept_as_json_text_once() {
    let (registry, _) = registry_with(vec![everything()]).await;
    // The server sends the JSON both as a text block and as `structuredContent`.
    let weather = call(
        &registry,
        "everything.get-structured-content",
        json!({"location": "New York"}),
    )
    .await;
    assert!(weather.is_success());
    let value: Value = serde_json::from_str(&weather.result_text()).unwrap();
    assert_eq!(
        value,
        json!({"temperature": 33, "conditions": "Cloudy", "humidity": 82})
    );
}

#[tokio::test]
async fn is_error_is_an_error_result() {
    let (registry, _) = registry_with(vec![everything()]).await;
    // The server's own input validation answers with `isError: true`.
    let failed = call(&registry, "everything.echo", json!({})).await;
    assert!(!failed.is_success());
    assert!(
        failed
            .result_text()
            .contains("Invalid arguments for tool echo"),
        "{failed:?}"
    );
    let body = failed.into_result_body();
    assert!(matches!(body, flemma_ast::writer::ResultBody::Error { .. }));
}
