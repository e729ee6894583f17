//! Server-sent events: an incremental decoder that takes bytes in any chunking.

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, when present.
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// Decodes an SSE byte stream into events, whatever the chunk boundaries (inside UTF-8
/// sequences, between `\r` and `\n`, anywhere).
///
/// Lines end in `\n`, `\r\n` or `\r`; a blank line ends an event; `:` lines are comments;
/// `data:` lines accumulate; a single space after the colon is dropped. Events without data
/// are skipped.
///
/// ```
/// use flemma_providers::SseDecoder;
/// let mut sse = SseDecoder::new();
/// let mut events = sse.feed(b"event: ping\ndata: {\"a\"");
/// assert!(events.is_empty());
/// events.extend(sse.feed(b":1}\n\n"));
/// assert_eq!(events[0].event.as_deref(), Some("ping"));
/// assert_eq!(events[0].data, "{\"a\":1}");
/// ```
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous byte was `\r` (a following `\n` belongs to the same terminator).
    after_cr: bool,
    event: Option<String>,
    data: Option<String>,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events they complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut start = 0;
        if self.after_cr && bytes.first() == Some(&b'\n') {
            start = 1;
        }
        self.after_cr = false;
        while let Some(found) = memchr::memchr2(b'\n', b'\r', &bytes[start..]) {
            let at = start + found;
            self.line.extend_from_slice(&bytes[start..at]);
            self.end_line(&mut events);
            start = at + 1;
            if bytes[at] == b'\r' {
                match bytes.get(start) {
                    Some(b'\n') => start += 1,
                    // The `\n` of this `\r\n` may come with the next chunk.
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        self.line.extend_from_slice(&bytes[start..]);
        events
    }

    /// Ends the stream: a last event without its blank line is still delivered.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut events);
        }
        self.dispatch(&mut events);
        events.pop()
    }

    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch(events);
            return;
        }
        let text = String::from_utf8_lossy(&line);
        if text.starts_with(':') {
            return;
        }
        let (field, value) = match text.find(':') {
            Some(at) => {
                let value = &text[at + 1..];
                (&text[..at], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&*text, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if let Some(data) = self.data.take() {
            events.push(SseEvent { event, data });
        }
    }
}
