//! Helpers shared by the test modules.

use std::path::PathBuf;

use flemma_ast::{Document, LineSpan, Segment, TextSpan};

/// `shared/` beside the repository (the developers' and CI's layout).
pub(crate) fn shared_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared")
}

/// Reads a peer fixture by file name.
pub(crate) fn peer(name: &str) -> String {
    let path = shared_dir().join("fixtures/peer").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Checks the span invariants of a document: messages in order and disjoint, every segment
/// inside its message and after the previous one, block spans well formed.
pub(crate) fn check_spans(doc: &Document) {
    let mut previous_end = doc.frontmatter.as_ref().map_or(0, |f| f.span.end_line);
    for message in &doc.messages {
        let span = message.span;
        assert!(
            span.start_line > previous_end,
            "message {span:?} overlaps the previous one"
        );
        assert!(
            span.start_line <= span.end_line,
            "message span {span:?} is reversed"
        );
        assert!(
            span.end_line <= doc.line_count,
            "message {span:?} beyond {} lines",
            doc.line_count
        );
        previous_end = span.end_line;
        // The marker line ends where every segment must start after.
        let mut previous = (span.start_line, u32::MAX);
        for segment in &message.segments {
            let Some(lines) = segment.lines() else {
                continue;
            };
            assert!(
                lines.start_line <= lines.end_line,
                "segment {lines:?} reversed"
            );
            assert!(
                lines.start_line > span.start_line && lines.end_line <= span.end_line,
                "segment {lines:?} outside message {span:?}"
            );
            let start = start_of(segment);
            assert!(
                start > previous,
                "{segment:?} starts at {start:?}, before {previous:?}"
            );
            previous = end_of(segment);
        }
    }
}

fn start_of(segment: &Segment) -> (u32, u32) {
    match text_span(segment) {
        Some(s) => (s.start_line, s.start_col),
        None => segment.lines().map_or((0, 0), |l| (l.start_line, 0)),
    }
}

fn end_of(segment: &Segment) -> (u32, u32) {
    match text_span(segment) {
        // An empty inline segment ends one column before it starts.
        Some(s) => (s.end_line, s.end_col),
        None => segment
            .lines()
            .map_or((0, 0), |l: LineSpan| (l.end_line, u32::MAX)),
    }
}

fn text_span(segment: &Segment) -> Option<TextSpan> {
    match segment {
        Segment::Text(t) => t.span,
        Segment::Expression(t) | Segment::Code(t) => Some(t.span),
        _ => None,
    }
}

/// The document with every position cleared, to compare documents that differ only in layout.
pub(crate) fn without_positions(doc: &Document) -> Document {
    let mut doc = doc.clone();
    doc.line_count = 0;
    if let Some(fm) = &mut doc.frontmatter {
        fm.span = LineSpan::default();
    }
    for d in &mut doc.diagnostics {
        d.line = 0;
    }
    for m in &mut doc.messages {
        m.span = LineSpan::default();
        for s in &mut m.segments {
            match s {
                Segment::Text(t) => t.span = None,
                Segment::Expression(t) | Segment::Code(t) => t.span = TextSpan::default(),
                Segment::Thinking(t) => t.span = LineSpan::default(),
                Segment::ToolUse(t) => t.span = LineSpan::default(),
                Segment::ToolResult(t) => t.span = LineSpan::default(),
                Segment::JobResult(t) => t.span = LineSpan::default(),
                Segment::Compaction(t) => t.span = LineSpan::default(),
                Segment::Aborted(t) => t.span = LineSpan::default(),
                Segment::Malformed(t) => t.span = LineSpan::default(),
                other => panic!("unknown segment {other:?}"),
            }
        }
    }
    doc
}
