//! Completion in the frontmatter: the host's tool names and the presets (`$standard`, …),
//! where a tool list is written.

use flemma_ast::Document;
use lsp_types::{CompletionItem, CompletionItemKind, Position};

use crate::document::OpenDocument;

/// Whether `c` can be part of a tool name or a preset as written in a list (`$standard`,
/// `mcp.fs.*`, `+bash`, `!write`).
fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*' | '$')
}

/// Whether the parser's line `line` lies inside the frontmatter's code.
fn in_frontmatter(doc: &Document, line: u32) -> bool {
    doc.frontmatter
        .as_ref()
        .is_some_and(|fm| fm.span.start_line < line && line < fm.span.end_line)
}

/// The items at `position`: inside the frontmatter, the tool names and presets that start with
/// the word before the cursor; elsewhere none.
pub fn completions(
    doc: &OpenDocument,
    position: Position,
    tools: &[String],
    presets: &[String],
) -> Vec<CompletionItem> {
    let Some(at) = crate::navigation::at(doc, position) else {
        return Vec::new();
    };
    if !in_frontmatter(doc.document(), at.line) {
        return Vec::new();
    }
    let before = &doc.text()[..at.offset];
    let word_start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| word_char(*c))
        .last()
        .map_or(at.offset, |(i, _)| i);
    let word = &before[word_start..];
    // A list operator is not part of the name (`+bash`, `!write`, `^read`).
    let word = word.trim_start_matches(['+', '-', '!', '^']);
    let item = |label: &str, kind: CompletionItemKind, detail: &str| CompletionItem {
        label: label.to_owned(),
        kind: Some(kind),
        detail: Some(detail.to_owned()),
        ..CompletionItem::default()
    };
    let mut out: Vec<CompletionItem> = presets
        .iter()
        .filter(|p| p.starts_with(word))
        .map(|p| item(p, CompletionItemKind::CONSTANT, "preset"))
        .collect();
    if !word.starts_with('$') {
        out.extend(
            tools
                .iter()
                .filter(|t| t.starts_with(word))
                .map(|t| item(t, CompletionItemKind::FUNCTION, "tool")),
        );
    }
    out
}
