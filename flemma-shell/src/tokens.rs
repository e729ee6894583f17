//! A fast tokenizer for the commands agents run, giving exactly the tokens brush-parser's own
//! tokenizer gives, or nothing.
//!
//! brush-parser 0.4's tokenizer reads chars one at a time through a `BufReader` and builds each
//! token from several allocations; on a 1 KB command that is about a quarter of the approval
//! time. [`tokenize`] reads the same text as a byte slice, a run of ordinary bytes at a time,
//! and allocates only each token's text (at its size) and its two positions (one when the
//! token starts where the last one ended). It follows brush's rules step for step, quirks
//! included (the words of a `$( … )` are rebuilt with a blank turned into one space, a token
//! after a comment starts where the comment did, a line continuation vanishes), because the
//! parser is then fed these tokens and a difference would be a misread command.
//!
//! It handles a subset: plain words, quotes (`'…'`, `"…"`, `$'…'`), backslash escapes and line
//! continuations, `$NAME`, `${…}`, `$( … )` (nested, in or out of double quotes), comments,
//! every operator but the here-document ones, and any text without control characters. For
//! anything else it returns `None` and the caller uses brush's tokenizer: here-documents (`<<`,
//! `<<-`; the here-string `<<<` is handled), backquotes, arithmetic (`$((`, `$[`, `((`),
//! extended globs (`@(`, `!(`, `*(`, `?(`, `+(`, also after an escaped or expanded character,
//! as brush reads them), `case` or `esac` inside a `$( … )`, control characters (`\r`, NUL, …),
//! input brush rejects (an unterminated quote, escape or expansion), and nesting deeper than
//! [`MAX_NESTING`].

use std::borrow::Cow;
use std::sync::Arc;

use brush_parser::{SourcePosition, SourceSpan, Token, TokenizerOptions};

/// The deepest nesting of `$( … )` and `${ … }` read here; deeper text goes to brush.
const MAX_NESTING: usize = 32;

/// One token as read here: its text (borrowed from the command when it is written there as
/// is), whether it is an operator, and where it starts and ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lexeme<'a> {
    pub(crate) text: Cow<'a, str>,
    pub(crate) operator: bool,
    pub(crate) start: Position,
    pub(crate) end: Position,
}

/// The tokens brush-parser's `uncached_tokenize_str` gives for `text` with the options of
/// [`crate::words::options`], or `None` when `text` is outside the subset this tokenizer reads
/// (brush's tokenizer then decides, errors included).
#[cfg_attr(
    not(test),
    allow(dead_code, reason = "the tests compare it with brush's tokens")
)]
pub(crate) fn tokenize(text: &str) -> Option<Vec<Token>> {
    lex(text).map(|lexemes| to_brush(&lexemes))
}

/// The tokens of `text` as [`tokenize`] gives them, without brush's types (no allocation for
/// a token written as is); `None` outside the subset this tokenizer reads.
pub(crate) fn lex(text: &str) -> Option<Vec<Lexeme<'_>>> {
    // The rules below are brush's for these options only.
    let expected = TokenizerOptions {
        enable_extended_globbing: true,
        posix_mode: false,
        sh_mode: false,
    };
    if crate::words::options().tokenizer_options() != expected {
        return None;
    }
    // Control chars (`\r`, NUL, escape, …) but newline and tab; one pass without early exit,
    // which the compiler vectorizes.
    if text
        .bytes()
        .fold(0, |seen, b| seen | CONTROL[usize::from(b)])
        != 0
    {
        return None;
    }
    let mut lexer = Lexer {
        text,
        bytes: text.as_bytes(),
        at: 0,
        cursor: Position {
            index: 0,
            line: 1,
            column: 1,
            byte: 0,
        },
        depth: 0,
    };
    // About one token in four bytes or more (a 1 KB command of 20 simple commands has 156).
    let mut lexemes = Vec::with_capacity(text.len() / 4 + 4);
    // Each token is read here, then borrowed from the text or copied at its size.
    let mut scratch = String::with_capacity(64);
    loop {
        scratch.clear();
        let piece = lexer.token(&mut scratch, None, false).ok()?;
        if piece.started {
            let text = match text.get(piece.start.byte..piece.end.byte) {
                Some(written) if written == scratch => Cow::Borrowed(written),
                _ => Cow::Owned(scratch.as_str().to_owned()),
            };
            lexemes.push(Lexeme {
                text,
                operator: piece.operator,
                start: piece.start,
                end: piece.end,
            });
        } else if piece.reason == Reason::EndOfInput {
            return Some(lexemes);
        } else {
            // Unreachable at the top level (nothing else ends an empty token); never loop.
            return None;
        }
    }
}

