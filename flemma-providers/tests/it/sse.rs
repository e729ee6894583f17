//! The SSE decoder gives the same events whatever the chunking.

use flemma_providers::{SseDecoder, SseEvent};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

use crate::{peer, stream_files};

fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseEvent> {
    let mut sse = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(sse.feed(chunk));
    }
    events.extend(sse.finish());
    events
}

#[test]
fn byte_by_byte_equals_whole_for_every_recording() {
    for name in stream_files() {
        let bytes = peer(&name);
        let whole = decode_chunks([bytes.as_slice()]);
        assert!(!whole.is_empty(), "{name}");
        let bytewise = decode_chunks(bytes.chunks(1));
        assert_eq!(bytewise, whole, "{name}");
    }
}

#[test]
fn every_two_way_split_equals_whole() {
    // Every byte boundary (inside UTF-8 sequences and event separators included) of every
    // recording up to 12 KB; the larger one is covered byte by byte above.
    for name in stream_files() {
        let bytes = peer(&name);
        if bytes.len() > 12 * 1024 {
            continue;
        }
        let whole = decode_chunks([bytes.as_slice()]);
        for k in 0..=bytes.len() {
            let (a, b) = bytes.split_at(k);
            assert_eq!(decode_chunks([a, b]), whole, "{name} split at {k}");
        }
    }
}

#[test]
fn line_endings_comments_and_multiline_data() {
    let crlf = b"event: a\r\ndata: one\r\ndata:two\r\n\r\n: comment\r\ndata: three\r\r";
    let events = decode_chunks([crlf.as_slice()]);
    assert_eq!(
        events,
        [
            SseEvent {
                event: Some("a".into()),
                data: "one\ntwo".into()
            },
            SseEvent {
                event: None,
                data: "three".into()
            },
        ]
    );
    let unterminated = decode_chunks([b"data: last".as_slice()]);
    assert_eq!(
        unterminated,
        [SseEvent {
            event: None,
            data: "last".into()
        }]
    );
    assert_eq!(decode_chunks([b"event: only\n\n".as_slice()]), []);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_chunking_of_any_recording(file in 0usize..64, cuts in prop::collection::vec(any::<usize>(), 0..40)) {
        let names = stream_files();
        let bytes = peer(&names[file % names.len()]);
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for p in points {
            chunks.push(&bytes[start..p]);
            start = p;
        }
        chunks.push(&bytes[start..]);
        prop_assert_eq!(decode_chunks(chunks), decode_chunks([bytes.as_slice()]));
    }
}
