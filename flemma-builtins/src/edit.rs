//! `edit`: replace one exact occurrence of a text in a file.

use std::io::Read as _;
use std::path::PathBuf;

use flemma_schema::SchemaError;
use flemma_schema::builtin::inputs::EditInput;
use serde_json::Value;

use super::files::{NotAFile, blocking, open_regular, write_file};
use crate::messages as msg;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;

/// The built-in `edit` tool.
///
/// `oldText` must occur exactly once in the file (plain text, no patterns; overlapping
/// occurrences count); it is replaced by `newText` and the file is rewritten atomically.
/// Relative paths are resolved against the conversation's directory. With the sandbox on,
/// paths outside its writable directories are refused.
#[derive(Debug)]
pub struct EditTool {
    definition: ToolDefinition,
}

impl EditTool {
    /// The tool, with the definition of flemma-schema's built-in table.
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`SchemaError`] otherwise.
    pub fn new() -> Result<Self, SchemaError> {
        Ok(Self {
            definition: ToolDefinition::from_builtin(&flemma_schema::builtin::edit())?,
        })
    }
}

#[async_trait::async_trait]
impl Tool for EditTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let input = match EditInput::from_call(&input) {
            Ok(input) => input,
            Err(missing) => return ToolOutput::error(msg::missing(missing)),
        };
        let resolved = ctx.resolve_path(&input.path);
        if ctx.sandbox().read_only_file(&resolved, ctx.cwd()).is_some() {
            return ToolOutput::error(msg::read_only_denied("edit", &input.path));
        }
        if !ctx.is_path_writable(&resolved) {
            return ToolOutput::error(msg::edit_sandbox_denied(&input.path));
        }
        let request = Request {
            path: input.path,
            resolved,
            old_text: input.old_text,
            new_text: input.new_text,
        };
        blocking(ctx, move || request.run()).await
    }

    /// The path.
    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let path = input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Some(Preview::parts([path]).with_label(Preview::label_of(input)))
    }
}

/// One call's input, moved to the blocking pool.
struct Request {
    /// The path as the model wrote it (what the messages show).
    path: String,
    resolved: PathBuf,
    old_text: String,
    new_text: String,
}

impl Request {
    fn run(self) -> ToolOutput {
        // Only a regular file is edited (see `read`).
        let mut file = match open_regular(&self.resolved) {
            Ok(file) => file,
            Err(NotAFile::Missing) => return ToolOutput::error(msg::file_not_found(&self.path)),
            Err(NotAFile::Special(kind)) => {
                return ToolOutput::error(msg::read_failed(&msg::not_regular(&self.path, kind)));
            }
        };
        let mut content = Vec::new();
        if let Err(error) = file.read_to_end(&mut content) {
            let detail = format!(
                "{}: {}",
                self.resolved.display(),
                flemma_ids::error_chain(&error)
            );
            return ToolOutput::error(msg::read_failed(&detail));
        }
        let old = self.old_text.as_bytes();
        let Some(at) = memchr::memmem::find(&content, old) else {
            return ToolOutput::error(msg::text_not_found(&self.path));
        };
        let count = count_overlapping(&content, old);
        if count > 1 {
            return ToolOutput::error(msg::not_unique(count, &self.path));
        }
        let mut edited = Vec::with_capacity(content.len() - old.len() + self.new_text.len());
        edited.extend_from_slice(&content[..at]);
        edited.extend_from_slice(self.new_text.as_bytes());
        edited.extend_from_slice(&content[at + old.len()..]);
        if edited == content {
            return ToolOutput::error(msg::no_changes(&self.path));
        }
        match write_file(&self.resolved, &edited) {
            Ok(()) => ToolOutput::text(msg::edit_success(&self.path)),
            Err(detail) => ToolOutput::error(msg::write_failed(&detail)),
        }
    }
}

/// Occurrences of `needle` in `haystack`, overlapping ones included: each search restarts one
/// byte after the previous match (`aa` occurs twice in `aaa`).
fn count_overlapping(haystack: &[u8], needle: &[u8]) -> usize {
    let finder = memchr::memmem::Finder::new(needle);
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = finder.find(&haystack[from..]) {
        count += 1;
        from += at + 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::count_overlapping;

    #[test]
    fn overlapping_occurrences_count() {
        assert_eq!(count_overlapping(b"aaa", b"aa"), 2);
        assert_eq!(count_overlapping(b"abab", b"ab"), 2);
        assert_eq!(count_overlapping(b"a.c abc", b"a.c"), 1);
        assert_eq!(count_overlapping(b"xyz", b"q"), 0);
    }
}
