//! Spec §10: truncation budgets, notices and UTF-8 boundaries.

use std::cell::RefCell;
use std::path::PathBuf;

use flemma_core::truncate::{
    Direction, Limits, MAX_BYTES, MAX_LINES, TruncatedBy, truncate_head, truncate_line,
    truncate_tail, truncate_with_overflow,
};
use proptest::prelude::*;

fn limits(max_lines: usize, max_bytes: usize) -> Limits {
    Limits {
        max_lines,
        max_bytes,
    }
}

fn numbered(n: usize) -> String {
    (1..=n)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A sink that records what it was given and answers with a fixed path.
struct Recorder {
    written: RefCell<Vec<String>>,
    path: Option<PathBuf>,
}

impl Recorder {
    fn new(path: Option<&str>) -> Self {
        Self {
            written: RefCell::new(Vec::new()),
            path: path.map(PathBuf::from),
        }
    }
}

impl flemma_core::truncate::OverflowSink for Recorder {
    fn write_full(&self, text: &str) -> Option<PathBuf> {
        self.written.borrow_mut().push(text.to_owned());
        self.path.clone()
    }
}

#[test]
fn defaults_are_the_spec_constants() {
    assert_eq!((MAX_LINES, MAX_BYTES), (2000, 51_200));
    assert_eq!(Limits::default(), limits(2000, 51_200));
}

#[test]
fn a_trailing_newline_is_an_empty_last_line() {
    let cut = truncate_head("a\nb\n", limits(10, 100));
    assert_eq!((cut.total_lines, cut.truncated()), (3, false));
    let cut = truncate_head("a\nb\n", limits(2, 100));
    assert_eq!((cut.content, cut.output_lines), ("a\nb", 2));
    let cut = truncate_tail("a\nb\n", limits(2, 100));
    assert_eq!((cut.content, cut.output_lines), ("b\n", 2));
}

#[test]
fn head_stops_at_the_budget_that_runs_out_first() {
    let text = numbered(10); // "line 1" .. "line 10", 6-7 bytes each
    let by_lines = truncate_head(&text, limits(3, 1000));
    assert_eq!(by_lines.content, "line 1\nline 2\nline 3");
    assert_eq!(by_lines.truncated_by, Some(TruncatedBy::Lines));
    // 6 + 1 + 6 = 13 bytes fit in 19; a third line would need 20.
    let by_bytes = truncate_head(&text, limits(100, 19));
    assert_eq!(by_bytes.content, "line 1\nline 2");
    assert_eq!(by_bytes.truncated_by, Some(TruncatedBy::Bytes));
    assert_eq!((by_bytes.output_lines, by_bytes.output_bytes), (2, 13));
    // Exactly at the byte budget is kept.
    let exact = truncate_head(&text, limits(100, 20));
    assert_eq!(exact.content, "line 1\nline 2\nline 3");
}

#[test]
fn head_keeps_nothing_when_the_first_line_is_over_the_byte_budget() {
    let text = format!("{}\nshort", "x".repeat(50));
    let cut = truncate_head(&text, limits(100, 49));
    assert_eq!(cut.content, "");
    assert!(cut.first_line_exceeds_limit);
    assert_eq!(
        (cut.output_lines, cut.truncated_by),
        (0, Some(TruncatedBy::Bytes))
    );
}

#[test]
fn tail_keeps_the_end_of_an_overlong_last_line_on_a_character_boundary() {
    // "é" is two bytes: 5 bytes from the end falls inside one, so 4 are kept.
    let text = format!("first\n{}", "é".repeat(10));
    let cut = truncate_tail(&text, limits(100, 5));
    assert_eq!(cut.content, "éé");
    assert!(cut.last_line_partial);
    assert_eq!((cut.output_lines, cut.output_bytes), (1, 4));
}

#[test]
fn truncate_line_cuts_to_whole_characters() {
    assert_eq!(truncate_line(&"a".repeat(500), 500), "a".repeat(500));
    let long = "a".repeat(501);
    let cut = truncate_line(&long, 500);
    assert_eq!(cut.len(), 500);
    assert!(cut.ends_with("a... [truncated]"));
    // 20 - 15 = 5 bytes: "日" is 3 bytes, so one character (3 bytes) is kept.
    assert_eq!(truncate_line(&"日".repeat(10), 20), "日... [truncated]");
    // A budget under the suffix still keeps at least one byte when it is a whole character.
    assert_eq!(
        truncate_line("abcdefghijklmnopqrstuvwxyz", 3),
        "a... [truncated]"
    );
}

#[test]
fn overflow_notice_by_lines_tail() {
    let sink = Recorder::new(Some("/s/tool_bash_t1.txt"));
    let text = numbered(10);
    let out = truncate_with_overflow(&text, Direction::Tail, limits(3, 1000), &sink);
    assert_eq!(
        out.content,
        "line 8\nline 9\nline 10\n\n[Showing lines 8-10 of 10. Full output: /s/tool_bash_t1.txt]"
    );
    assert_eq!(out.path, Some(PathBuf::from("/s/tool_bash_t1.txt")));
    assert_eq!(sink.written.borrow().as_slice(), [text]);
}

#[test]
fn overflow_notice_by_bytes_head_names_the_global_limit() {
    let sink = Recorder::new(Some("/s/x.txt"));
    let out = truncate_with_overflow(&numbered(10), Direction::Head, limits(100, 13), &sink);
    assert_eq!(
        out.content,
        "line 1\nline 2\n\n[Showing lines 1-2 of 10 (50.0KB limit). Full output: /s/x.txt]"
    );
}

#[test]
fn overflow_notice_for_a_partial_last_line() {
    let sink = Recorder::new(Some("/s/x.txt"));
    let text = format!("a\n{}", "z".repeat(3000));
    let out = truncate_with_overflow(&text, Direction::Tail, limits(100, 2048), &sink);
    assert_eq!(
        out.content,
        format!(
            "{}\n\n[Showing last 2.0KB of line 2. Full output: /s/x.txt]",
            "z".repeat(2048)
        )
    );
}

#[test]
fn overflow_notice_replaces_the_content_when_the_first_line_is_too_large() {
    let sink = Recorder::new(Some("/s/x.txt"));
    let text = format!("{}\nb", "q".repeat(70_000));
    let out = truncate_with_overflow(&text, Direction::Head, Limits::default(), &sink);
    assert_eq!(
        out.content,
        "[Output too large: 68.4KB in a single line, exceeds 50.0KB limit. Full output: /s/x.txt]"
    );
}

#[test]
fn a_failed_overflow_write_leaves_the_path_out_of_the_notice() {
    let sink = Recorder::new(None);
    let out = truncate_with_overflow(&numbered(5), Direction::Head, limits(2, 1000), &sink);
    assert_eq!(out.content, "line 1\nline 2\n\n[Showing lines 1-2 of 5]");
    assert_eq!(out.path, None);
}

#[test]
fn nothing_is_written_when_nothing_is_cut() {
    let sink = Recorder::new(Some("/s/x.txt"));
    let out = truncate_with_overflow("small", Direction::Tail, Limits::default(), &sink);
    assert_eq!((out.content.as_str(), out.truncated), ("small", false));
    assert!(sink.written.borrow().is_empty());
}

proptest! {
    /// Head keeps a prefix of whole lines within both budgets; tail a suffix. Slicing on a
    /// non-boundary would panic, so any Unicode text also checks the UTF-8 rule.
    #[test]
    fn cuts_are_whole_lines_within_budget(
        text in "([a-zé日\\n]{0,12}\\n?){0,30}",
        max_lines in 1usize..12,
        max_bytes in 1usize..80,
    ) {
        let budget = limits(max_lines, max_bytes);
        let head = truncate_head(&text, budget);
        prop_assert!(text.starts_with(head.content));
        let tail = truncate_tail(&text, budget);
        prop_assert!(text.ends_with(tail.content));
        for cut in [&head, &tail] {
            prop_assert!(cut.output_bytes == cut.content.len());
            prop_assert!(cut.total_lines == text.split('\n').count());
            if cut.truncated() {
                prop_assert!(cut.content.len() <= max_bytes);
                prop_assert!(cut.output_lines <= max_lines);
            } else {
                prop_assert_eq!(cut.content, text.as_str());
            }
        }
        // Whole lines, except a tail's partial last line.
        if head.truncated() && !head.content.is_empty() {
            prop_assert_eq!(text.as_bytes()[head.content.len()], b'\n');
        }
        if tail.truncated() && !tail.last_line_partial && !tail.content.is_empty() {
            prop_assert_eq!(text.as_bytes()[text.len() - tail.content.len() - 1], b'\n');
        }
    }
}