/// brush-parser's tokens of `lexemes`.
pub(crate) fn to_brush(lexemes: &[Lexeme<'_>]) -> Vec<Token> {
    let mut tokens = Vec::with_capacity(lexemes.len());
    // A token that starts where the last one ended shares its position.
    let mut last_end: Option<(Position, Arc<SourcePosition>)> = None;
    for lexeme in lexemes {
        let start = match &last_end {
            Some((end, shared)) if *end == lexeme.start => Arc::clone(shared),
            _ => Arc::new(lexeme.start.into()),
        };
        let end = Arc::new(SourcePosition::from(lexeme.end));
        last_end = Some((lexeme.end, Arc::clone(&end)));
        let span = SourceSpan { start, end };
        let text = lexeme.text.clone().into_owned();
        tokens.push(if lexeme.operator {
            Token::Operator(text, span)
        } else {
            Token::Word(text, span)
        });
    }
    tokens
}

/// The bytes a byte table holds.
const fn table(bytes: &[u8]) -> [bool; 256] {
    let mut table = [false; 256];
    let mut i = 0;
    while i < bytes.len() {
        table[bytes[i] as usize] = true;
        i += 1;
    }
    table
}

/// 1 for the control chars the fast path leaves to brush (all but newline and tab).
static CONTROL: [u8; 256] = {
    let mut table = [0; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = 1;
        b += 1;
    }
    table[b'\n' as usize] = 0;
    table[b'\t' as usize] = 0;
    table[0x7f] = 1;
    table
};

/// What ends a run of a word's ordinary chars outside quotes: what quotes, expands, starts an
/// operator or an extended glob, a blank.
static UNQUOTED: [bool; 256] = table(b"\\'\"$`()&;|<> \t\n");
/// The same inside `${ … }`, where `}` ends the token.
static UNQUOTED_IN_BRACES: [bool; 256] = table(b"\\'\"$`()&;|<> \t\n}");
/// What ends a run in single quotes.
static SINGLE: [bool; 256] = table(b"'");
/// What ends a run in `$'…'`.
static ANSI_C: [bool; 256] = table(b"\\'");
/// What ends a run in double quotes.
static DOUBLE: [bool; 256] = table(b"\\\"$`");

/// A position as brush counts it: chars from 0, lines and columns from 1; and its byte
/// offset in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) index: usize,
    line: usize,
    column: usize,
    byte: usize,
}

impl From<Position> for SourcePosition {
    fn from(p: Position) -> Self {
        SourcePosition {
            index: p.index,
            line: p.line,
            column: p.column,
        }
    }
}

/// Why a token ended (brush's reasons, those that can occur here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    EndOfInput,
    /// The newline operator ended.
    Newline,
    /// The terminating char of the enclosing construct (`)` or `}`), not consumed.
    Terminator,
    /// A blank after the token, consumed.
    Blank,
    /// A char that starts an operator, not consumed.
    OperatorStart,
    /// A char that does not continue the operator, not consumed.
    OperatorEnd,
}

/// The quoting in force within a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
    /// `$'…'`.
    AnsiC,
}

/// The input is outside the subset read here.
#[derive(Debug)]
struct Bail;

/// One token read: its text went into the caller's buffer.
#[derive(Debug)]
struct Piece {
    reason: Reason,
    /// The token has text (an empty one is no token).
    started: bool,
    operator: bool,
    start: Position,
    end: Position,
}

