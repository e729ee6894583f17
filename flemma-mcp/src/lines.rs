//! Lines of a child process's output, bounded: a line longer than the limit keeps its first
//! bytes and its last few, the rest is dropped as it is read (never held in memory).

use std::fmt::Write as _;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// How many bytes of the end of a cut line are kept.
const TAIL: usize = 256;

/// One line, without its line feed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Line {
    /// The line, or its first `max` bytes when it was longer.
    pub(crate) bytes: Vec<u8>,
    /// How many bytes past `max` were dropped.
    pub(crate) dropped: usize,
    /// The last bytes of the line (up to 256) when some were dropped; empty otherwise.
    pub(crate) tail: Vec<u8>,
    /// Whether a line feed ended it (the last line of a stream may have none).
    pub(crate) ended: bool,
}

impl Line {
    /// Whether bytes of the line were dropped.
    pub(crate) fn is_cut(&self) -> bool {
        self.dropped > 0
    }

    /// The line's last bytes (up to 256), whether or not it was cut (when fewer than 256
    /// were dropped, they all are in `tail`, right after `bytes`).
    pub(crate) fn end(&self) -> Vec<u8> {
        let need = TAIL.saturating_sub(self.tail.len());
        let mut end = self.bytes[self.bytes.len().saturating_sub(need)..].to_vec();
        end.extend_from_slice(&self.tail);
        end
    }
}

/// Reads lines of at most `max` bytes from `R`. Cancel safe: a read dropped halfway keeps
/// its partial line for the next call (the copy and the `consume` have no await between
/// them).
pub(crate) struct BoundedLines<R> {
    read: BufReader<R>,
    max: usize,
    line: Line,
}

impl<R: AsyncRead + Unpin> BoundedLines<R> {
    pub(crate) fn new(read: R, max: usize) -> Self {
        Self {
            read: BufReader::new(read),
            max,
            line: Line::default(),
        }
    }

    /// The next line; at the end of the stream the last line without its line feed (if
    /// any), then `None`.
    pub(crate) async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                if self.line.bytes.is_empty() && !self.line.is_cut() {
                    return Ok(None);
                }
                return Ok(Some(std::mem::take(&mut self.line)));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let chunk = &available[..newline.unwrap_or(available.len())];
            let keep = chunk
                .len()
                .min(self.max - self.line.bytes.len().min(self.max));
            self.line.bytes.extend_from_slice(&chunk[..keep]);
            let over = &chunk[keep..];
            if !over.is_empty() {
                self.line.dropped += over.len();
                let tail = &mut self.line.tail;
                tail.extend_from_slice(&over[over.len().saturating_sub(TAIL)..]);
                if tail.len() > TAIL {
                    tail.drain(..tail.len() - TAIL);
                }
            }
            let consumed = newline.map_or(available.len(), |at| at + 1);
            self.read.consume(consumed);
            if newline.is_some() {
                self.line.ended = true;
                return Ok(Some(std::mem::take(&mut self.line)));
            }
        }
    }
}

/// The longest stderr line kept (the rest of it is dropped and counted).
pub(crate) const STDERR_LINE: usize = 8 * 1024;

/// Each line `stderr` carries, as text for a `tracing` event: decoded lossily (an invalid
/// byte becomes U+FFFD), what steers a terminal escaped, a line longer than `max` bytes cut
/// with a note of how much was dropped.
pub(crate) fn stderr_text(line: &Line) -> String {
    let text = String::from_utf8_lossy(&line.bytes);
    let mut text = flemma_ids::visible::line(text.trim_end_matches('\r')).into_owned();
    if line.is_cut() {
        let _ = write!(text, " [line cut: {} more bytes dropped]", line.dropped);
    }
    text
}

/// Reads a server's stderr to its end, each line a `tracing` event (never the transcript).
/// It stops only at the end of the stream or a read error: a server whose stderr were no
/// longer read would block on a full pipe, or die of `SIGPIPE` once it was closed.
pub(crate) async fn trace_stderr(server: String, stderr: impl AsyncRead + Unpin) {
    let mut lines = BoundedLines::new(stderr, STDERR_LINE);
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                let text = stderr_text(&line);
                tracing::info!(target: "flemma_mcp::stderr", server = %server, "{text}");
            }
            Ok(None) => return,
            Err(error) => {
                tracing::debug!(target: "flemma_mcp::stderr", server = %server, %error, "stderr closed");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Line> {
        // A reader that hands out 3 bytes at a time, so lines cross reads.
        let reader = tokio_test_reader(input);
        let mut lines = BoundedLines::new(reader, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push(line);
        }
        out
    }

    fn tokio_test_reader(input: &[u8]) -> impl AsyncRead + Unpin {
        let (mut write, read) = tokio::io::duplex(3);
        let input = input.to_vec();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = write.write_all(&input).await;
        });
        read
    }

    #[tokio::test]
    async fn a_long_line_keeps_its_head_and_tail_and_counts_the_rest() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        input.extend_from_slice(b"END\nnext\nlast");
        let got = lines(&input, 10).await;
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].bytes, b"short");
        assert!(!got[0].is_cut());
        assert_eq!(got[1].bytes, b"xxxxxxxxxx");
        assert_eq!(got[1].dropped, 993);
        assert_eq!(got[1].tail.len(), TAIL);
        assert!(got[1].end().ends_with(b"xxEND"));
        assert_eq!(got[2].bytes, b"next");
        assert_eq!(got[3].bytes, b"last");
        assert_eq!(
            stderr_text(&got[1]),
            "xxxxxxxxxx [line cut: 993 more bytes dropped]"
        );
    }

    #[tokio::test]
    async fn stderr_lines_are_decoded_lossily_and_escaped() {
        let got = lines(b"bad \xff byte\r\n\x1b[2Kcolour\n", STDERR_LINE).await;
        let texts: Vec<String> = got.iter().map(stderr_text).collect();
        assert_eq!(texts, ["bad \u{fffd} byte", "\\x1b[2Kcolour"]);
    }

    #[tokio::test]
    async fn a_huge_line_without_a_newline_is_not_held() {
        // 64 MiB streamed through a 1 KiB limit: only the limit and the tail are kept.
        let (mut write, read) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let block = vec![b'y'; 1024 * 1024];
            for _ in 0..64 {
                if write.write_all(&block).await.is_err() {
                    return;
                }
            }
        });
        let mut lines = BoundedLines::new(read, 1024);
        let line = lines.next_line().await.unwrap().unwrap();
        assert_eq!(line.bytes.len(), 1024);
        assert_eq!(line.dropped, 64 * 1024 * 1024 - 1024);
        assert!(line.bytes.capacity() < 64 * 1024);
        assert!(lines.next_line().await.unwrap().is_none());
    }
}
