//! Printing a document back to `.chat` text.

use crate::ast::{
    Compaction, Document, FenceLayout, JobResult, JobStatus, Segment, Template, Thinking,
    ToolResult, ToolStatus, ToolUse,
};
use crate::modeline::{Key, Modeline};
use crate::writer::fence_for;

/// Prints a document as `.chat` text.
///
/// The output is canonical: one blank line between messages, no trailing blank lines inside a
/// message, block fences as long as written (sized by [`fence_for`] for blocks built in code),
/// result header suffixes with the status word first,
/// LF line endings and a final newline. Everything else (text, template code, tool input as
/// written, fence languages, whether a blank line follows a block header) is reproduced as
/// parsed, so printing a canonical file gives it back byte for byte, and parsing any printed
/// document gives back an equal document (positions aside).
///
/// ```
/// let text = "@You:\nHi {{ name }}\n\n@Assistant:\nHello.\n";
/// assert_eq!(flemma_ast::print(&flemma_ast::parse(text)), text);
///
/// let messy = "@You:   \nHi\n\n\n\n@Assistant:\nHello.";
/// assert_eq!(flemma_ast::print(&flemma_ast::parse(messy)), text.replace(" {{ name }}", ""));
/// ```
pub fn print(doc: &Document) -> String {
    let mut out = String::with_capacity(estimate(doc));
    if let Some(fm) = &doc.frontmatter {
        out.push_str("```");
        out.push_str(&fm.language);
        out.push('\n');
        push_lines(&mut out, &fm.code);
        out.push_str("```\n");
    }
    let mut separate = false;
    if let Some(preamble) = &doc.preamble {
        out.push_str(preamble);
        out.push('\n');
        separate = true;
    }
    for message in &doc.messages {
        if separate {
            out.push('\n');
        }
        separate = true;
        out.push('@');
        out.push_str(message.role.as_str());
        out.push_str(":\n");
        print_segments(&mut out, &message.segments);
    }
    out
}

fn estimate(doc: &Document) -> usize {
    doc.messages
        .iter()
        .map(|m| m.span.end_line.saturating_sub(m.span.start_line) as usize + 1)
        .sum::<usize>()
        * 48
}

/// Prints segments as whole lines; consecutive inline segments form one run of lines.
pub(crate) fn print_segments(out: &mut String, segments: &[Segment]) {
    if let [Segment::Text(text)] = segments
        && text.value.is_empty()
        && text.span.is_none()
    {
        return;
    }
    let mut in_run = false;
    for segment in segments {
        if in_run && !segment.is_inline() {
            out.push('\n');
        }
        in_run = segment.is_inline();
        match segment {
            Segment::Text(text) => out.push_str(&text.value),
            Segment::Expression(t) => push_template(out, "{{", t, "}}"),
            Segment::Code(t) => push_template(out, "{%", t, "%}"),
            Segment::Thinking(t) => print_thinking(out, t),
            Segment::ToolUse(t) => print_tool_use(out, t),
            Segment::ToolResult(t) => print_tool_result(out, t),
            Segment::JobResult(t) => print_job_result(out, t),
            Segment::Compaction(t) => print_compaction(out, t),
            Segment::Aborted(a) => {
                out.push_str("<!-- flemma:aborted: ");
                if !a.message.is_empty() {
                    out.push_str(&a.message);
                    out.push(' ');
                }
                out.push_str("-->\n");
            }
            Segment::Malformed(m) => {
                out.push_str(&m.text);
                out.push('\n');
            }
        }
    }
    if in_run {
        out.push('\n');
    }
}

fn push_template(out: &mut String, open: &str, t: &Template, close: &str) {
    out.push_str(open);
    if t.trim_before {
        out.push('-');
    }
    out.push_str(&t.code);
    if t.trim_after {
        out.push('-');
    }
    out.push_str(close);
}

/// Pushes `text` followed by a newline, or nothing when `text` is empty.
fn push_lines(out: &mut String, text: &str) {
    if !text.is_empty() {
        out.push_str(text);
        out.push('\n');
    }
}