#[derive(Debug)]
struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    /// Byte offset of the next char.
    at: usize,
    /// Position of the next char.
    cursor: Position,
    /// Constructs (`$(`, `${`) open around the current token.
    depth: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// The length in bytes of the char at `at` (the text is UTF-8, `at` a char boundary).
    fn char_len(&self) -> usize {
        match self.peek() {
            None => 0,
            Some(b) if b < 0x80 => 1,
            Some(b) if b >= 0xf0 => 4,
            Some(b) if b >= 0xe0 => 3,
            Some(_) => 2,
        }
    }

    /// Moves the cursor over the text up to byte `end` (a char boundary).
    fn advance_to(&mut self, end: usize) {
        for &b in self.bytes.get(self.at..end).unwrap_or_default() {
            if b == b'\n' {
                self.cursor.line += 1;
                self.cursor.column = 1;
                self.cursor.index += 1;
            } else if b & 0xc0 != 0x80 {
                // Not a continuation byte: a char starts here.
                self.cursor.column += 1;
                self.cursor.index += 1;
            }
        }
        self.at = end;
        self.cursor.byte = end;
    }

    /// Consumes the next char without keeping it.
    fn skip(&mut self) {
        self.advance_to(self.at + self.char_len());
    }

    /// Consumes the next char onto `out`.
    fn take(&mut self, out: &mut String) -> Result<(), Bail> {
        match self.peek() {
            Some(b) if b < 0x80 => {
                out.push(char::from(b));
                self.skip();
            }
            _ => {
                let end = self.at + self.char_len();
                out.push_str(self.text.get(self.at..end).ok_or(Bail)?);
                self.advance_to(end);
            }
        }
        Ok(())
    }

    /// Consumes the next char onto `out`, and the chars after it up to the first byte of
    /// `stops`: chars the token loop would each take as they come, in the same state.
    fn take_run(&mut self, out: &mut String, stops: &[bool; 256]) -> Result<(), Bail> {
        let mut end = self.at + self.char_len();
        while let Some(&b) = self.bytes.get(end) {
            if stops[usize::from(b)] {
                break;
            }
            end += 1;
        }
        // The stops are ASCII: `end` is a char boundary.
        out.push_str(self.text.get(self.at..end).ok_or(Bail)?);
        self.advance_to(end);
        Ok(())
    }

    /// Reads one token onto the end of `out` (where it starts at `out.len()` on entry), as
    /// brush's `next_token_until(terminator, keep_blanks)` does: the top level reads with no
    /// terminator and drops leading blanks; a `$( … )` reads its tokens up to `)` keeping a
    /// leading blank, a `${ … }` up to `}`.
    fn token(
        &mut self,
        out: &mut String,
        terminator: Option<u8>,
        keep_blanks: bool,
    ) -> Result<Piece, Bail> {
        let from = out.len();
        let mut start = self.cursor;
        let mut operator = false;
        let mut escaped = false;
        let mut quote = Quote::None;
        loop {
            let started = out.len() > from;
            let Some(c) = self.peek() else {
                if escaped || quote != Quote::None {
                    // brush: an unterminated escape or quote.
                    return Err(Bail);
                }
                return self.piece(out, from, Reason::EndOfInput, operator, start);
            };
            let unquoted = !escaped && quote == Quote::None;
            if unquoted && terminator == Some(c) {
                return self.piece(out, from, Reason::Terminator, operator, start);
            }
            if operator {
                let so_far = out.get(from..).unwrap_or_default();
                if continues_operator(so_far, c) {
                    self.take(out)?;
                    continue;
                }
                if so_far == "(" && c == b'(' {
                    // brush reads `((` as arithmetic from here on.
                    return Err(Bail);
                }
                let reason = if so_far == "\n" {
                    Reason::Newline
                } else {
                    Reason::OperatorEnd
                };
                return self.piece(out, from, reason, operator, start);
            }
            if escaped {
                escaped = false;
                self.take(out)?;
                continue;
            }
            if quote != Quote::None {
                self.quoted(out, c, &mut quote, &mut escaped)?;
                continue;
            }
            match c {
                b'\\' => self.backslash(out, &mut escaped),
                b'\'' => {
                    quote = if out.get(from..).unwrap_or_default().ends_with('$') {
                        Quote::AnsiC
                    } else {
                        Quote::Single
                    };
                    self.take(out)?;
                }
                b'"' => {
                    quote = Quote::Double;
                    self.take(out)?;
                }
                b'$' => self.dollar(out)?,
                b'`' => return Err(Bail),
                b'(' if out
                    .get(from..)
                    .unwrap_or_default()
                    .ends_with(['@', '!', '?', '+', '*']) =>
                {
                    // An extended glob.
                    return Err(Bail);
                }
                b'&' | b'(' | b')' | b';' | b'\n' | b'|' | b'<' | b'>' => {
                    if started {
                        return self.piece(out, from, Reason::OperatorStart, operator, start);
                    }
                    operator = true;
                    self.take(out)?;
                }
                b' ' | b'\t' => {
                    if started {
                        let piece = self.piece(out, from, Reason::Blank, operator, start);
                        self.skip();
                        return piece;
                    }
                    if keep_blanks {
                        self.take(out)?;
                    } else {
                        self.skip();
                        start.index += 1;
                        start.column += 1;
                        start.byte += 1;
                    }
                }
                b'#' if !started && terminator != Some(b'}') => {
                    // A comment, up to the newline; the token's start stays where it was.
                    let rest = self.bytes.get(self.at..).unwrap_or_default();
                    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                    self.advance_to(self.at + end);
                }
                // Once started, a word goes on up to a quote, an expansion, an operator, a
                // blank or the terminator (`)` always stops a run, `}` in a `${ … }`).
                _ if terminator == Some(b'}') => self.take_run(out, &UNQUOTED_IN_BRACES)?,
                _ => self.take_run(out, &UNQUOTED)?,
            }
        }
    }

    /// The next char `c` of a token in quotes (`quote` is not `None`), unescaped.
    fn quoted(
        &mut self,
        out: &mut String,
        c: u8,
        quote: &mut Quote,
        escaped: &mut bool,
    ) -> Result<(), Bail> {
        match (*quote, c) {
            (Quote::Single | Quote::AnsiC, b'\'') | (Quote::Double, b'"') => {
                *quote = Quote::None;
                self.take(out)
            }
            (Quote::AnsiC | Quote::Double, b'\\') => {
                self.backslash(out, escaped);
                Ok(())
            }
            (Quote::Double, b'$') => self.dollar(out),
            (Quote::Double, b'`') => Err(Bail),
            (Quote::Single, _) => self.take_run(out, &SINGLE),
            (Quote::AnsiC, _) => self.take_run(out, &ANSI_C),
            (Quote::Double, _) => self.take_run(out, &DOUBLE),
            (Quote::None, _) => self.take(out),
        }
    }

    /// Ends the token that started at `from` in `out`.
    fn piece(
        &self,
        out: &str,
        from: usize,
        reason: Reason,
        operator: bool,
        start: Position,
    ) -> Result<Piece, Bail> {
        let text = out.get(from..).unwrap_or_default();
        if operator && (text == "<<" || text == "<<-") {
            // A here-document.
            return Err(Bail);
        }
        Ok(Piece {
            reason,
            started: !text.is_empty(),
            operator,
            start,
            end: self.cursor,
        })
    }

    /// A backslash outside single quotes: with a newline after it, both vanish (a line
    /// continuation); otherwise it stays and escapes the next char.
    fn backslash(&mut self, out: &mut String, escaped: &mut bool) {
        self.skip();
        if self.peek() == Some(b'\n') {
            self.skip();
        } else {
            *escaped = true;
            out.push('\\');
        }
    }

    /// A `$` unquoted or in double quotes: `$( … )` and `${ … }` are read whole into the
    /// token; any other `$` is a char of it.
    fn dollar(&mut self, out: &mut String) -> Result<(), Bail> {
        self.skip();
        match self.peek() {
            Some(b'(') => {
                out.push('$');
                self.take(out)?;
                if self.peek() == Some(b'(') {
                    // `$((`: arithmetic.
                    return Err(Bail);
                }
                self.enter()?;
                self.substitution(out)?;
                self.depth -= 1;
            }
            Some(b'[') => return Err(Bail),
            Some(b'{') => {
                out.push('$');
                self.take(out)?;
                self.enter()?;
                self.parameter(out)?;
                self.depth -= 1;
            }
            _ => out.push('$'),
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), Bail> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(Bail);
        }
        Ok(())
    }

    /// The rest of a `$( … )` after its `$(`: its tokens, each as read up to `)` keeping a
    /// leading blank, the blank that ends a token as one space, until the `)` that closes the
    /// operators `(` seen on the way.
    fn substitution(&mut self, out: &mut String) -> Result<(), Bail> {
        let mut open = 1_usize;
        loop {
            let from = out.len();
            let piece = self.token(out, Some(b')'), true)?;
            if piece.started {
                let text = out.get(from..).unwrap_or_default();
                if piece.operator {
                    if text == "(" {
                        open += 1;
                    }
                } else if matches!(text.trim_start_matches([' ', '\t']), "case" | "esac") {
                    // Its patterns' `)` close the substitution for brush, not for bash.
                    return Err(Bail);
                }
            }
            match piece.reason {
                Reason::Blank => out.push(' '),
                Reason::Terminator => {
                    open -= 1;
                    if open == 0 {
                        break;
                    }
                    self.take(out)?;
                }
                // brush: an unterminated expansion.
                Reason::EndOfInput => return Err(Bail),
                Reason::Newline | Reason::OperatorStart | Reason::OperatorEnd => {}
            }
        }
        self.take(out)
    }

    /// The rest of a `${ … }` after its `${`: its tokens, each as read up to `}` dropping
    /// leading blanks, the blank that ends a token as one space, until the first `}`.
    fn parameter(&mut self, out: &mut String) -> Result<(), Bail> {
        loop {
            let piece = self.token(out, Some(b'}'), false)?;
            match piece.reason {
                Reason::Blank => out.push(' '),
                Reason::Terminator => return self.take(out),
                // brush: an unterminated variable.
                Reason::EndOfInput => return Err(Bail),
                Reason::Newline | Reason::OperatorStart | Reason::OperatorEnd => {}
            }
        }
    }
}

