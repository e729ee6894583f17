//! The lines of a block and the writer's options, shared by the writer's functions.

/// Options that change what the writer produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Omit the blank line between a block header and its fence (`editing.compact_headers`,
    /// default `true`).
    pub compact_headers: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            compact_headers: true,
        }
    }
}

/// A fence safe for `content`: backticks, one more than the longest run inside, at least three.
///
/// ```
/// assert_eq!(flemma_ast::writer::fence_for("plain"), "```");
/// assert_eq!(flemma_ast::writer::fence_for("has ```` inside"), "`````");
/// ```
pub fn fence_for(content: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for b in content.bytes() {
        if b == b'`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat((longest + 1).max(3))
}

/// Header line, optional blank line, fence, content lines, fence.
pub(super) fn block_lines(
    header: String,
    content: &str,
    language: Option<&str>,
    opts: WriterOptions,
) -> Vec<String> {
    let mut lines = vec![header];
    lines.extend(body_lines(content, language, opts));
    lines
}

pub(super) fn body_lines(
    content: &str,
    language: Option<&str>,
    opts: WriterOptions,
) -> Vec<String> {
    let fence = fence_for(content);
    let mut lines = Vec::new();
    if !opts.compact_headers {
        lines.push(String::new());
    }
    lines.push(format!("{fence}{}", language.unwrap_or("")));
    if !content.is_empty() {
        lines.extend(
            content
                .split('\n')
                .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned()),
        );
    }
    lines.push(fence);
    lines
}

pub(super) fn result_header(id: &str, suffix: Option<&str>) -> String {
    match suffix.filter(|s| !s.is_empty()) {
        Some(suffix) => format!("**Tool Result:** `{id}` ({suffix})"),
        None => format!("**Tool Result:** `{id}`"),
    }
}
