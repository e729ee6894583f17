//! Stream benchmarks.
//!
//! - `stream/sse_decode`: `SseDecoder` over ~10 MB of recorded Chat Completions events (the
//!   195 KB `chat_completions_thinking_stream.txt` repeated), fed in 16 KB chunks as a socket
//!   delivers them.
//! - `stream/anthropic_decode_and_write`: SSE, the Anthropic decoder and the `.chat` writer over
//!   recorded Anthropic streams repeated to ~1 MB.
#![allow(
    clippy::expect_used,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors"
)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput};
use flemma::providers::{AnthropicDecoder, ResponseWriter, SseDecoder, StreamDecoder};

fn peer(name: &str) -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/peer")
            .join(name),
    )
    .expect("peer fixture")
}

fn repeat(bytes: &[u8], target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + bytes.len());
    while out.len() < target {
        out.extend_from_slice(bytes);
        out.extend_from_slice(b"\n\n");
    }
    out
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream");
    group.sample_size(20);

    let body = repeat(&peer("chat_completions_thinking_stream.txt"), 10 << 20);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("sse_decode", |b| {
        b.iter(|| {
            let mut sse = SseDecoder::new();
            let mut count = 0;
            for chunk in body.chunks(16 * 1024) {
                count += sse.feed(black_box(chunk)).len();
            }
            count
        });
    });

    let mut one = peer("anthropic_thinking_with_signature_streaming.txt");
    one.extend(peer("anthropic_multi_tool_race_streaming.txt"));
    let body = repeat(&one, 1 << 20);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("anthropic_decode_and_write", |b| {
        b.iter(|| {
            let (mut sse, mut decoder, mut writer) = (
                SseDecoder::new(),
                AnthropicDecoder::new(),
                ResponseWriter::new(),
            );
            let mut written = 0;
            for chunk in body.chunks(16 * 1024) {
                for event in sse.feed(chunk) {
                    for decoded in decoder.decode(&event) {
                        written += writer.apply(&decoded).len();
                    }
                }
            }
            written + writer.finish().len()
        });
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
}
