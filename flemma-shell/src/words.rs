//! A word of a command as bash would see it after quote removal: its literal text when it has
//! one, and what it would expand or run otherwise.

use brush_parser::ParserOptions;
use brush_parser::word::{WordPiece, WordPieceWithSource};

/// One word of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Word {
    /// The word as written.
    pub(crate) raw: String,
    /// Its text after quote removal, when it has one.
    text: Text,
    /// The word may become zero or several words (an unquoted expansion, a glob, braces).
    pub(crate) splits: bool,
}

/// A word's text after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Text {
    /// The word as written is its text (most words: no quote, escape or expansion).
    Raw,
    /// Its text differs from the word as written (quotes removed, escapes decoded).
    Decoded(String),
    /// It expands: no text is known.
    Unknown,
}

impl Word {
    /// A word whose text is `raw` as written.
    pub(crate) fn plain(raw: impl Into<String>) -> Self {
        Word {
            raw: raw.into(),
            text: Text::Raw,
            splits: false,
        }
    }

    /// A word known to be `text` (a placeholder such as find's `{}` is not).
    pub(crate) fn unknown(raw: &str) -> Self {
        Word {
            raw: raw.to_owned(),
            text: Text::Unknown,
            splits: false,
        }
    }

    /// A word written `raw` whose text is `text` when it has one.
    pub(crate) fn decoded(raw: &str, text: Option<String>, splits: bool) -> Self {
        let text = match text {
            Some(text) if text == raw => Text::Raw,
            Some(text) => Text::Decoded(text),
            None => Text::Unknown,
        };
        Word {
            raw: raw.to_owned(),
            text,
            splits,
        }
    }

    /// The text after quote removal, when the word expands to exactly that (no parameter,
    /// command or arithmetic expansion, no glob or brace expansion, no tilde).
    pub(crate) fn literal(&self) -> Option<&str> {
        match &self.text {
            Text::Raw => Some(&self.raw),
            Text::Decoded(text) => Some(text),
            Text::Unknown => None,
        }
    }
}

/// What decoding a word found besides its text.
#[derive(Debug, Default)]
pub(crate) struct Found {
    /// The text of each command substitution (`$( … )`, backquotes), to read in turn.
    pub(crate) substitutions: Vec<String>,
    /// A construct that hides a command the rules cannot see (a command substitution inside a
    /// parameter or arithmetic expansion).
    pub(crate) hidden: Option<&'static str>,
}

/// The options bash's own parsing would use for `bash -c` (extended globs on, as brush's
/// default; a pattern that only extglob reads is then an expansion, not text).
pub(crate) fn options() -> ParserOptions {
    ParserOptions::default()
}

/// Decodes `raw`, a word as the parser split it, collecting its substitutions into `found`.
pub(crate) fn decode(raw: &str, found: &mut Found) -> Word {
    // Most words are plain text: no quote, escape, expansion, glob or brace, so the word is
    // its own text (and the word parser, a global cache behind a lock, is not needed).
    if raw.bytes().all(plain) && !raw.is_empty() {
        return Word::plain(raw);
    }
    // A here-document inside a word's substitution is where unclosed ones come from: the
    // tokenizer has closed every other.
    if raw.contains("<<") && too_many_substitutions(raw) {
        found.hidden.get_or_insert(TOO_MANY_SUBSTITUTIONS);
        return Word::decoded(raw, None, true);
    }
    let Ok(pieces) = brush_parser::word::parse(raw, &options()) else {
        // A word the word parser cannot read: neither literal nor understood.
        found.hidden.get_or_insert("a word the parser cannot read");
        return Word::decoded(raw, None, true);
    };
    let mut state = State::default();
    state.pieces(raw, &pieces, false, found);
    Word::decoded(raw, state.literal.then_some(state.text), state.splits)
}

/// The substitutions of a here-document body that expands (its delimiter unquoted).
pub(crate) fn heredoc(body: &str, found: &mut Found) {
    if too_many_substitutions(body) {
        found.hidden.get_or_insert(TOO_MANY_SUBSTITUTIONS);
        return;
    }
    match brush_parser::word::parse_heredoc(body, &options()) {
        Ok(pieces) => {
            let mut state = State::default();
            state.pieces(body, &pieces, true, found);
        }
        Err(_) => {
            found
                .hidden
                .get_or_insert("a here-document the parser cannot read");
        }
    }
}

