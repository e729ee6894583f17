//! The protocol's framing read from a byte stream, defensively: the editor's bytes decide
//! nothing but what the message is. A frame whose header is wrong (no `Content-Length`, a
//! value that is not a number, a length over [`MAX_FRAME`]) or whose body is not a message is
//! refused and the stream goes on: the refusal is answered when the frame's request has an id,
//! logged otherwise. Nothing is allocated beyond what was read (a declared length is a limit,
//! never a capacity), and no header line is kept beyond [`MAX_HEADER_LINE`] bytes.
//!
//! A frame whose length cannot be trusted is delimited by its body instead: the JSON value
//! that follows its header (its brackets balanced, strings skipped), so that a client that
//! declared too much and sent one message is back in step at its next frame.

use std::io::{self, BufRead, Read as _};

use lsp_server::{Message, RequestId};

/// The largest frame body the server reads, in bytes (64 MiB: a 10 MB transcript opened, its
/// text escaped in JSON, fits several times over). A larger frame is refused.
pub const MAX_FRAME: usize = 64 << 20;

/// The longest header line kept; a longer one is skipped as garbage.
const MAX_HEADER_LINE: usize = 8 << 10;

/// How much of an offending value a refusal quotes.
const QUOTED: usize = 40;

/// Why a frame, or a header line, was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    /// The header had no `Content-Length`.
    #[error("the frame has no Content-Length header")]
    NoLength,
    /// `Content-Length` is not a number (quoted, escaped, cut).
    #[error("the frame's Content-Length {0:?} is not a length")]
    BadLength(String),
    /// Two `Content-Length` headers disagree.
    #[error("the frame has two Content-Length headers that differ ({0} and {1})")]
    TwoLengths(u64, u64),
    /// `Content-Length` is over [`MAX_FRAME`].
    #[error("the frame's Content-Length {0} is over the limit of {MAX_FRAME} bytes")]
    TooLarge(u64),
    /// A frame without a usable length was not followed by a JSON value of at most
    /// [`MAX_FRAME`] bytes.
    #[error("{0}; its body is not a JSON value of at most {MAX_FRAME} bytes and was skipped")]
    Unbounded(Box<Refusal>),
    /// Header lines that are not `Name: value` (the first one quoted).
    #[error("{count} header line(s) skipped, not `Name: value`: the first is {first:?}")]
    Garbage {
        /// The first skipped line, escaped and cut.
        first: String,
        /// How many lines were skipped.
        count: usize,
    },
    /// The body has an id, no result and no error, and is not a request.
    #[error("the frame's body is not a JSON-RPC request (its method is not a string)")]
    NotRequest,
    /// The body is not JSON.
    #[error("the frame's body is not JSON")]
    NotJson(#[source] serde_json::Error),
    /// The body is JSON but not a JSON-RPC message.
    #[error("the frame's body is not a JSON-RPC message")]
    NotMessage(#[source] serde_json::Error),
}

/// Reads the next message, refusing the frames that are not one: `complain` is told each
/// refusal, with the id of the request it refuses when the frame had one to answer.
///
/// # Errors
///
/// When reading fails. The end of the input (also in the middle of a frame) is `Ok(None)`.
pub(crate) fn read(
    input: &mut impl BufRead,
    complain: &mut impl FnMut(Option<RequestId>, Refusal),
) -> io::Result<Option<Message>> {
    let mut line = Vec::new();
    loop {
        let mut length = Length::Missing;
        let mut garbage: Option<(String, usize)> = None;
        let mut headers = 0_usize;
        loop {
            let text = match read_line(input, &mut line)? {
                Line::End => return Ok(None),
                Line::TooLong => None,
                Line::Text => Some(line.as_slice()),
            };
            if text.is_some_and(<[u8]>::is_empty) {
                break;
            }
            headers += 1;
            match text.and_then(header) {
                Some(Header::Length(value)) => length = length.and(value),
                Some(Header::Other) => {}
                None => {
                    let (_, count) = garbage.get_or_insert_with(|| (quote(&line), 0));
                    *count += 1;
                    // A frame glued to the garbage before it (`…}Content-Length: 52`).
                    if let Some(Header::Length(value)) = glued_length(&line) {
                        length = length.and(value);
                    }
                }
            }
        }
        if headers == 0 {
            // A stray blank line between frames.
            continue;
        }
        if let Some((first, count)) = garbage {
            complain(None, Refusal::Garbage { first, count });
        }
        let refusal = match length {
            Length::Value(size) if usize::try_from(size).is_ok_and(|size| size <= MAX_FRAME) => {
                let mut body = Vec::new();
                input.take(size).read_to_end(&mut body)?;
                if body.len() as u64 != size {
                    return Ok(None);
                }
                match decode(&body) {
                    Ok(message) => return Ok(Some(message)),
                    Err((id, refusal)) => {
                        complain(id, refusal);
                        continue;
                    }
                }
            }
            Length::Value(size) => Refusal::TooLarge(size),
            Length::Missing => Refusal::NoLength,
            Length::Bad(refusal) => refusal,
        };
        match scan_value(input)? {
            Scanned::End => {
                complain(None, refusal);
                return Ok(None);
            }
            Scanned::Value(body) => complain(request_id(&body), refusal),
            Scanned::None | Scanned::TooLarge => {
                complain(None, Refusal::Unbounded(Box::new(refusal)));
            }
        }
    }
}

/// A frame's length as its headers give it.
enum Length {
    Missing,
    Value(u64),
    Bad(Refusal),
}

impl Length {
    /// This length with one more `Content-Length` header.
    fn and(self, value: Result<u64, Refusal>) -> Self {
        match (self, value) {
            (Self::Bad(refusal), _) | (_, Err(refusal)) => Self::Bad(refusal),
            (Self::Missing, Ok(value)) => Self::Value(value),
            (Self::Value(old), Ok(value)) if old == value => Self::Value(value),
            (Self::Value(old), Ok(value)) => Self::Bad(Refusal::TwoLengths(old, value)),
        }
    }
}

enum Header {
    Length(Result<u64, Refusal>),
    Other,
}

/// A header line read as `Name: value` (`None`: it is not one).
fn header(line: &[u8]) -> Option<Header> {
    let line = std::str::from_utf8(line).ok()?;
    let (name, value) = line.split_once(':')?;
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return None;
    }
    if !name.eq_ignore_ascii_case("content-length") {
        return Some(Header::Other);
    }
    let value = value.trim();
    Some(Header::Length(
        value
            .parse::<u64>()
            .map_err(|_| Refusal::BadLength(quote(value.as_bytes()))),
    ))
}

