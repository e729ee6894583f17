//! Rendering documents for people (a tree) and for programs (JSON).

use std::io::{self, Write};
use std::path::PathBuf;

use flemma::ast::{Document, LineSpan, Segment};

/// Writes `value` as pretty JSON followed by a newline.
pub(crate) fn json(out: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

fn lines(span: LineSpan) -> String {
    if span.start_line == span.end_line {
        format!("line {}", span.start_line)
    } else {
        format!("lines {}-{}", span.start_line, span.end_line)
    }
}

/// Shortens `text` to one line of at most 60 characters.
fn preview(text: &str) -> String {
    let first = text.lines().next().unwrap_or("");
    let mut short: String = first.chars().take(60).collect();
    if short.len() < first.len() || text.lines().nth(1).is_some() {
        short.push('…');
    }
    format!("{short:?}")
}

/// Writes an indented outline of the document.
pub(crate) fn tree(out: &mut impl Write, doc: &Document) -> io::Result<()> {
    if let Some(fm) = &doc.frontmatter {
        writeln!(out, "frontmatter {} ({})", fm.language, lines(fm.span))?;
    }
    for message in &doc.messages {
        writeln!(out, "@{} ({})", message.role, lines(message.span))?;
        for segment in &message.segments {
            write!(out, "  ")?;
            segment_line(out, segment)?;
        }
    }
    if !doc.diagnostics.is_empty() {
        writeln!(out, "diagnostics:")?;
        for d in &doc.diagnostics {
            writeln!(out, "  {d}")?;
        }
    }
    Ok(())
}

fn segment_line(out: &mut impl Write, segment: &Segment) -> io::Result<()> {
    let at = |span: Option<LineSpan>| span.map(|s| format!(" ({})", lines(s))).unwrap_or_default();
    let span = at(segment.lines());
    match segment {
        Segment::Text(t) => writeln!(out, "text {}{span}", preview(&t.value)),
        Segment::Expression(t) => writeln!(out, "expression {}{span}", preview(&t.code)),
        Segment::Code(t) => writeln!(out, "code {}{span}", preview(&t.code)),
        Segment::Thinking(t) => {
            let kind = match (&t.signature, t.redacted) {
                (_, true) => "redacted".to_owned(),
                (Some(sig), _) => format!("signed by {}", sig.provider),
                (None, _) => "unsigned".to_owned(),
            };
            writeln!(out, "thinking, {kind}{span}")
        }
        Segment::ToolUse(t) => writeln!(out, "tool_use `{}` ({}){span}", t.name, t.id),
        Segment::ToolResult(t) => {
            let status = t.status.map(|s| format!(" [{s}]")).unwrap_or_default();
            writeln!(out, "tool_result {}{status}{span}", t.tool_use_id)
        }
        Segment::JobResult(t) => {
            let status = if t.status.is_some() { " [error]" } else { "" };
            writeln!(out, "job_result {}{status}{span}", t.job_id)
        }
        Segment::Aborted(a) => writeln!(out, "aborted {}{span}", preview(&a.message)),
        Segment::Malformed(m) => writeln!(out, "malformed {}{span}", preview(&m.text)),
        _ => writeln!(out, "(unknown segment){span}"),
    }
}

/// Writes an approval explanation as text.
pub(crate) fn explanation(
    out: &mut impl Write,
    tool: &str,
    e: &flemma::approval::Explanation,
) -> io::Result<()> {
    let by = e
        .resolver
        .as_deref()
        .unwrap_or("default (no resolver decided)");
    writeln!(out, "{tool}: {} (decided by {by})", e.decision)?;
    if let flemma::approval::Decision::Deny {
        reason: Some(reason),
    } = &e.decision
    {
        writeln!(out, "  reason: {}", crate::visible::line(reason))?;
    }
    // The built-ins' names fit in 32; a longer one (an MCP server's resolver) widens the column.
    let width = e
        .trace
        .iter()
        .map(|entry| entry.resolver.as_str().len())
        .max()
        .unwrap_or(0)
        .max(32);
    for entry in &e.trace {
        let result = serde_json::to_value(entry.result).ok();
        let result = result.as_ref().and_then(|v| v.as_str()).unwrap_or("?");
        let detail = entry
            .detail
            .as_deref()
            .map(|d| format!(": {}", crate::visible::line(d)))
            .unwrap_or_default();
        writeln!(
            out,
            "  {:>4}  {:<width$} {result}{detail}",
            entry.priority,
            entry.resolver.as_str()
        )?;
    }
    Ok(())
}

/// The command rules' reading of a `bash` command: each simple command with the rule that
/// decided it, then what needs approval besides. Every text is escaped (a command is the
/// model's text).
pub(crate) fn judgement(out: &mut impl Write, j: &flemma::shell::Judgement) -> io::Result<()> {
    use flemma::shell::SegmentVerdict;
    writeln!(out, "command rules: {}", j.outcome)?;
    for segment in &j.segments {
        let (word, rule) = match &segment.verdict {
            SegmentVerdict::Allowed { rule } => ("allow", Some(rule)),
            SegmentVerdict::Asked { rule, maybe: false } => ("ask", Some(rule)),
            SegmentVerdict::Asked { rule, maybe: true } => ("ask?", Some(rule)),
            SegmentVerdict::Denied { rule } => ("deny", Some(rule)),
            SegmentVerdict::Unmatched => ("none", None),
        };
        let via = if segment.via.is_empty() {
            String::new()
        } else {
            format!(" (via {})", crate::visible::line(&segment.via.join(", ")))
        };
        let rule = rule.map_or_else(
            || "no rule".to_owned(),
            |r| {
                format!(
                    "{} {:?}",
                    crate::visible::line(&r.origin),
                    r.pattern.as_str()
                )
            },
        );
        writeln!(
            out,
            "  {word:<5} {}{via}  <- {rule}",
            crate::visible::line(&segment.command)
        )?;
    }
    for finding in &j.findings {
        writeln!(
            out,
            "  ask   {}  <- {}",
            crate::visible::line(&finding.subject),
            crate::visible::line(&finding.reason)
        )?;
    }
    Ok(())
}

/// Why the writable set binds the file tools only: commands run unconfined.
pub(crate) const NO_BACKEND: &str = "no sandbox backend is available";

/// The writable set under an explanation.
pub(crate) fn writable(out: &mut impl Write, w: &Writable) -> io::Result<()> {
    match w.reason {
        None => writeln!(out, "writable: tools may write only under")?,
        Some(NO_BACKEND) => writeln!(
            out,
            "writable: bash runs unconfined ({NO_BACKEND}); write, edit and save_to only under"
        )?,
        Some(reason) => writeln!(
            out,
            "writable: not enforced ({reason}): tools may write wherever the user can; sandboxed, only under"
        )?,
    }
    for path in &w.paths {
        writeln!(out, "  {}", path.display())?;
    }
    if !w.read_only.is_empty() {
        writeln!(
            out,
            "read-only: tools may not write (sandbox.policy.protect_conversation)"
        )?;
        for path in &w.read_only {
            writeln!(out, "  {}", path.display())?;
        }
    }
    Ok(())
}

/// What the tools of a conversation may write: the sandbox's resolved writable set.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Writable {
    /// Whether the set is enforced for every tool (`sandbox.enabled` and a backend
    /// available); without a backend it binds the file tools only (`reason`).
    pub(crate) enforced: bool,
    /// Why not, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<&'static str>,
    /// The writable paths: absolute, resolved, none under another.
    pub(crate) paths: Vec<PathBuf>,
    /// The files tools may not write, sandboxed or not: the conversation's file and the
    /// options files (`sandbox.policy.protect_conversation`).
    pub(crate) read_only: Vec<PathBuf>,
}
