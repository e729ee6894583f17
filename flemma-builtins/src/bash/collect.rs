//! A command's output, collected with bounded memory.
//!
//! Up to [`SPILL_AT`] bytes the output is simply kept. Past that it is streamed to the result
//! store (the call's overflow file, which then holds the full output) and only its last
//! [`TAIL`] bytes stay in memory: what tail truncation needs, since a truncated tail is at most
//! `MAX_BYTES` long. Trailing whitespace is trimmed (ASCII whitespace, as the terminal text
//! is), also in the file, without ever holding a run of it: the run is counted and only its
//! end is kept, in case more text follows.

use std::collections::VecDeque;

use flemma_store::AtomicWriter;

use flemma_core::truncate::MAX_BYTES;

/// Output up to this size is kept whole in memory.
pub(crate) const SPILL_AT: usize = 1024 * 1024;
/// The end of a larger output kept in memory.
pub(crate) const TAIL: usize = MAX_BYTES + 4096;
/// Writes to the overflow file are batched to this size.
const WRITE_BATCH: usize = 64 * 1024;

/// Opens the overflow file when the output outgrows memory; `None` when there is no store or
/// it fails (the notice then names no file).
pub(crate) type OpenSpill = Box<dyn FnOnce() -> Option<AtomicWriter> + Send>;

/// The collected output; see the module documentation.
pub(crate) struct Collector {
    /// The whole output, until it passes [`SPILL_AT`].
    whole: Vec<u8>,
    open: Option<OpenSpill>,
    spilled: Option<Spilled>,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector")
            .field("whole", &self.whole.len())
            .field("spilled", &self.spilled.is_some())
            .finish_non_exhaustive()
    }
}

/// The state of an output larger than [`SPILL_AT`].
struct Spilled {
    writer: Option<AtomicWriter>,
    batch: Vec<u8>,
    /// The last [`TAIL`] bytes of the output up to its last non-whitespace byte.
    tail: Ring,
    /// The whitespace after it (its last [`TAIL`] bytes).
    trailing: Ring,
    /// Bytes up to and including the last non-whitespace byte.
    committed: u64,
    /// Newlines among them.
    committed_newlines: u64,
    /// All bytes, and the newlines in the trailing whitespace.
    total: u64,
    trailing_newlines: u64,
}

/// The last `TAIL` bytes pushed.
struct Ring {
    bytes: VecDeque<u8>,
}

impl Ring {
    fn new() -> Self {
        Self {
            bytes: VecDeque::with_capacity(TAIL),
        }
    }

    fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(TAIL)..];
        let over = (self.bytes.len() + data.len()).saturating_sub(TAIL);
        self.bytes.drain(..over);
        self.bytes.extend(data);
    }

    fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.bytes).into()
    }
}

/// What the output came to.
pub(crate) enum Collected {
    /// The whole output (trailing whitespace trimmed), and the overflow file holding it when
    /// it was streamed there.
    Whole(String, Option<AtomicWriter>),
    /// The end of a larger output, with the whole output's counts and its overflow file.
    Tail {
        /// The last bytes (more than `MAX_BYTES`), from a character boundary.
        tail: String,
        /// Lines of the whole output.
        total_lines: usize,
        /// Bytes of the whole output.
        total_bytes: usize,
        /// The overflow file, cut to the trimmed output, not yet installed.
        writer: Option<AtomicWriter>,
    },
}

impl Collector {
    pub(crate) fn new(open: OpenSpill) -> Self {
        Self {
            whole: Vec::new(),
            open: Some(open),
            spilled: None,
        }
    }

    /// Adds output.
    pub(crate) fn push(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if self.spilled.is_none() {
            if self.whole.len() + data.len() <= SPILL_AT {
                self.whole.extend_from_slice(data);
                return;
            }
            self.spill();
        }
        if let Some(spilled) = &mut self.spilled {
            spilled.push(data);
        }
    }

    /// Starts streaming: the kept output goes to the file and to the tail.
    fn spill(&mut self) {
        let writer = self.open.take().and_then(|open| open());
        let mut spilled = Spilled {
            writer,
            batch: Vec::with_capacity(WRITE_BATCH),
            tail: Ring::new(),
            trailing: Ring::new(),
            committed: 0,
            committed_newlines: 0,
            total: 0,
            trailing_newlines: 0,
        };
        spilled.push(&std::mem::take(&mut self.whole));
        self.spilled = Some(spilled);
    }

    /// Bytes collected so far.
    #[cfg(test)]
    pub(crate) fn len(&self) -> u64 {
        self.spilled
            .as_ref()
            .map_or(self.whole.len() as u64, |s| s.total)
    }