/// The `Content-Length` header at the end of a garbage line, if there is one.
fn glued_length(line: &[u8]) -> Option<Header> {
    const NAME: &[u8] = b"content-length:";
    let at = line
        .windows(NAME.len())
        .rposition(|window| window.eq_ignore_ascii_case(NAME))?;
    match header(&line[at..])? {
        Header::Length(value) => Some(Header::Length(value)),
        Header::Other => None,
    }
}

enum Line {
    /// The input ended.
    End,
    /// Over [`MAX_HEADER_LINE`]: skipped to its end.
    TooLong,
    /// A line, without its `\n` or `\r\n`.
    Text,
}

/// Reads one header line into `line` (cleared first), keeping at most [`MAX_HEADER_LINE`]
/// bytes of it.
fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Line> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok(Line::End);
        }
        let (used, done) = match memchr::memchr(b'\n', available) {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        if !too_long {
            if line.len() + used <= MAX_HEADER_LINE + 2 {
                line.extend_from_slice(&available[..used]);
            } else {
                too_long = true;
                line.clear();
            }
        }
        input.consume(used);
        if done {
            break;
        }
    }
    if too_long {
        return Ok(Line::TooLong);
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(Line::Text)
}

/// A body read as a message; refused, with the id of its request when it has one.
fn decode(body: &[u8]) -> Result<Message, (Option<RequestId>, Refusal)> {
    let error = match serde_json::from_slice::<Message>(body) {
        // A request whose method is not a string reads as a response without a result.
        Ok(Message::Response(response))
            if response.result.is_none() && response.error.is_none() =>
        {
            match request_id(body) {
                Some(id) => {
                    return Err((Some(id), Refusal::NotRequest));
                }
                None => return Ok(Message::Response(response)),
            }
        }
        Ok(message) => return Ok(message),
        Err(error) => error,
    };
    Err(match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(_) => (request_id(body), Refusal::NotMessage(error)),
        Err(error) => (None, Refusal::NotJson(error)),
    })
}

/// The id of the request `body` is, when it is a JSON object with an id that is not a
/// response's (a response is not answered).
fn request_id(body: &[u8]) -> Option<RequestId> {
    let serde_json::Value::Object(object) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    if object.contains_key("result") || object.contains_key("error") {
        return None;
    }
    serde_json::from_value(object.get("id")?.clone()).ok()
}

enum Scanned {
    /// The input ended.
    End,
    /// The next byte does not start an object or an array.
    None,
    /// A value over [`MAX_FRAME`] bytes, skipped.
    TooLarge,
    /// The value's bytes.
    Value(Vec<u8>),
}

