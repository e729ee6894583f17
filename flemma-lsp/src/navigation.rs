//! Go to definition and references: a tool result and its Tool Use, a result with `job=` and
//! its Job Result, `@./file` references and their files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use flemma_ast::{LineSpan, Segment, SegmentRef};
use lsp_types::{Location, Position, Range, Uri};

use crate::document::OpenDocument;
use crate::position::ParserLines;

/// Where a position lies for the parser: its 1-based line and byte column, and its byte
/// offset in the text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At {
    pub(crate) line: u32,
    pub(crate) col: u32,
    pub(crate) offset: usize,
}

/// The parser's view of `position` (`None` past the text's end).
pub(crate) fn at(doc: &OpenDocument, position: Position) -> Option<At> {
    let text = doc.text();
    let offset = doc.lines().offset(text, position)?;
    let (line, line_start) = if doc.lines().has_lone_cr() {
        // The parser's lines are not the protocol's: count them.
        let bytes = &text.as_bytes()[..offset];
        (
            memchr::memchr_iter(b'\n', bytes).count() as u32 + 1,
            memchr::memrchr(b'\n', bytes).map_or(0, |i| i + 1),
        )
    } else {
        (
            position.line + 1,
            doc.lines().line_start(text, position.line as usize)?,
        )
    };
    Some(At {
        line,
        col: (offset - line_start) as u32 + 1,
        offset,
    })
}

/// The top-level segment at `at`.
pub(crate) fn segment_at(doc: &OpenDocument, at: At) -> Option<SegmentRef<'_>> {
    flemma_ast::find_segment_at_position(doc.document(), at.line, at.col)
}

/// The range of a block's header (its first line).
fn header(lines: &ParserLines<'_>, span: LineSpan) -> Range {
    Range::new(
        lines.line_start(span.start_line),
        lines.line_end(span.start_line),
    )
}

/// The path of a `file:` URI.
pub fn uri_path(uri: &Uri) -> Option<PathBuf> {
    let text = uri.as_str();
    let rest = text.strip_prefix("file://")?;
    // `file:///path` or `file://localhost/path`.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let mut bytes = Vec::with_capacity(path.len());
    let raw = path.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if raw[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                raw.get(i + 1).copied().and_then(hex),
                raw.get(i + 2).copied().and_then(hex),
            )
        {
            bytes.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            bytes.push(raw[i]);
            i += 1;
        }
    }
    let path = String::from_utf8(bytes).ok()?;
    Some(PathBuf::from(path))
}

/// The `file:` URI of an absolute path.
pub fn path_uri(path: &Path) -> Option<Uri> {
    let path = path.to_str()?;
    let mut out = String::from("file://");
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out.parse().ok()
}

/// Where the definition of what lies at `position` is: a tool result's Tool Use (or its Job
/// Result, for a result with `job=`), a Tool Use's result, a Job Result's tool result, an
/// `@./file` reference's file.
pub fn definition(doc: &OpenDocument, uri: &Uri, position: Position) -> Vec<Location> {
    let Some(at) = at(doc, position) else {
        return Vec::new();
    };
    let Some(segment) = segment_at(doc, at) else {
        return Vec::new();
    };
    let document = doc.document();
    let lines = ParserLines::new(doc.text(), doc.lines());
    let index = doc.parser().tool_index();
    let here = |span: LineSpan| Location::new(uri.clone(), header(&lines, span));
    match segment.node {
        Segment::ToolResult(result) => {
            if let Some(job) = result
                .job_id()
                .and_then(|job| flemma_ast::find_job_result(document, job))
            {
                return vec![here(job.node.span)];
            }
            index
                .tool_use(document, result.tool_use_id.as_str())
                .map(|u| vec![here(u.node.span)])
                .unwrap_or_default()
        }
        Segment::ToolUse(tool_use) => index
            .last_tool_result(document, tool_use.id.as_str())
            .map(|r| vec![here(r.node.span)])
            .unwrap_or_default(),
        Segment::JobResult(job) => document
            .messages
            .iter()
            .flat_map(flemma_ast::Message::tool_results)
            .filter(|r| r.job_id() == Some(job.job_id.as_str()))
            .map(|r| here(r.span))
            .collect(),
        Segment::Text(_) => file_reference(doc, uri, at.offset).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The file an `@./file` reference at byte `offset` names, when it exists.
fn file_reference(doc: &OpenDocument, uri: &Uri, offset: usize) -> Option<Location> {
    let (reference, _) = flemma_providers::file_reference_at(doc.text(), offset)?;
    let path = resolve(&reference.path, uri)?;
    if !path.is_file() {
        return None;
    }
    let target = path_uri(&path)?;
    Some(Location::new(
        target,
        Range::new(Position::new(0, 0), Position::new(0, 0)),
    ))
}

/// The absolute path a reference's path names, from the conversation's directory.
pub(crate) fn resolve(path: &str, uri: &Uri) -> Option<PathBuf> {
    if let Some(rest) = path.strip_prefix("~/") {
        return std::env::home_dir().map(|home| home.join(rest));
    }
    if path.starts_with('/') {
        return Some(PathBuf::from(path));
    }
    let chat = uri_path(uri)?;
    // `./` and `a/../` folded, as the prompt's scope folds them.
    let mut out = PathBuf::new();
    for part in chat.parent()?.join(path).components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Every block of the call at `position`: its Tool Use, its results, and the Job Results of
/// its jobs.
pub fn references(doc: &OpenDocument, uri: &Uri, position: Position) -> Vec<Location> {
    let Some(segment) = at(doc, position).and_then(|at| segment_at(doc, at)) else {
        return Vec::new();
    };
    let document = doc.document();
    let id = match segment.node {
        Segment::ToolUse(u) => u.id.as_str().to_owned(),
        Segment::ToolResult(r) => r.tool_use_id.as_str().to_owned(),
        Segment::JobResult(j) => match document
            .messages
            .iter()
            .flat_map(flemma_ast::Message::tool_results)
            .find(|r| r.job_id() == Some(j.job_id.as_str()))
        {
            Some(r) => r.tool_use_id.as_str().to_owned(),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let lines = ParserLines::new(doc.text(), doc.lines());
    let mut jobs = Vec::new();
    let mut out = Vec::new();
    for message in &document.messages {
        for segment in &message.segments {
            let span = match segment {
                Segment::ToolUse(u) if u.id.as_str() == id => u.span,
                Segment::ToolResult(r) if r.tool_use_id.as_str() == id => {
                    if let Some(job) = r.job_id() {
                        jobs.push(job.to_owned());
                    }
                    r.span
                }
                _ => continue,
            };
            out.push(Location::new(uri.clone(), header(&lines, span)));
        }
    }
    for job in jobs {
        if let Some(result) = flemma_ast::find_job_result(document, &job) {
            out.push(Location::new(uri.clone(), header(&lines, result.node.span)));
        }
    }
    out
}
