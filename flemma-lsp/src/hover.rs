//! Hover: on a Tool Use, the call (tool, id, input, where its result stands); on a tool result,
//! its status (and its job's, for a result with `job=`) above the segment's AST summary; on an
//! `@./file` reference, the path it resolves to and whether the file is there.

use std::fmt::Write as _;

use flemma_ast::Segment;
use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position, Uri};

use crate::document::OpenDocument;
use crate::navigation::{at, resolve, segment_at};

/// Where a background job stands, as the host knows it (the journal): what a hover on its
/// tool result shows first.
pub trait JobStatus: Send + Sync {
    /// The job's state (`running 12.3s`, `completed (delivery pending)`, `delivered`, `lost`),
    /// `None` when unknown.
    fn status(&self, uri: &Uri, job_id: &str) -> Option<String>;
}

/// What the host adds to a hover.
#[derive(Clone, Copy, Default)]
pub struct Host<'a> {
    /// Where jobs' states are read (over the journal).
    pub jobs: Option<&'a dyn JobStatus>,
    /// The conversation's jobs as its journal records them.
    pub journal: Option<&'a std::collections::BTreeMap<String, flemma_runtime::jobs::JobInfo>>,
    /// Which files the conversation's `@./file` references may read, and its file.
    pub access: Option<(&'a flemma_providers::FileAccess, &'a std::path::Path)>,
    /// The tools, for a Tool Use's description.
    pub registry: Option<&'a flemma_runtime::ToolRegistry>,
    /// How the approval chain would decide a call (`flemma approval explain`'s lines).
    pub explain: Option<&'a dyn Fn(&flemma_ast::ToolUse) -> String>,
}

impl std::fmt::Debug for Host<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("jobs", &self.jobs.is_some())
            .field("registry", &self.registry.is_some())
            .field("access", &self.access)
            .field("explain", &self.explain.is_some())
            .finish()
    }
}

/// A fence long enough for `content`.
fn fenced(language: &str, content: &str) -> String {
    let fence = flemma_ast::writer::fence_for(content);
    format!("{fence}{language}\n{content}\n{fence}")
}

/// The hover of an `@./file` reference at byte `offset`: the path it resolves to, whether the
/// file is there and whether the conversation may read it.
fn file_hover(doc: &OpenDocument, uri: &Uri, offset: usize, host: &Host<'_>) -> Option<String> {
    let (reference, _) = flemma_providers::file_reference_at(doc.text(), offset)?;
    let path = resolve(&reference.path, uri)?;
    let state = match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => format!("a file of {} bytes", m.len()),
        Ok(_) => "not a file".to_owned(),
        Err(e) => format!("cannot be read: {e}"),
    };
    let mut text = format!("`{}`: {state}", path.display());
    if let Some((access, chat)) = host.access {
        match access.may_read(Some(chat), &path) {
            Ok(()) => text.push_str("; the conversation may read it"),
            Err(flemma_providers::TemplateError::Denied { .. }) => text.push_str(
                "; the conversation may not read it (`templates.file_access`): it is sent as text",
            ),
            Err(_) => {}
        }
    }
    Some(text)
}

/// Lines of a result block's AST shown in a hover: its modeline, lines, size and first lines.
fn summary(
    meta: &flemma_ast::modeline::Modeline,
    span: flemma_ast::LineSpan,
    content: &str,
) -> String {
    const SHOWN: usize = 8;
    let mut out = String::new();
    if !meta.is_empty() {
        let _ = writeln!(out, "modeline: {}", meta.to_modeline_string());
    }
    let _ = writeln!(
        out,
        "lines {}-{}, content {} bytes",
        span.start_line,
        span.end_line,
        content.len()
    );
    for line in content.lines().take(SHOWN) {
        let mut line = line.to_owned();
        if line.len() > 120 {
            let mut end = 120;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
            line.push('…');
        }
        let _ = writeln!(out, "| {line}");
    }
    if content.lines().nth(SHOWN).is_some() {
        out.push_str("| …\n");
    }
    out.trim_end().to_owned()
}