/// Whether `operator + c` is still an operator of bash (brush's table, not in sh mode).
fn continues_operator(operator: &str, c: u8) -> bool {
    let next: &[u8] = match operator {
        "&" => b"&>",
        "&>" => b">",
        ";" => b";&",
        ";;" => b"&",
        "|" => b"|&",
        "<" => b"<&>",
        "<<" => b"-<",
        ">" => b"|>&",
        _ => b"",
    };
    next.contains(&c)
}

#[cfg(test)]
mod tests {
    //! Differential tests: on every input, [`tokenize`] gives brush's tokens (text, kind and
    //! positions) or `None`, and `None` whenever brush fails.

    use std::borrow::Cow;
    use std::cell::Cell;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    use super::{lex, tokenize};

    /// Brush's answer: its tokens as `{:?}` text, `None` for an error, `Err` for a panic.
    fn brush(text: &str) -> Result<Option<String>, ()> {
        let options = crate::words::options().tokenizer_options();
        catch_unwind(AssertUnwindSafe(|| {
            brush_parser::uncached_tokenize_str(text, &options)
                .ok()
                .map(|tokens| format!("{tokens:?}"))
        }))
        .map_err(|_| ())
    }

    /// The walker's parse of `text` (through [`tokenize`] when it reads it), as text.
    fn parse(text: &str) -> String {
        let options = crate::words::options();
        let tokens = tokenize(text).unwrap();
        match brush_parser::parse_tokens(&tokens, &options) {
            Ok(program) => format!("{program:?}"),
            Err(error) => format!("error: {error}"),
        }
    }

