//! Results as the terminal shows them: read back from the transcript just written.

use std::path::Path;

use flemma::ast::Segment;

/// A result block of the transcript.
#[derive(Debug, Clone, Copy)]
pub(super) enum Block<'a> {
    /// The Tool Result of a call id.
    Tool(&'a str),
    /// The Job Result of a job id.
    Job(&'a str),
}

/// Lines shown of a result: all of a short one; of a longer one the first
/// [`HEAD`], a count of the lines left out, and the last (where an error's exit status or a
/// truncation notice stands).
const SHOWN: usize = 5;
const HEAD: usize = 3;
/// Characters shown of one line.
const WIDTH: usize = 120;

fn short(line: &str) -> String {
    if line.chars().count() <= WIDTH {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(WIDTH - 1).collect();
    cut.push('…');
    cut
}

/// The lines of `content` to show.
pub(super) fn lines(content: &str) -> Vec<String> {
    let all: Vec<&str> = content.trim_end().lines().collect();
    if all.len() <= SHOWN {
        return all.into_iter().map(short).collect();
    }
    let mut shown: Vec<String> = all[..HEAD].iter().map(|l| short(l)).collect();
    shown.push(format!("… {} more lines", all.len() - HEAD - 1));
    if let Some(last) = all.last() {
        shown.push(short(last));
    }
    shown
}

pub(super) fn document(path: &Path) -> Option<flemma::ast::Document> {
    // The transcript is a regular file the run just wrote.
    let text = std::fs::read_to_string(path).ok()?;
    Some(flemma::ast::parse(&text))
}

/// The lines to show of `block` as `doc` holds it.
pub(super) fn excerpt(doc: &flemma::ast::Document, block: Block<'_>) -> Option<Vec<String>> {
    let content = doc
        .messages
        .iter()
        .flat_map(|m| &m.segments)
        .find_map(|segment| match (segment, block) {
            (Segment::ToolResult(r), Block::Tool(id)) if r.tool_use_id == id => {
                Some(r.content.as_str())
            }
            (Segment::JobResult(r), Block::Job(id)) if r.job_id == id => Some(r.content.as_str()),
            _ => None,
        })?;
    Some(lines(content))
}

/// The calls whose block waits for a decision (`(pending)`, empty), as (tool, id).
pub(super) fn pending(path: &Path) -> Vec<(String, String)> {
    document(path).map_or_else(Vec::new, |doc| flemma::runtime::pending_calls(&doc))
}

#[cfg(test)]
mod tests {
    use super::lines;

    #[test]
    fn a_long_result_shows_its_head_and_its_last_line() {
        assert_eq!(lines("a\nb\n"), ["a", "b"]);
        let long = (1..=9)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(lines(&long), ["1", "2", "3", "… 5 more lines", "9"]);
        assert_eq!(lines(&"x".repeat(200))[0].chars().count(), 120);
    }
}