/// Reads the JSON object or array that comes next (after white space), by its brackets:
/// strings (and their escapes) are skipped, the bytes kept up to [`MAX_FRAME`].
fn scan_value(input: &mut impl BufRead) -> io::Result<Scanned> {
    let mut kept = Vec::new();
    let mut started = false;
    let mut too_large = false;
    let mut depth = 0_usize;
    let mut in_string = false;
    let mut escaped = false;
    loop {
        let available = match input.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok(Scanned::End);
        }
        // The value's first byte in this chunk, and the end of what is used of it.
        let mut from = 0;
        let mut used = available.len();
        let mut done = false;
        for (at, &byte) in available.iter().enumerate() {
            if !started {
                if byte.is_ascii_whitespace() {
                    continue;
                }
                if byte != b'{' && byte != b'[' {
                    input.consume(at);
                    return Ok(Scanned::None);
                }
                started = true;
                from = at;
            }
            if in_string {
                match byte {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_string = false,
                    _ => {}
                }
                continue;
            }
            match byte {
                b'"' => in_string = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                used = at + 1;
                done = true;
                break;
            }
        }
        if started && !too_large {
            if kept.len() + (used - from) <= MAX_FRAME {
                kept.extend_from_slice(&available[from..used]);
            } else {
                too_large = true;
                kept = Vec::new();
            }
        }
        input.consume(used);
        if done {
            return Ok(if too_large {
                Scanned::TooLarge
            } else {
                Scanned::Value(kept)
            });
        }
    }
}

/// `bytes` quoted in a refusal: at most [`QUOTED`] characters, escaped by the refusal's
/// `{:?}` (the editor's bytes are never shown raw).
fn quote(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .take(QUOTED)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    /// Every message of `input` and every refusal, in order.
    fn all(input: &[u8]) -> (Vec<Message>, Vec<(Option<RequestId>, String)>) {
        let mut input = io::BufReader::with_capacity(7, input);
        let mut refused = Vec::new();
        let mut messages = Vec::new();
        while let Some(message) = read(&mut input, &mut |id, refusal: Refusal| {
            refused.push((id, refusal.to_string()));
        })
        .unwrap()
        {
            messages.push(message);
        }
        (messages, refused)
    }

    const SHUTDOWN: &str = r#"{"jsonrpc":"2.0","id":9,"method":"shutdown"}"#;

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    #[test]
    fn huge_lengths_are_refused_with_the_requests_id_and_the_next_frame_is_read() {
        for length in ["18446744073709551615", "100000000000", "67108865"] {
            let input = format!(
                "Content-Length: {length}\r\n\r\n{}{}",
                r#"{"jsonrpc":"2.0","id":"a}\"[","method":"x"}"#,
                frame(SHUTDOWN)
            );
            let (messages, refused) = all(input.as_bytes());
            assert_eq!(messages.len(), 1, "{length}");
            assert_eq!(refused.len(), 1, "{refused:?}");
            assert_eq!(refused[0].0, Some(RequestId::from("a}\"[".to_owned())));
            assert!(refused[0].1.contains("over the limit"), "{refused:?}");
        }
    }

    #[test]
    fn bad_headers_are_refused_and_the_stream_goes_on() {
        let input = [
            "Content-Length: twelve\r\n\r\n{\"id\":1,\"method\":\"m\"}".to_owned(),
            "Content-Type: x\r\n\r\n{\"id\":2,\"method\":\"m\"}".to_owned(),
            "garbage \u{1b}[31m\r\n".to_owned(),
            frame(SHUTDOWN),
            "\r\n".to_owned(),
            "Content-Length: 3\r\nContent-Length: 4\r\n\r\n[1]".to_owned(),
            format!("{{\"id\":3}}{}", frame(SHUTDOWN)),
            frame("not json"),
            frame(r#"{"id":5,"method":7}"#),
            frame(SHUTDOWN),
        ]
        .concat();
        let (messages, refused) = all(input.as_bytes());
        assert_eq!(messages.len(), 3, "{refused:?}");
        let ids: Vec<_> = refused.iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(
            ids,
            [
                Some(1.into()),
                Some(2.into()),
                None,
                None,
                None,
                None,
                Some(5.into())
            ]
        );
        assert!(refused[0].1.contains("\"twelve\" is not a length"));
        assert!(refused[1].1.contains("no Content-Length"));
        assert!(
            refused[2].1.contains(r#""garbage \u{1b}[31m""#),
            "{refused:?}"
        );
        assert!(refused[3].1.contains("differ (3 and 4)"));
        assert!(
            refused[4].1.contains(r#"{\"id\":3}Content-Length"#),
            "{refused:?}"
        );
    }

    #[test]
    fn a_long_header_line_is_not_kept() {
        let input = format!("{}\r\n{}", "x".repeat(MAX_HEADER_LINE * 3), frame(SHUTDOWN));
        let (messages, refused) = all(input.as_bytes());
        assert_eq!(messages.len(), 1);
        assert_eq!(refused.len(), 1);
    }

    #[test]
    fn the_end_of_the_input_in_a_frame_ends_the_stream() {
        for input in [
            "Content-Length: 10\r\n\r\n{}",
            "Content-Length: 10\r\n",
            "Content-Le",
        ] {
            let (messages, _) = all(input.as_bytes());
            assert!(messages.is_empty());
        }
    }
}
