//! `ls`: a directory's entries, directories first, optionally recursive.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use flemma_schema::SchemaError;
use flemma_schema::builtin::inputs::LsInput;
use serde_json::Value;

use super::files::{blocking, number_text, whole};
use crate::messages as msg;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;
use flemma_core::truncate::{Limits, truncate_head};

/// Entries listed when the call gives no `limit`.
const DEFAULT_LIMIT: usize = 500;

/// The built-in `ls` tool.
///
/// Relative paths are resolved against the working directory (not the conversation's
/// directory). Hidden entries are listed; directories (and links to directories) end in `/`;
/// nested entries are paths relative to the listed directory. The walk goes breadth first,
/// `max_depth` levels deep (1 to 10), and stops after `limit` entries; then directories come
/// first, then files, each sorted case-insensitively, and a footer counts the entries.
#[derive(Debug)]
pub struct LsTool {
    definition: ToolDefinition,
}

impl LsTool {
    /// The tool, with the definition of flemma-schema's built-in table.
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`SchemaError`] otherwise.
    pub fn new() -> Result<Self, SchemaError> {
        Ok(Self {
            definition: ToolDefinition::from_builtin(&flemma_schema::builtin::ls())?,
        })
    }
}

#[async_trait::async_trait]
impl Tool for LsTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let LsInput {
            path,
            max_depth,
            limit,
            ..
        } = match LsInput::from_call(&input) {
            Ok(input) => input,
            Err(missing) => return ToolOutput::error(msg::missing(missing)),
        };
        let resolved = ctx.resolve_in_cwd(&path);
        let depth = depth_of(max_depth);
        let limit = whole(limit, 0).unwrap_or(DEFAULT_LIMIT);
        blocking(ctx, move || {
            if !resolved.is_dir() {
                return ToolOutput::error(msg::directory_not_found(&path));
            }
            let entries = walk(&resolved, depth, limit);
            let footer = msg::ls_footer(entries.len(), depth);
            if entries.is_empty() {
                return ToolOutput::text(footer);
            }
            let listing = entries.join("\n");
            let cut = truncate_head(&listing, Limits::default());
            ToolOutput::text(format!("{}\n\n{footer}", cut.content))
        })
        .await
    }

    /// `<path>  depth=<max_depth>` (the depth only when over 1).
    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let path = input
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let depth = input
            .get("max_depth")
            .filter(|d| d.as_f64().is_some_and(|d| d > 1.0))
            .and_then(number_text)
            .map(|d| format!("depth={d}"))
            .unwrap_or_default();
        Some(Preview::parts([path, depth.as_str()]).with_label(Preview::label_of(input)))
    }
}

/// `max_depth`: 1 when absent, at most 10. A fraction rounds up, as the reference
/// walk (which recurses while the level is below the depth) treats it.
#[expect(clippy::cast_sign_loss, reason = "clamped to 1..=10 before the cast")]
fn depth_of(max_depth: Option<f64>) -> usize {
    max_depth
        .filter(|d| !d.is_nan())
        .map_or(1, |d| d.ceil().clamp(1.0, 10.0) as usize)
}

/// The entries under `root`, breadth first to `depth` levels, at most `limit` of them (the
/// walk stops there, before sorting; each directory is read in name order so the cut is
/// stable), sorted directories first. Directories that cannot be read are skipped; links
/// to directories are listed as directories but not entered.
fn walk(root: &Path, depth: usize, limit: usize) -> Vec<String> {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut queue: VecDeque<(PathBuf, String, usize)> = VecDeque::new();
    queue.push_back((root.to_owned(), String::new(), 1));
    'walk: while let Some((dir, prefix, level)) = queue.pop_front() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut children: Vec<_> = read.filter_map(Result::ok).collect();
        children.sort_by_key(std::fs::DirEntry::file_name);
        for child in children {
            if dirs.len() + files.len() >= limit {
                break 'walk;
            }
            let name = format!("{prefix}{}", child.file_name().to_string_lossy());
            let kind = child.file_type().ok();
            let real_dir = kind.is_some_and(|k| k.is_dir());
            let is_dir =
                real_dir || (kind.is_some_and(|k| k.is_symlink()) && child.path().is_dir());
            if real_dir && level < depth {
                queue.push_back((child.path(), format!("{name}/"), level + 1));
            }
            if is_dir {
                dirs.push(format!("{name}/"));
            } else {
                files.push(name);
            }
        }
    }
    let case_insensitive = |a: &String, b: &String| {
        a.to_lowercase()
            .cmp(&b.to_lowercase())
            .then_with(|| a.cmp(b))
    };
    dirs.sort_by(case_insensitive);
    files.sort_by(case_insensitive);
    dirs.extend(files);
    dirs
}
