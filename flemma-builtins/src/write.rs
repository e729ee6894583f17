//! `write`: create or overwrite a file.

use flemma_schema::SchemaError;
use flemma_schema::builtin::inputs::WriteInput;
use serde_json::Value;

use super::files::{blocking, special_at, write_file};
use crate::messages as msg;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;
use flemma_store::format_size;

/// The built-in `write` tool.
///
/// Relative paths are resolved against the conversation's directory; parent directories are
/// created; the file is replaced atomically (a symbolic link is written through). With the
/// sandbox on, paths outside its writable directories are refused.
#[derive(Debug)]
pub struct WriteTool {
    definition: ToolDefinition,
}

impl WriteTool {
    /// The tool, with the definition of flemma-schema's built-in table.
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`SchemaError`] otherwise.
    pub fn new() -> Result<Self, SchemaError> {
        Ok(Self {
            definition: ToolDefinition::from_builtin(&flemma_schema::builtin::write())?,
        })
    }
}

#[async_trait::async_trait]
impl Tool for WriteTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let WriteInput { path, content, .. } = match WriteInput::from_call(&input) {
            Ok(input) => input,
            Err(missing) => return ToolOutput::error(msg::missing(missing)),
        };
        let resolved = ctx.resolve_path(&path);
        if ctx.sandbox().read_only_file(&resolved, ctx.cwd()).is_some() {
            return ToolOutput::error(msg::read_only_denied("write", &path));
        }
        if !ctx.is_path_writable(&resolved) {
            return ToolOutput::error(msg::write_sandbox_denied(&path));
        }
        blocking(ctx, move || {
            // A named pipe, socket or device is not replaced by a regular file.
            if let Some(kind) = special_at(&resolved) {
                return ToolOutput::error(msg::write_failed(&msg::not_regular(&path, kind)));
            }
            match write_file(&resolved, content.as_bytes()) {
                Ok(()) => ToolOutput::text(msg::write_success(content.len(), &path)),
                Err(detail) => ToolOutput::error(msg::write_failed(&detail)),
            }
        })
        .await
    }

    /// `<path>  (<size of the content>)`.
    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let path = input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let size = input
            .get("content")
            .and_then(Value::as_str)
            .map(|c| format!("({})", format_size(c.len())))
            .unwrap_or_default();
        Some(Preview::parts([path, size.as_str()]).with_label(Preview::label_of(input)))
    }
}
