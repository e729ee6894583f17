//! Server-supplied text in flemma's own messages (warnings, `tracing` events): the characters
//! that would steer a terminal made visible.
//!
//! A server chooses its tools' names, its error messages and what it writes on stderr; a
//! warning that carried an `ESC [ 2 K` or a right-to-left override through could rewrite
//! what a person reads on the terminal. Every control character (C0, DEL, C1; line feeds
//! and tabs too, a warning being one line) and every bidirectional control (U+200E/F,
//! U+202A–U+202E, U+2066–U+2069) is written as an escape (`\x1b`, `\u{202e}`), as
//! `flemma-cli` shows text on a terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` changes what a terminal shows beyond printing itself.
fn steers(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` as one line of a warning: what steers a terminal escaped.
pub(crate) fn shown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(steers) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !steers(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn what_steers_a_terminal_is_escaped() {
        assert_eq!(shown("plain, ünïcode ☕"), "plain, ünïcode ☕");
        assert_eq!(shown("a\x1b[2K\rb\nc\td"), "a\\x1b[2K\\x0db\\nc\\td");
        assert_eq!(shown("x\u{202e}txt.exe"), "x\\u{202e}txt.exe");
        assert_eq!(shown("\u{9b}31m\u{7f}"), "\\x9b31m\\x7f");
        assert!(matches!(shown("fine"), std::borrow::Cow::Borrowed(_)));
    }
}
