//! The text a terminal shows, from the bytes a program writes to it, one chunk at a time.
//!
//! The peer reads a terminal buffer, so the model never sees escape sequences; this filter
//! gets close without a full terminal emulator (which would have to hold the screen):
//!
//! * `\r\n` (what the terminal's `ONLCR` makes of `\n`) and any run of `\r` before `\n`
//!   become `\n`;
//! * a lone `\r` starts the line over (what a progress bar means by it); when the line is
//!   longer than [`LINE_HOLD`] bytes and was already passed on, it ends the line instead;
//! * escape sequences (CSI such as colours and cursor moves, OSC such as titles and
//!   hyperlinks, DCS/SOS/PM/APC strings, two- and three-byte escapes) and `BEL` are dropped;
//! * a backspace removes the character before it on the current line (overstrike in man
//!   pages), when that character is still held;
//! * every other byte (tabs, UTF-8, invalid UTF-8) passes unchanged.
//!
//! Memory is bounded by [`LINE_HOLD`]: the current line is held until its newline so that a
//! `\r` can take it back.

/// The longest line held back for a later `\r`.
pub(crate) const LINE_HOLD: usize = 8 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    /// After `ESC`.
    Escape,
    /// After `ESC` and intermediate bytes (`ESC ( B`).
    EscapeIntermediate,
    /// Inside `ESC [ …`.
    Csi,
    /// Inside an OSC, DCS, SOS, PM or APC string (ended by `BEL` or `ESC \`).
    String,
    /// `ESC` inside a string.
    StringEscape,
}

/// The streaming filter; see the module documentation.
#[derive(Debug)]
pub(crate) struct TerminalText {
    state: State,
    /// The current line, not yet passed on.
    line: Vec<u8>,
    /// Part of the current line was passed on already (it grew past [`LINE_HOLD`]).
    line_passed: bool,
    /// A `\r` waits to see whether `\n` follows.
    carriage_return: bool,
}

impl TerminalText {
    pub(crate) fn new() -> Self {
        Self {
            state: State::Ground,
            line: Vec::new(),
            line_passed: false,
            carriage_return: false,
        }
    }

    /// Filters `input`, appending the text it completes to `out`.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &byte in input {
            match self.state {
                State::Ground => self.ground(byte, out),
                State::Escape => {
                    self.state = match byte {
                        b'[' => State::Csi,
                        b']' | b'P' | b'X' | b'^' | b'_' => State::String,
                        0x20..=0x2f => State::EscapeIntermediate,
                        _ => State::Ground,
                    };
                }
                State::EscapeIntermediate => {
                    if !(0x20..=0x2f).contains(&byte) {
                        self.state = State::Ground;
                    }
                }
                State::Csi => match byte {
                    0x1b => self.state = State::Escape,
                    0x40..=0x7e => self.state = State::Ground,
                    _ => {}
                },
                State::String => match byte {
                    0x07 => self.state = State::Ground,
                    0x1b => self.state = State::StringEscape,
                    _ => {}
                },
                State::StringEscape => {
                    self.state = if byte == b'\\' {
                        State::Ground
                    } else {
                        State::String
                    };
                }
            }
        }
    }

    fn ground(&mut self, byte: u8, out: &mut Vec<u8>) {
        match byte {
            b'\r' => self.carriage_return = true,
            b'\n' => {
                self.carriage_return = false;
                out.extend_from_slice(&self.line);
                out.push(b'\n');
                self.line.clear();
                self.line_passed = false;
            }
            0x1b => self.state = State::Escape,
            0x07 => {}
            0x08 => {
                // Remove one character (its continuation bytes first).
                while let Some(last) = self.line.pop() {
                    if last & 0xc0 != 0x80 {
                        break;
                    }
                }
            }
            _ => {
                if self.carriage_return {
                    self.carriage_return = false;
                    if self.line_passed {
                        out.extend_from_slice(&self.line);
                        out.push(b'\n');
                        self.line_passed = false;
                    }
                    self.line.clear();
                }
                self.line.push(byte);
                if self.line.len() >= LINE_HOLD {
                    out.extend_from_slice(&self.line);
                    self.line.clear();
                    self.line_passed = true;
                }
            }
        }
    }

    /// Passes on the last line (a trailing `\r` is dropped).
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.line);
        self.line.clear();
        self.line_passed = false;
        self.carriage_return = false;
        self.state = State::Ground;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(chunks: &[&[u8]]) -> String {
        let mut filter = TerminalText::new();
        let mut out = Vec::new();
        for chunk in chunks {
            filter.feed(chunk, &mut out);
        }
        filter.finish(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn crlf_becomes_lf_across_chunks() {
        assert_eq!(text(&[b"a\r", b"\nb\r\r\nc"]), "a\nb\nc");
    }

    #[test]
    fn escapes_are_dropped() {
        assert_eq!(
            text(&[b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07ok\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b(Bz\x1b="]),
            "red oklink z"
        );
        // Split inside a sequence.
        assert_eq!(text(&[b"a\x1b[3", b"8;5;1", b"mb"]), "ab");
    }

    #[test]
    fn carriage_return_starts_the_line_over() {
        assert_eq!(text(&[b" 10%\r 50%\r100%\ndone\r\n"]), "100%\ndone\n");
        assert_eq!(text(&[b"abc\r"]), "abc");
    }

    #[test]
    fn a_long_line_is_not_taken_back() {
        let long = vec![b'x'; LINE_HOLD + 10];
        let out = text(&[&long, b"\rtail"]);
        assert_eq!(out.len(), LINE_HOLD + 10 + 1 + 4);
        assert!(out.ends_with("x\ntail"));
    }

    #[test]
    fn backspace_overstrikes() {
        assert_eq!(text(&["N\x08NA\x08AMé\x08E".as_bytes()]), "NAME");
    }

    #[test]
    fn utf8_and_tabs_pass() {
        assert_eq!(text(&["é\tü".as_bytes()]), "é\tü");
    }
}