    /// The output as the tool reports it.
    pub(crate) fn finish(self) -> Collected {
        let Some(mut spilled) = self.spilled else {
            let text = String::from_utf8_lossy(self.whole.trim_ascii_end()).into_owned();
            return Collected::Whole(text, None);
        };
        spilled.flush();
        let mut writer = spilled.writer.take();
        if let Some(w) = &mut writer
            && let Err(error) = w.truncate(spilled.committed)
        {
            tracing::warn!(%error, "overflow file not trimmed");
            writer = None;
        }
        let tail = spilled.tail.take();
        let total_bytes = usize::try_from(spilled.committed).unwrap_or(usize::MAX);
        if tail.len() >= total_bytes {
            return Collected::Whole(String::from_utf8_lossy(&tail).into_owned(), writer);
        }
        // The tail may start inside a character: skip its continuation bytes.
        let start = tail
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xc0 == 0x80)
            .count();
        Collected::Tail {
            tail: String::from_utf8_lossy(&tail[start..]).into_owned(),
            total_lines: usize::try_from(spilled.committed_newlines)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
            total_bytes,
            writer,
        }
    }
}

impl Spilled {
    fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if let Some(last) = data.iter().rposition(|b| !b.is_ascii_whitespace()) {
            let (text, rest) = data.split_at(last + 1);
            // The whitespace held so far is followed by text: it is part of the output.
            let held = self.trailing.take();
            self.tail.push(&held);
            self.tail.push(text);
            self.committed = self.total - rest.len() as u64;
            self.committed_newlines += self.trailing_newlines + newlines(text);
            self.trailing.push(rest);
            self.trailing_newlines = newlines(rest);
        } else {
            self.trailing.push(data);
            self.trailing_newlines += newlines(data);
        }
        if self.writer.is_some() {
            self.batch.extend_from_slice(data);
            if self.batch.len() >= WRITE_BATCH {
                self.flush();
            }
        }
    }

    fn flush(&mut self) {
        if let Some(writer) = &mut self.writer
            && !self.batch.is_empty()
            && let Err(error) = writer.write(&self.batch)
        {
            tracing::warn!(%error, "overflow file not written");
            self.writer = None;
        }
        self.batch.clear();
    }
}

fn newlines(data: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', data).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Collected {
        let mut c = Collector::new(Box::new(|| None));
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish()
    }

    #[test]
    fn small_output_is_kept_whole_and_trimmed() {
        match collect(&[b"a\n", b"b  \n\n"]) {
            Collected::Whole(text, None) => assert_eq!(text, "a\nb"),
            _ => panic!("expected the whole output"),
        }
    }

    #[test]
    fn large_output_keeps_the_tail_and_counts() {
        let line = b"0123456789\n";
        let mut c = Collector::new(Box::new(|| None));
        let n = 200_000;
        for _ in 0..n {
            c.push(line);
        }
        // Trailing whitespace larger than the tail buffer, then nothing else.
        c.push(&vec![b'\n'; 2 * TAIL]);
        assert_eq!(c.len(), (n * line.len() + 2 * TAIL) as u64);
        match c.finish() {
            Collected::Tail {
                tail,
                total_lines,
                total_bytes,
                writer,
            } => {
                assert!(writer.is_none());
                assert_eq!(total_bytes, n * line.len() - 1);
                assert_eq!(total_lines, n);
                assert!(tail.ends_with("0123456789\n0123456789"));
                assert_eq!(tail.len(), TAIL);
            }
            Collected::Whole(..) => panic!("expected a tail"),
        }
    }

    #[test]
    fn whitespace_followed_by_text_is_kept() {
        let mut c = Collector::new(Box::new(|| None));
        c.push(&vec![b'x'; SPILL_AT]);
        c.push(b"\n\n  ");
        c.push(b"end\n");
        match c.finish() {
            Collected::Tail {
                tail, total_lines, ..
            } => {
                assert!(tail.ends_with("x\n\n  end"));
                assert_eq!(total_lines, 3);
            }
            Collected::Whole(..) => panic!("expected a tail"),
        }
    }

    #[test]
    fn mostly_whitespace_output_comes_back_whole() {
        let mut c = Collector::new(Box::new(|| None));
        c.push(b"hi");
        c.push(&vec![b' '; SPILL_AT + 10]);
        match c.finish() {
            Collected::Whole(text, _) => assert_eq!(text, "hi"),
            Collected::Tail { .. } => panic!("expected the whole output"),
        }
    }
}