#[derive(Debug)]
struct State {
    text: String,
    literal: bool,
    splits: bool,
}

impl Default for State {
    fn default() -> Self {
        State {
            text: String::new(),
            literal: true,
            splits: false,
        }
    }
}

impl State {
    fn pieces(
        &mut self,
        source: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        found: &mut Found,
    ) {
        for piece in pieces {
            let written = source
                .get(piece.start_index..piece.end_index)
                .unwrap_or_default();
            self.piece(source, written, &piece.piece, quoted, found);
        }
    }

    fn piece(
        &mut self,
        root: &str,
        written: &str,
        piece: &WordPiece,
        quoted: bool,
        found: &mut Found,
    ) {
        match piece {
            WordPiece::Text(text) => {
                if !quoted && expands(text) {
                    self.literal = false;
                    self.splits = true;
                }
                self.text.push_str(text);
            }
            WordPiece::SingleQuotedText(text) => self.text.push_str(text),
            WordPiece::AnsiCQuotedText(text) => match ansi_c(text) {
                Some(decoded) => self.text.push_str(&decoded),
                None => self.literal = false,
            },
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                // The inner pieces' indexes count from the start of the whole word.
                self.pieces(root, inner, true, found);
            }
            WordPiece::EscapeSequence(escape) => {
                // `\c` is `c`; a backslash-newline joins lines and is removed.
                let mut chars = escape.chars();
                chars.next();
                let rest = chars.as_str();
                if rest != "\n" {
                    self.text.push_str(rest);
                }
            }
            WordPiece::TildeExpansion(_) => self.literal = false,
            WordPiece::ParameterExpansion(_) | WordPiece::ArithmeticExpression(_) => {
                self.literal = false;
                if !quoted {
                    self.splits = true;
                }
                if runs_something(written) {
                    found
                        .hidden
                        .get_or_insert("a command substitution inside an expansion");
                }
            }
            WordPiece::CommandSubstitution(command)
            | WordPiece::BackquotedCommandSubstitution(command) => {
                self.literal = false;
                if !quoted {
                    self.splits = true;
                }
                found.substitutions.push(command.clone());
            }
        }
    }
}

/// The most substitutions (`$(`, `$((`, `$[`) a here-document, or a word holding one, may open
/// and still be read: brush-parser 0.4's word parser backtracks over unclosed ones in
/// exponential time (nine `$((` in a here-document take seconds, twelve minutes), and the
/// tokenizer does not close a here-document's, so one with more asks.
const MAX_SUBSTITUTIONS: usize = 4;

const TOO_MANY_SUBSTITUTIONS: &str = "more than 4 substitutions in a here-document: not read";

/// Whether `text` opens more than [`MAX_SUBSTITUTIONS`] substitutions, quoting ignored (an
/// overcount only asks sooner), a `$` and its `(` or `[` joined across line continuations.
fn too_many_substitutions(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut count = 0;
    for (at, byte) in bytes.iter().enumerate() {
        if *byte != b'$' {
            continue;
        }
        let mut next = at + 1;
        while bytes.get(next) == Some(&b'\\') && bytes.get(next + 1) == Some(&b'\n') {
            next += 2;
        }
        if matches!(bytes.get(next), Some(b'(' | b'[')) {
            count += 1;
            if count > MAX_SUBSTITUTIONS {
                return true;
            }
        }
    }
    false
}

/// A byte that means itself in an unquoted word, wherever it is.
fn plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-_./:=,+@%^".contains(&byte)
}

/// Whether unquoted text is expanded by bash: a glob character or a brace expansion.
fn expands(text: &str) -> bool {
    if text.contains(['*', '?', '[']) {
        return true;
    }
    // `{a,b}` and `{1..3}`: an opening brace with a comma or `..` before a closing one.
    text.match_indices('{').any(|(at, _)| {
        let rest = &text[at + 1..];
        rest.find('}')
            .is_some_and(|end| rest[..end].contains(',') || rest[..end].contains(".."))
    })
}