/// What a `**Compaction:**` block stands for: the messages above it, their tokens and the
/// summary's (what each request saves), and whether it is the block requests start from.
fn compaction_hover(document: &flemma_ast::Document, block: &flemma_ast::Compaction) -> String {
    let mut text = String::from("**Compaction**\n\n");
    let count = |n: Option<u64>| n.map_or_else(|| "?".to_owned(), |n| n.to_string());
    let _ = write!(
        text,
        "Stands for {} messages (about {} tokens) in a summary of about {} tokens",
        count(block.messages()),
        count(block.tokens()),
        count(block.summary_tokens())
    );
    if let (Some(before), Some(after)) = (block.tokens(), block.summary_tokens()) {
        let _ = write!(
            text,
            ": about {} tokens fewer in every request",
            before.saturating_sub(after)
        );
    }
    text.push_str(".\n\n");
    let last = document
        .compacted_at()
        .and_then(|at| document.messages[at].compaction())
        .is_some_and(|c| c.span == block.span);
    text.push_str(if last {
        "Requests start here: the messages above it are kept in the file and not sent. \
         Delete the block to send them again."
    } else {
        "A later compaction stands for this one: requests start at the last block."
    });
    text
}

/// The hover at `position`, when it lies on a Tool Use, a tool result, a Job Result, a
/// compaction block or an `@./file` reference.
pub fn hover(doc: &OpenDocument, uri: &Uri, position: Position, host: &Host<'_>) -> Option<Hover> {
    let jobs = host.jobs;
    let at = at(doc, position)?;
    let segment = segment_at(doc, at)?;
    let document = doc.document();
    let mut text = String::new();
    match segment.node {
        Segment::ToolUse(tool_use) => {
            let status = doc
                .parser()
                .tool_index()
                .last_tool_result(document, tool_use.id.as_str())
                .map_or_else(
                    || "no result yet".to_owned(),
                    |r| match r.node.status {
                        Some(status) => format!("result: {status}"),
                        None => "result written".to_owned(),
                    },
                );
            let _ = writeln!(
                text,
                "**Tool Use** `{}` (`{}`): {status}\n",
                tool_use.name, tool_use.id
            );
            if let Some(tool) = host.registry.and_then(|r| r.get(tool_use.name.as_str())) {
                let description = &tool.definition().spec().description;
                let first = description.lines().next().unwrap_or_default();
                let _ = writeln!(text, "{first}\n");
            }
            let input = serde_json::to_string_pretty(tool_use.input()).unwrap_or_default();
            text.push_str(&fenced("json", &input));
            if let Some(explain) = host.explain {
                text.push_str("\n\n**Approval**\n\n");
                text.push_str(&fenced("text", &explain(tool_use)));
            }
        }
        Segment::ToolResult(result) => {
            if let Some(job) = result.job_id() {
                let state = jobs
                    .and_then(|j| j.status(uri, job))
                    .or_else(|| {
                        host.journal
                            .and_then(|j| j.get(job))
                            .map(crate::jobs::describe)
                    })
                    .or_else(|| {
                        flemma_ast::find_job_result(document, job).map(|r| {
                            match r.node.status {
                                Some(flemma_ast::JobStatus::Error) => "delivered (error)",
                                None => "delivered",
                            }
                            .to_owned()
                        })
                    })
                    .unwrap_or_else(|| "unknown (no journal entry read)".to_owned());
                let _ = writeln!(text, "**Job** `{job}`: {state}\n");
            }
            let _ = writeln!(
                text,
                "**Tool Result** `{}`{}\n",
                result.tool_use_id,
                result.status.map(|s| format!(" ({s})")).unwrap_or_default()
            );
            text.push_str(&fenced(
                "text",
                &summary(&result.meta, result.span, &result.content),
            ));
        }
        Segment::JobResult(job) => {
            let _ = writeln!(
                text,
                "**Job Result** `{}`{}\n",
                job.job_id,
                if job.status.is_some() { " (error)" } else { "" }
            );
            text.push_str(&fenced("text", &summary(&job.meta, job.span, &job.content)));
        }
        Segment::Compaction(block) => text = compaction_hover(document, block),
        Segment::Text(_) => text = file_hover(doc, uri, at.offset, host)?,
        _ => return None,
    }
    Some(Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value: text,
        }),
        range: None,
    })
}