    /// Brush's own parse of `text`, as text.
    fn parse_program(text: &str) -> String {
        let options = crate::words::options();
        match brush_parser::Parser::new(std::io::BufReader::new(text.as_bytes()), &options)
            .parse_program()
        {
            Ok(program) => format!("{program:?}"),
            Err(error) => format!("error: {error}"),
        }
    }

    /// Whether `tokenize(text)` agrees with brush, and whether it took the fast path. When
    /// `tokenize` bails there is nothing to compare (and brush is not run: it loops forever
    /// on some here-documents).
    fn check(text: &str) -> Result<bool, String> {
        let Some(ours) = tokenize(text).map(|tokens| format!("{tokens:?}")) else {
            return Ok(false);
        };
        match brush(text) {
            Ok(Some(theirs)) if theirs == ours => {
                let parsed = parse(text);
                if parsed == parse_program(text) {
                    Ok(true)
                } else {
                    Err(format!("{text:?}: same tokens, different parse"))
                }
            }
            Ok(Some(theirs)) => Err(format!(
                "{text:?}: different tokens\n brush: {theirs}\n ours:  {ours}"
            )),
            Ok(None) => Err(format!("{text:?}: brush fails, ours gives {ours}")),
            Err(()) => Err(format!("{text:?}: brush panics, ours gives {ours}")),
        }
    }