/// Whether an expansion's text runs a command: a command or process substitution inside it
/// (past its own opening: `$((`, `${`, `$[`).
fn runs_something(written: &str) -> bool {
    let inner = ["$((", "${", "$["]
        .iter()
        .find_map(|open| written.strip_prefix(open))
        .unwrap_or(written);
    inner.contains("$(") || inner.contains('`') || inner.contains("<(") || inner.contains(">(")
}

/// The text of an ANSI-C quoted string (`$'…'`) as bash decodes it; `None` for an escape it
/// would not read as text (a NUL, which ends the word in bash).
pub(crate) fn ansi_c(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(escape) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match escape {
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(escape),
            _ => None,
        };
        if let Some(simple) = simple {
            out.push(simple);
            continue;
        }
        let code = match escape {
            '0'..='7' => {
                let mut value = escape.to_digit(8)?;
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            chars.next();
                        }
                        None => break,
                    }
                }
                value & 0xff
            }
            'x' => hex(&mut chars, 2)?,
            'u' => hex(&mut chars, 4)?,
            'U' => hex(&mut chars, 8)?,
            'c' => {
                let control = chars.next()?;
                u32::from(control) & 0x1f
            }
            // An unknown escape stays as written.
            other => {
                out.push('\\');
                out.push(other);
                continue;
            }
        };
        if code == 0 {
            return None;
        }
        out.push(char::from_u32(code)?);
    }
    Some(out)
}

/// Up to `max` hex digits; `None` when there is none (bash then keeps `\x` as written, which
/// the rules need not read: the word is then not literal).
fn hex(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, max: usize) -> Option<u32> {
    let mut value = 0u32;
    let mut digits = 0;
    while digits < max {
        match chars.peek().and_then(|d| d.to_digit(16)) {
            Some(d) => {
                value = value.checked_mul(16)?.checked_add(d)?;
                chars.next();
                digits += 1;
            }
            None => break,
        }
    }
    (digits > 0).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(raw: &str) -> Option<String> {
        decode(raw, &mut Found::default())
            .literal()
            .map(str::to_owned)
    }

    #[test]
    fn quotes_are_removed() {
        assert_eq!(literal("'git'").as_deref(), Some("git"));
        assert_eq!(literal("\"git\"").as_deref(), Some("git"));
        assert_eq!(literal("g\\it").as_deref(), Some("git"));
        assert_eq!(literal("$'\\x67it'").as_deref(), Some("git"));
        assert_eq!(literal("$'a\\nb'").as_deref(), Some("a\nb"));
        assert_eq!(literal("\"a\\$b\"").as_deref(), Some("a$b"));
    }

    #[test]
    fn expansions_are_not_literal() {
        for raw in [
            "$x", "${x}", "$(ls)", "`ls`", "*.rs", "{a,b}", "~", "~/x", "$((1+2))",
        ] {
            assert_eq!(literal(raw), None, "{raw}");
        }
        assert_eq!(literal("'*.rs'").as_deref(), Some("*.rs"));
        assert_eq!(literal("{}").as_deref(), Some("{}"));
    }

    #[test]
    fn a_word_with_many_substitutions_is_not_read() {
        assert!(!too_many_substitutions("$(a) $((1)) $[2] $(b)"));
        assert!(too_many_substitutions("$(a) $((1)) $[2] $(b) $(c)"));
        assert!(too_many_substitutions("$\\\n($\\\n(${x}$($($($("));
        let mut found = Found::default();
        let word = decode("\"$(cat <<E\n$(a)$(b)$(c)$(d)$(e)\nE\n)\"", &mut found);
        assert_eq!(word.literal(), None);
        assert!(found.substitutions.is_empty());
        assert_eq!(found.hidden, Some(TOO_MANY_SUBSTITUTIONS));
        let mut found = Found::default();
        heredoc(&"$((".repeat(12), &mut found);
        assert_eq!(found.hidden, Some(TOO_MANY_SUBSTITUTIONS));
    }

    #[test]
    fn substitutions_are_collected() {
        let mut found = Found::default();
        decode("\"a $(rm x) `ls`\"", &mut found);
        assert_eq!(found.substitutions, ["rm x", "ls"]);
        let mut found = Found::default();
        decode("${x:-$(rm x)}", &mut found);
        assert!(found.hidden.is_some());
    }
}
