//! What reaches a terminal or a log: text from a model, a tool, an MCP server or a file, with
//! the characters that would steer the terminal made visible.
//!
//! Text printed raw could hold `ESC [ 2 K` (erase the line), `CR` (back to the start of the
//! line), or a right-to-left override, so that an approval prompt reads `allow bash: $ ls`
//! while another command runs on `y`, or a server's warning rewrites the line above it. Every
//! control character (C0 but line feed and tab, DEL, C1) and every bidirectional control
//! (U+200E/F, U+202A–U+202E, U+2066–U+2069) is written as an escape (`\x1b`, `\u{202e}`); in
//! one-line contexts (a status line, a prompt, a warning) line feeds and tabs too. Every
//! flemma crate that shows someone else's text uses these two functions.
//!
//! ```
//! use flemma_ids::visible::{line, text};
//!
//! assert_eq!(text("a\x1b[2Kb\nc"), "a\\x1b[2Kb\nc");
//! assert_eq!(line("ls\nrm -rf ~"), "ls\\nrm -rf ~");
//! assert_eq!(line("x\u{202e}txt.exe"), "x\\u{202e}txt.exe");
//! ```

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` changes what a terminal shows beyond printing itself.
fn steers(c: char, one_line: bool) -> bool {
    match c {
        '\n' | '\t' => one_line,
        c if c.is_control() => true,
        '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape(text: &str, one_line: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| steers(c, one_line)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !steers(c, one_line) {
            out.push(c);
        } else if c == '\n' {
            out.push_str("\\n");
        } else if c == '\t' {
            out.push_str("\\t");
        } else if u32::from(c) < 0x100 {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
    Cow::Owned(out)
}

/// `text` for a terminal, its line feeds and tabs kept; borrowed when nothing needs escaping.
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` as one line (a status line, a prompt, a warning): line feeds and tabs made visible
/// too.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_steers_a_terminal_is_shown() {
        assert_eq!(text("plain, ünïcode ☕"), "plain, ünïcode ☕");
        assert_eq!(text("a\x1b[2K\rb\nc\td"), "a\\x1b[2K\\x0db\nc\td");
        assert_eq!(line("a\x1b[2K\rb\nc\td"), "a\\x1b[2K\\x0db\\nc\\td");
        assert_eq!(text("x\u{202e}txt.exe"), "x\\u{202e}txt.exe");
        assert_eq!(text("\u{9b}31m\u{7f}"), "\\x9b31m\\x7f");
        assert!(matches!(text("fine"), Cow::Borrowed(_)));
    }
}
