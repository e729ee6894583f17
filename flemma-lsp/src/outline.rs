//! What the parsed document shows an editor: diagnostics, the outline (document symbols) and
//! folding ranges.

use flemma_ast::{LineSpan, Segment};
use flemma_ids::Severity;
use lsp_types::{
    Diagnostic, DiagnosticSeverity, DocumentSymbol, FoldingRange, FoldingRangeKind, NumberOrString,
    Range, SymbolKind,
};

use crate::document::OpenDocument;
use crate::position::ParserLines;

/// The source named in every diagnostic.
pub const SOURCE: &str = "flemma";

/// The protocol's range of the parser's lines `span`: from the start of its first line to
/// the end of its last.
fn range_of(lines: &ParserLines<'_>, span: LineSpan) -> Range {
    Range::new(
        lines.line_start(span.start_line),
        lines.line_end(span.end_line),
    )
}

/// Diagnostics on parser lines, for the protocol.
pub(crate) fn to_protocol(doc: &OpenDocument, found: &[crate::checks::Found]) -> Vec<Diagnostic> {
    let lines = ParserLines::new(doc.text(), doc.lines());
    found
        .iter()
        .map(|f| Diagnostic {
            range: range_of(&lines, LineSpan::new(f.line, f.line)),
            severity: Some(f.severity),
            code: Some(NumberOrString::String(f.code.to_owned())),
            source: Some(SOURCE.to_owned()),
            message: f.message.clone(),
            ..Diagnostic::default()
        })
        .collect()
}

/// The parser's diagnostics and [`flemma_ast::lint`]'s (role markers that name no role,
/// duplicate tool use ids), each on the line it names (the whole line).
pub fn diagnostics(doc: &OpenDocument) -> Vec<Diagnostic> {
    let lines = ParserLines::new(doc.text(), doc.lines());
    let found = flemma_ast::lint(doc.document());
    doc.document()
        .diagnostics
        .iter()
        .chain(&found)
        .map(|d| Diagnostic {
            range: range_of(&lines, LineSpan::new(d.line, d.line)),
            severity: Some(match d.severity {
                Severity::Error => DiagnosticSeverity::ERROR,
                Severity::Warning => DiagnosticSeverity::WARNING,
            }),
            code: Some(NumberOrString::String(d.kind.as_str().to_owned())),
            source: Some(SOURCE.to_owned()),
            message: d.message.clone(),
            ..Diagnostic::default()
        })
        .collect()
}

#[expect(
    deprecated,
    reason = "`DocumentSymbol::deprecated` has to be written to build one"
)]
fn symbol(
    name: String,
    detail: Option<String>,
    kind: SymbolKind,
    range: Range,
    children: Option<Vec<DocumentSymbol>>,
) -> DocumentSymbol {
    DocumentSymbol {
        name,
        detail,
        kind,
        tags: None,
        deprecated: None,
        range,
        selection_range: Range::new(range.start, range.start),
        children,
    }
}

/// The outline: each message (`@You`, `@Assistant`, …) with its tool uses, results, job
/// results and thinking blocks.
pub fn document_symbols(doc: &OpenDocument) -> Vec<DocumentSymbol> {
    let lines = ParserLines::new(doc.text(), doc.lines());
    let document = doc.document();
    let mut out = Vec::with_capacity(document.messages.len() + 1);
    if let Some(frontmatter) = &document.frontmatter {
        out.push(symbol(
            "frontmatter".to_owned(),
            Some(frontmatter.language.clone()),
            SymbolKind::NAMESPACE,
            range_of(&lines, frontmatter.span),
            None,
        ));
    }
    for message in &document.messages {
        let children: Vec<DocumentSymbol> = message
            .segments
            .iter()
            .filter_map(|segment| {
                let (name, detail, kind, span) = match segment {
                    Segment::ToolUse(u) => (
                        format!("{} ({})", u.name, u.id),
                        Some("Tool Use".to_owned()),
                        SymbolKind::FUNCTION,
                        u.span,
                    ),
                    Segment::ToolResult(r) => (
                        match r.status {
                            Some(status) => format!("{} ({status})", r.tool_use_id),
                            None => r.tool_use_id.to_string(),
                        },
                        Some("Tool Result".to_owned()),
                        SymbolKind::EVENT,
                        r.span,
                    ),
                    Segment::JobResult(j) => (
                        j.job_id.to_string(),
                        Some("Job Result".to_owned()),
                        SymbolKind::EVENT,
                        j.span,
                    ),
                    Segment::Thinking(t) => {
                        ("thinking".to_owned(), None, SymbolKind::STRING, t.span)
                    }
                    Segment::Compaction(c) => (
                        match c.messages() {
                            Some(n) => format!("compaction ({n} messages)"),
                            None => "compaction".to_owned(),
                        },
                        Some("Compaction".to_owned()),
                        SymbolKind::OBJECT,
                        c.span,
                    ),
                    _ => return None,
                };
                Some(symbol(name, detail, kind, range_of(&lines, span), None))
            })
            .collect();
        out.push(symbol(
            format!("@{}", message.role),
            None,
            SymbolKind::MODULE,
            range_of(&lines, message.span),
            (!children.is_empty()).then_some(children),
        ));
    }
    out
}

/// Folding ranges: the frontmatter, the messages a compaction stands for (above its block),
/// each message, and each block of more than one line (tool uses, results, job results,
/// thinking, compaction blocks).
pub fn folding_ranges(doc: &OpenDocument) -> Vec<FoldingRange> {
    let lines = ParserLines::new(doc.text(), doc.lines());
    let document = doc.document();
    let mut out = Vec::new();
    let mut fold = |span: LineSpan, kind: Option<FoldingRangeKind>| {
        if span.end_line > span.start_line {
            let range = range_of(&lines, span);
            out.push(FoldingRange {
                start_line: range.start.line,
                start_character: None,
                end_line: range.end.line,
                end_character: None,
                kind,
                collapsed_text: None,
            });
        }
    };
    if let Some(frontmatter) = &document.frontmatter {
        fold(frontmatter.span, Some(FoldingRangeKind::Imports));
    }
    // What a compaction stands for: the messages above its block, not sent.
    if let Some(at) = document.compacted_at()
        && let Some(first) = document.messages[..at]
            .iter()
            .find(|m| !matches!(m.role, flemma_ast::Role::System))
        && let Some(before) = at.checked_sub(1)
    {
        fold(
            LineSpan::new(
                first.span.start_line,
                document.messages[before].span.end_line,
            ),
            Some(FoldingRangeKind::Region),
        );
    }
    for message in &document.messages {
        fold(message.span, Some(FoldingRangeKind::Region));
        for segment in &message.segments {
            match segment {
                Segment::ToolUse(u) => fold(u.span, Some(FoldingRangeKind::Region)),
                Segment::Compaction(c) => fold(c.span, Some(FoldingRangeKind::Region)),
                Segment::ToolResult(r) => fold(r.span, Some(FoldingRangeKind::Region)),
                Segment::JobResult(j) => fold(j.span, Some(FoldingRangeKind::Region)),
                Segment::Thinking(t) => fold(t.span, Some(FoldingRangeKind::Comment)),
                _ => {}
            }
        }
    }
    out
}