fn print_thinking(out: &mut String, t: &Thinking) {
    if let Some(sig) = t
        .signature
        .as_ref()
        .filter(|_| t.self_closing && t.content.is_empty())
    {
        out.push_str("<thinking ");
        out.push_str(&sig.provider);
        out.push_str(":signature=\"");
        out.push_str(&sig.value);
        out.push_str("\"/>\n");
        return;
    }
    if t.redacted {
        out.push_str("<thinking redacted>\n");
    } else if let Some(sig) = &t.signature {
        out.push_str("<thinking ");
        out.push_str(&sig.provider);
        out.push_str(":signature=\"");
        out.push_str(&sig.value);
        out.push_str("\">\n");
    } else {
        out.push_str("<thinking>\n");
    }
    push_lines(out, &t.content);
    out.push_str("</thinking>\n");
}

fn print_tool_use(out: &mut String, t: &ToolUse) {
    out.push_str("**Tool Use:** `");
    out.push_str(t.name.as_str());
    out.push_str("` (`");
    out.push_str(t.id.as_str());
    out.push_str("`)\n");
    push_block(out, &t.layout, t.raw_input());
}

fn print_tool_result(out: &mut String, t: &ToolResult) {
    out.push_str("**Tool Result:** `");
    out.push_str(t.tool_use_id.as_str());
    out.push('`');
    push_suffix(out, t.status.map(ToolStatus::as_str), &t.meta);
    out.push('\n');
    push_block(out, &t.layout, &t.content);
}

fn print_job_result(out: &mut String, t: &JobResult) {
    out.push_str("**Job Result:** `");
    out.push_str(t.job_id.as_str());
    out.push('`');
    push_suffix(out, t.status.map(|JobStatus::Error| "error"), &t.meta);
    out.push('\n');
    if let Some(layout) = &t.layout {
        push_block(out, layout, &t.content);
    }
}

fn print_compaction(out: &mut String, t: &Compaction) {
    out.push_str("**Compaction:**");
    // No status word here: the tokens are written as they are.
    let mut tokens = String::new();
    t.meta.write_tokens(&mut tokens);
    if !tokens.is_empty() {
        out.push_str(" (");
        out.push_str(&tokens);
        out.push(')');
    }
    out.push('\n');
    push_block(out, &t.layout, &t.content);
}

/// Writes ` (status meta…)`, or nothing when both are empty.
///
/// When there is no status but a positional meta value is a status word, a leading `nil`
/// keeps the reader from taking it as the status.
pub(crate) fn push_suffix(out: &mut String, status: Option<&str>, meta: &Modeline) {
    let mut tokens = String::new();
    if let Some(word) = status {
        tokens.push_str(word);
    } else {
        let shadowed = meta.iter().any(|(k, v)| {
            matches!(k, Key::Positional(_)) && v.as_str().and_then(ToolStatus::from_word).is_some()
        });
        if shadowed {
            tokens.push_str("nil");
        }
    }
    meta.write_tokens(&mut tokens);
    if !tokens.is_empty() {
        out.push_str(" (");
        out.push_str(&tokens);
        out.push(')');
    }
}

/// Whether a line of `content` would close a fence of `ticks` backticks.
fn closes_inside(content: &str, ticks: usize) -> bool {
    content.split('\n').any(|line| {
        let n = crate::line::leading_ticks(line);
        n >= ticks && line[n..].bytes().all(crate::line::is_space)
    })
}

/// Writes an optional blank line, the opening fence, the content lines and the closing fence.
pub(crate) fn push_block(out: &mut String, layout: &FenceLayout, content: &str) {
    if layout.blank_after_header {
        out.push('\n');
    }
    let as_written = layout.ticks > 0 && !closes_inside(content, layout.ticks);
    let fence = if as_written {
        "`".repeat(layout.ticks)
    } else {
        fence_for(content)
    };
    out.push_str(&fence);
    if let Some(language) = &layout.language {
        out.push_str(language);
    }
    if let Some(glued) = &layout.glued {
        out.push_str(glued);
    } else if let Some(info) = &layout.info {
        out.push(' ');
        out.push_str(info);
    }
    out.push('\n');
    push_lines(out, content);
    if as_written && layout.closing_ticks > layout.ticks {
        out.push_str(&"`".repeat(layout.closing_ticks));
    } else {
        out.push_str(&fence);
    }
    out.push('\n');
}