    /// Runs `check` on `cases` inputs of `strategy`; returns how many took the fast path.
    fn differential(strategy: impl Strategy<Value = String>, cases: u32) -> u32 {
        let fast = Cell::new(0_u32);
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&strategy, |text| {
            if check(&text).map_err(TestCaseError::fail)? {
                fast.set(fast.get() + 1);
            }
            Ok(())
        });
        if let Err(error) = result {
            panic!("{error}");
        }
        fast.get()
    }

    /// Fragments of shell text, the ordinary ones more often.
    fn fragment() -> impl Strategy<Value = &'static str> {
        let words = prop::sample::select(vec![
            "git", "status", "cargo", "test", "-p", "--flag", "x=1", "a", "b", "/tmp/x", "./src",
            "HOME", "1", "2", "x", "-", ":", ".", "/", "=", ",", "%", "^",
        ]);
        let blanks = prop::sample::select(vec![" ", " ", "  ", "\t", " \t "]);
        let operators = prop::sample::select(vec![
            "&&", "||", ";", ";;", ";&", ";;&", "|", "|&", "&", ">", ">>", "<", "<<<", "2>&1",
            ">&2", "&>", "&>>", ">|", "<>", "<&", ">&", "\n", "(", ")",
        ]);
        let special = prop::sample::select(vec![
            "'",
            "\"",
            "\\",
            "$",
            "$(",
            "${",
            "}",
            "{",
            "$'",
            "\\\n",
            "\\\"",
            "\\'",
            "\\$",
            "#",
            "$HOME",
            "${x}",
            "${x:-a b}",
            "$(echo hi)",
            "\"$(",
            "$#",
            "$?",
            "~",
            "*",
            "?",
            "!",
            "@",
            "+",
            "[",
            "]",
            "[[",
            "]]",
            "é",
            "—",
            "🦀",
        ]);
        let rare = prop::sample::select(vec![
            "<<", "<<-", "`", "$((", "$[", "((", "))", "*(", "?(", "@(", "+(", "!(", "case",
            "esac", "in", "\r", "\0", "\u{7f}", "\u{a0}",
        ]);
        prop_oneof![
            8 => words,
            5 => blanks,
            3 => operators,
            3 => special,
            1 => rare,
        ]
    }

    fn fragments() -> impl Strategy<Value = String> {
        prop::collection::vec(fragment(), 0..24).prop_map(|parts| parts.concat())
    }

    /// Well-formed commands with nested quotes and expansions, deep enough for brush's
    /// rebuilding of a `$( … )` (blanks, comments, nested parentheses) to matter.
    fn structured() -> impl Strategy<Value = String> {
        let leaf = prop::sample::select(vec![
            "git",
            "log",
            "-n",
            "5",
            "a=b",
            "x",
            "--",
            "'a b'",
            "'$(x)'",
            "\"a b\"",
            "\"\\\"q\\\"\"",
            "\\ ",
            "\\;",
            "$HOME",
            "${HOME}",
            "${x:-a  b}",
            "${x#*/}",
            "${#x}",
            "2>&1",
            ">",
            ">>out",
            "<in",
            "|",
            "&&",
            "||",
            ";",
            "&",
            "\n",
            "\t",
            " ",
            "  ",
            "# note\n",
            " #c\n",
            "\\\n",
            "{",
            "}",
            "(",
            ")",
            "é",
            "'a\nb é'",
            "\"a\n—b\"",
            "$'a\\n\\'b'",
            "\"x$HOME/y\"",
        ])
        .prop_map(str::to_owned);
        leaf.prop_recursive(4, 48, 6, |inner| {
            let seq = prop::collection::vec(inner, 0..6);
            prop_oneof![
                seq.clone().prop_map(|parts| parts.concat()),
                seq.clone()
                    .prop_map(|parts| format!("$({})", parts.join(" "))),
                seq.clone()
                    .prop_map(|parts| format!("$( {} )", parts.concat())),
                seq.clone()
                    .prop_map(|parts| format!("\"{}\"", parts.join(" ").replace('"', ""))),
                seq.clone()
                    .prop_map(|parts| format!("\"$({})\"", parts.join(" "))),
                seq.clone()
                    .prop_map(|parts| format!("( {} )", parts.join(" "))),
                seq.prop_map(|parts| format!("${{x:-{}}}", parts.join(" "))),
            ]
        })
    }

    #[test]
    fn random_fragments_give_brush_tokens_or_none() {
        let fast = differential(fragments(), 10_000);
        // Not a tokenizer that always bails.
        assert!(fast > 2_000, "{fast} of 10000 on the fast path");
    }

    #[test]
    fn nested_commands_give_brush_tokens_or_none() {
        let fast = differential(structured(), 10_000);
        assert!(fast > 2_000, "{fast} of 10000 on the fast path");
    }

    /// The 1 KB command of `benches/approval.rs` (`bash_rules`).
    fn bench_command() -> String {
        let part = "git status && cargo test -p flemma-shell -- --nocapture 2>&1 | grep -v 'warning: unused' | head -n 40; \
            echo \"built at $(date +%s)\" > /work/project/build.log; ";
        let command: String = part
            .repeat(1024 / part.len() + 1)
            .chars()
            .take(1024)
            .collect();
        let end = command.rfind("; ").unwrap();
        command[..=end].to_owned()
    }

    #[test]
    fn a_token_written_as_is_borrows_the_command() {
        let command = bench_command();
        let lexemes = lex(&command).unwrap();
        assert!(lexemes.len() > 100);
        for lexeme in &lexemes {
            assert!(
                matches!(lexeme.text, Cow::Borrowed(_)),
                "copied: {lexeme:?}"
            );
            assert_eq!(
                &command[lexeme.start.byte..lexeme.end.byte],
                lexeme.text.as_ref()
            );
        }
        // A rebuilt token (a line continuation removed) is copied, with brush's text.
        let lexemes = lex("git sta\\\ntus").unwrap();
        assert_eq!(lexemes[1].text, "status");
        assert!(matches!(lexemes[1].text, Cow::Owned(_)));
    }

    #[test]
    fn the_table_commands_give_brush_tokens_or_none() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/commands.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let cases = table["case"].as_array().unwrap();
        assert!(cases.len() >= 400, "{} cases", cases.len());
        let mut fast = 0;
        for case in cases {
            let command = case["command"].as_str().unwrap();
            if check(command).unwrap() {
                fast += 1;
            }
        }
        assert!(
            fast * 10 >= cases.len() * 7,
            "{fast} of {} on the fast path",
            cases.len()
        );
    }

    #[test]
    fn typical_commands_take_the_fast_path() {
        let commands = [
            bench_command(),
            "git status".to_owned(),
            "git diff HEAD~1 -- src/main.rs".to_owned(),
            "git log --oneline -n 20 | head -5".to_owned(),
            "git add -A && git commit -m \"Fix the parser: read $(x) as bash does\"".to_owned(),
            "git commit -m 'A message with `code` and an é — and more'".to_owned(),
            "cargo test -p flemma-shell -- --nocapture 2>&1 | tail -n 50".to_owned(),
            "cargo build --release && ./target/release/app --help".to_owned(),
            "cargo clippy --all-targets -- -D warnings".to_owned(),
            "grep -rn \"fn main\" src/ | grep -v test".to_owned(),
            "grep -E 'foo|bar' *.rs > /tmp/out.txt".to_owned(),
            "cd flemma-shell && make".to_owned(),
            "FOO=1 BAR=\"two words\" cmd --flag=value".to_owned(),
            "ls -la ~/.cargo/registry/src/*/brush-parser-0.4.0/src/".to_owned(),
            "echo \"built at $(date +%s)\" >> build.log".to_owned(),
            "find . -name '*.rs' -exec wc -l {} \\; | sort -n".to_owned(),
            "cat README.md | wc -l; echo done &".to_owned(),
            "npm run test 2>/dev/null || echo failed".to_owned(),
            "python3 -c 'print(1)' &> out.log".to_owned(),
            "sed -n 1,40p src/lib.rs".to_owned(),
            "mkdir -p build && (cd build && cmake ..)".to_owned(),
            "rg --type rust \"TODO\" | head -n 10 >| todo.txt".to_owned(),
            "export PATH=\"$HOME/.local/bin:${PATH}\"; which cargo".to_owned(),
            "cat <<< \"$(git rev-parse HEAD)\"".to_owned(),
            "diff <(sort a) <(sort b)".to_owned(),
            "for f in *.txt; do echo \"$f\"; done".to_owned(),
            "if [ -f Cargo.toml ]; then cargo check; fi".to_owned(),
            "[[ -n \"$CI\" ]] && echo ci".to_owned(),
            "make -j2 \\\n  all".to_owned(),
            "cargo test # run the tests\ncargo fmt --check".to_owned(),
            "echo \"$(git log -1 --format='%H %s' | cut -c1-40)\"".to_owned(),
            "ls $(dirname $(which cargo))".to_owned(),
        ];
        for command in &commands {
            assert_eq!(check(command), Ok(true), "{command:?}");
        }
    }

    #[test]
    fn what_brush_reads_specially_bails() {
        for text in [
            "cat <<EOF\nx\nEOF\n",
            "cat <<-EOF\n\tx\n\tEOF\n",
            "echo `date`",
            "echo \"`date`\"",
            "echo $((1 + 2))",
            "echo $[1 + 2]",
            "((x = 1))",
            "ls !(target)",
            "ls *(a|b)",
            "ls \\*(a)",
            "x=$(case a in a) echo;; esac)",
            "echo a\r",
            "echo \0",
            "echo 'unterminated",
            "echo \"unterminated",
            "echo $(unterminated",
            "echo ${unterminated",
            "echo \\",
        ] {
            assert_eq!(check(text), Ok(false), "{text:?}");
        }
    }

    #[test]
    fn brush_quirks_are_kept() {
        // A tab ending a word of a substitution becomes a space; the token after a comment
        // starts at the comment; a line continuation vanishes; `$'` starts an ANSI-C quote.
        for text in [
            "echo $(a\tb  c\t\td)",
            "echo $(a #c\n)",
            "echo $(a  #c)",
            "a #c\nb",
            "  # only a comment",
            "a \\\n  b",
            "\\\n#c\nx",
            "echo $'a\\'b' c",
            "echo \\$'a' b",
            "echo ${x:-a\t\tb} ${#x} ${x//[(]/)}",
            "echo $( (a) ) $( (a)) $(a ( b ) )",
            "echo \"$(echo \")\")\"",
            "x=$(echo $(echo ${y:-$(z)}))",
            "é=1 🦀 —",
        ] {
            assert_eq!(check(text), Ok(true), "{text:?}");
        }
    }
}
