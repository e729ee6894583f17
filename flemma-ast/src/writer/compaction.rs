//! Compaction blocks: the `@You:` message that stands for the messages above it.

use super::block::{WriterOptions, block_lines};
use crate::ast::Document;
use crate::edit::TextEdit;
use crate::error::AstError;
use crate::modeline::Modeline;

/// The lines of a `@You:` message holding a `**Compaction:**` block with `summary` as its
/// content and `meta` as its suffix (`messages=… tokens=… summary=…`). The fence is longer than
/// any backtick run in the summary, so nothing the summary says can end the block or start a
/// message.
///
/// ```
/// use flemma_ast::modeline;
/// use flemma_ast::writer::{WriterOptions, compaction_message};
///
/// let lines = compaction_message("They asked for ```code```.", &modeline::parse("messages=2"), WriterOptions::default());
/// assert_eq!(lines, ["@You:", "**Compaction:** (messages=2)", "````", "They asked for ```code```.", "````"]);
/// ```
pub fn compaction_message(summary: &str, meta: &Modeline, opts: WriterOptions) -> Vec<String> {
    let mut header = String::from("**Compaction:**");
    let mut tokens = String::new();
    meta.write_tokens(&mut tokens);
    if !tokens.is_empty() {
        header.push_str(" (");
        header.push_str(&tokens);
        header.push(')');
    }
    let mut lines = vec!["@You:".to_owned()];
    lines.extend(block_lines(header, summary, None, opts));
    lines
}

/// Inserts a compaction message (see [`compaction_message`]) before message `before` of
/// `doc`, followed by a blank line: the messages above it are no longer sent, the summary
/// stands for them.
///
/// # Errors
///
/// [`AstError::NoSuchMessage`] when `doc` has no message `before`.
///
/// ```
/// use flemma_ast::writer::{WriterOptions, insert_compaction};
/// use flemma_ast::{apply_edits, modeline::Modeline, parse};
///
/// let text = "@You:\nHi\n\n@Assistant:\nHello.\n\n@You:\nAnd now?\n";
/// let edit = insert_compaction(&parse(text), 2, "They said hi.", &Modeline::new(), WriterOptions::default())?;
/// let compacted = apply_edits(text, &[edit])?;
/// assert!(compacted.ends_with("@You:\n**Compaction:**\n```\nThey said hi.\n```\n\n@You:\nAnd now?\n"));
/// assert_eq!(parse(&compacted).compacted_at(), Some(2));
/// # Ok::<(), flemma_ast::AstError>(())
/// ```
pub fn insert_compaction(
    doc: &Document,
    before: usize,
    summary: &str,
    meta: &Modeline,
    opts: WriterOptions,
) -> Result<TextEdit, AstError> {
    let message = doc
        .messages
        .get(before)
        .ok_or(AstError::NoSuchMessage { index: before })?;
    let mut lines = compaction_message(summary, meta, opts);
    lines.push(String::new());
    Ok(TextEdit::insert(message.span.start_line, lines))
}
