//! Parser benchmarks on a realistic 10 MB transcript.
//!
//! The transcript comes from `../shared/tools/gen_chat.py 10000000 7` (generated once into
//! `target/`), or from the file named by `FLEMMA_BENCH_CHAT`.
//!
//! - `parse/full`: a full parse (dropping the document is not timed).
//! - `parse/full_and_drop`: a full parse and dropping the document.
//! - `parse/append_2kb`: `IncrementalParser::append` of one 2 KB message.
//! - `parse/status_edit_middle`: `IncrementalParser::apply_edits` of one status edit (the
//!   `writer::set_status` edit of the tool result nearest the middle line, alternating
//!   `pending` and `approved`: one byte longer or shorter, same line count).
//! - `parse/status_edit_middle_update`: the same change given to `IncrementalParser::update`
//!   as a whole text, which compares it with the previous text to find the change.
//! - Before the timings, the peak resident memory added by one parse is measured from
//!   `/proc/self/status` (Linux) and printed.
#![allow(
    clippy::print_stderr,
    clippy::expect_used,
    clippy::cast_precision_loss,
    missing_docs,
    reason = "a benchmark binary reports on stderr and may abort on setup errors"
)]

#[path = "common/transcript.rs"]
mod transcript;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use flemma::ast::{IncrementalParser, Message, Reparse, TextEdit, ToolStatus, parse, writer};
use transcript::transcript;

/// A 2 KB assistant message, as a streamed response appends it.
fn message(n: usize) -> String {
    let mut m = format!("\n@Assistant:\nReply {n}.\n\n");
    while m.len() < 1900 {
        m.push_str("The parser keeps every tool result and thinking block in order.\n");
    }
    m.push_str("**Tool Use:** `bash` (`toolu_bench`)\n\n```json\n{\"command\":\"ls\"}\n```\n");
    m
}

/// Peak resident memory in KiB (`VmHWM`), after resetting the peak when `reset` is set.
fn peak_rss_kib(reset: bool) -> Option<u64> {
    if reset {
        std::fs::write("/proc/self/clear_refs", "5").ok()?;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn report_memory(text: &str) {
    let Some(before) = peak_rss_kib(true) else {
        eprintln!("memory: /proc/self/status is not available here");
        return;
    };
    let doc = black_box(parse(black_box(text)));
    let after = peak_rss_kib(false).unwrap_or(before);
    drop(doc);
    let file_mib = text.len() as f64 / 1_048_576.0;
    let added_mib = after.saturating_sub(before) as f64 / 1024.0;
    eprintln!(
        "memory: file {file_mib:.1} MiB; peak RSS grew by {added_mib:.1} MiB during a parse; \
         file + parse = {:.2}x the file size",
        (file_mib + added_mib) / file_mib
    );
}

fn benches(c: &mut Criterion, text: &str) {
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(20);
    group.bench_function("full", |b| {
        b.iter_with_large_drop(|| parse(black_box(text)));
    });
    group.bench_function("full_and_drop", |b| b.iter(|| parse(black_box(text))));

    group.throughput(Throughput::Bytes(message(0).len() as u64));
    group.sample_size(50);
    let base = IncrementalParser::new(text);
    group.bench_function("append_2kb", |b| {
        b.iter_custom(|iters| {
            let mut grown = String::with_capacity(text.len() + (iters as usize + 1) * 2048);
            grown.push_str(text);
            let mut ends = Vec::with_capacity(iters as usize);
            for n in 0..iters as usize {
                grown.push_str(&message(n));
                ends.push(grown.len());
            }
            let mut parser = base.clone();
            let mut total = Duration::ZERO;
            let mut previous = text.len();
            for end in ends {
                let start = Instant::now();
                let how = parser.append(black_box(&grown[previous..end]));
                total += start.elapsed();
                previous = end;
                assert_eq!(how, Reparse::Incremental);
            }
            total
        });
    });

    let [pending, approved] = status_edits(&base);
    let mut edited = base.clone();
    edited
        .apply_edits(std::slice::from_ref(&pending))
        .expect("the edit fits");
    let pending_text = edited.text().to_owned();
    let mut check = edited.clone();
    let how = check.apply_edits(std::slice::from_ref(&approved));
    assert_eq!(how.expect("the edit fits"), Reparse::Incremental);
    assert_eq!(
        check.document(),
        &parse(check.text()),
        "incremental == full"
    );
    let approved_text = check.text().to_owned();
    drop(check);
    group.throughput(Throughput::Elements(1));
    group.sample_size(100);
    group.bench_function("status_edit_middle", |b| {
        let mut parser = edited.clone();
        let mut flip = false;
        b.iter(|| {
            flip = !flip;
            let edit = if flip { &approved } else { &pending };
            parser.apply_edits(std::slice::from_ref(black_box(edit)))
        });
    });
    group.sample_size(20);
    group.bench_function("status_edit_middle_update", |b| {
        let mut parser = edited.clone();
        let mut flip = false;
        b.iter(|| {
            flip = !flip;
            let next = if flip { &approved_text } else { &pending_text };
            parser.update(black_box(next))
        });
    });
    group.finish();
}

/// `set_status` edits to `pending` and to `approved` of the tool result nearest the middle.
fn status_edits(parser: &IncrementalParser) -> [TextEdit; 2] {
    let doc = parser.document();
    let middle = doc.line_count / 2;
    let id = doc
        .messages
        .iter()
        .flat_map(Message::tool_results)
        .min_by_key(|r| r.span.start_line.abs_diff(middle))
        .map(|r| r.tool_use_id.to_string())
        .expect("the transcript has tool results");
    [ToolStatus::Pending, ToolStatus::Approved]
        .map(|s| writer::set_status(doc, &id, Some(s)).expect("the result exists"))
}

fn main() {
    let text = transcript();
    report_memory(&text);
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c, &text);
    c.final_summary();
}
