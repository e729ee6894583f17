//! Reads a command with brush's bash parser into the simple commands it runs, seeing through
//! wrappers, and what the rules cannot see (escalations, writes, what does not parse).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Component, Path, PathBuf};

use brush_parser::ast;

use crate::flat;
use crate::tokens;
use crate::words::{self, Found, Word};

/// The longest command read; a longer one is not read (it needs approval).
pub(crate) const MAX_LEN: usize = 64 * 1024;
/// The most openings (`(`, `{`, backquotes, `!`, `$[`, `if`, `while`, `&&` in a test, …) a
/// command may hold: the parser recurses on nesting, and a bound on the openings bounds the
/// nesting (and the stack).
pub(crate) const MAX_OPENINGS: usize = 256;
/// How deep `bash -c`, `eval` and substitutions are read in turn.
const MAX_DEPTH: usize = 16;

/// One simple command the rules judge.
#[derive(Debug, Clone)]
pub(crate) struct Segment {
    /// Its words, the command word first (after the wrappers seen through).
    pub(crate) words: Vec<Word>,
    /// Unknown words follow (`xargs`, `find -exec`).
    pub(crate) open_ended: bool,
    /// The wrappers seen through to reach it, outermost first (`timeout`, `sudo`, …).
    pub(crate) via: Vec<String>,
    /// It runs only with arguments it reads: it needs an allow pattern ending in `*`, or
    /// approval.
    pub(crate) needs_open_rule: Option<&'static str>,
}

/// Something the rules cannot allow, so the command needs approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// What was found, e.g. `sudo` or `> /etc/passwd`.
    pub(crate) subject: String,
    /// Why it needs approval.
    pub(crate) reason: String,
}

/// What a command runs and what it does besides.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    pub(crate) segments: Vec<Segment>,
    pub(crate) findings: Vec<Finding>,
}

/// Where relative write targets are taken from, and whether a path may be written.
pub(crate) struct Place<'a> {
    pub(crate) cwd: Option<&'a Path>,
    pub(crate) writable: &'a (dyn Fn(&Path) -> bool + Send + Sync),
}

/// Commands with more openings than this are read on a thread of their own with a large stack
/// ([`BIG_STACK`]): the parser's recursion per level is deep (in a debug build, a few dozen
/// levels fill the 2 MiB stack of a Tokio worker). Fewer are read on the caller's thread.
const INLINE_OPENINGS: usize = 16;
/// The stack of that thread: room for [`MAX_OPENINGS`] levels in a debug build.
const BIG_STACK: usize = 256 * 1024 * 1024;

/// Reads `command`.
pub(crate) fn analyze(command: &str, place: &Place<'_>) -> Analysis {
    analyze_reading(command, place, Reading::Flat)
}

/// How commands are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// A flat command from its tokens ([`flat`]), anything else with brush's parser.
    Flat,
    /// Everything with brush's parser (the tests compare the two).
    #[cfg_attr(not(test), allow(dead_code, reason = "the tests' reference reading"))]
    Tree,
}

/// Reads `command` as [`analyze`] does, the flat commands as `reading` says.
pub(crate) fn analyze_reading(command: &str, place: &Place<'_>, reading: Reading) -> Analysis {
    if command.len() > MAX_LEN || openings(command) <= INLINE_OPENINGS {
        return analyze_here(command, place, reading);
    }
    // The stack is reserved, not touched: only what the parser uses becomes memory.
    let read = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("flemma-shell".to_owned())
            .stack_size(BIG_STACK)
            .spawn_scoped(scope, || analyze_here(command, place, reading))
            .map(std::thread::ScopedJoinHandle::join)
    });
    match read {
        Ok(Ok(analysis)) => analysis,
        Ok(Err(_)) | Err(_) => Analysis {
            segments: Vec::new(),
            findings: vec![Finding {
                subject: command.to_owned(),
                reason: "could not be read (no thread to read it on)".to_owned(),
            }],
        },
    }
}

fn analyze_here(command: &str, place: &Place<'_>, reading: Reading) -> Analysis {
    let mut walker = Walker {
        out: Analysis::default(),
        place,
        cwd_changed: false,
        sources: Vec::new(),
        reading,
    };
    walker.script(command, 0);
    walker.out
}

struct Walker<'a> {
    out: Analysis,
    place: &'a Place<'a>,
    /// A `cd` came before: relative targets are no longer known.
    cwd_changed: bool,
    /// The text of each script being walked, innermost last.
    sources: Vec<String>,
    reading: Reading,
}

/// Variables that choose what a command runs or loads: assigning one before a command makes it
/// another command.
fn changes_what_runs(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH",
        "BASH_ENV",
        "ENV",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
        "NODE_OPTIONS",
        "RUSTFLAGS",
        "HOME",
        "ZDOTDIR",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
    ];
    const PREFIXES: &[&str] = &[
        "LD_", "DYLD_", "GIT_", "PYTHON", "PERL5", "RUBY", "RUSTC", "CARGO",
    ];
    const SUFFIXES: &[&str] = &["_COMMAND", "PAGER", "EDITOR", "ASKPASS"];
    EXACT.contains(&name)
        || PREFIXES.iter().any(|p| name.starts_with(p))
        || SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// Counts what opens a nesting level, quoting ignored (an overcount only asks sooner): the
/// bytes `(`, `{`, backquote and `!`, `$[`, the keywords that open a body, as whole runs of
/// ASCII letters, and each `&&` and `||` after the first `[[`. brush-parser 0.4 recurses on
/// `$[` (its tokenizer) and on each `!` of a `[[ ! ! … ]]` test (its parser); it builds a
/// test's chain of `&&` and `||` as a tree as deep as the chain is long, which the walk and
/// the tree's drop recurse on. Line continuations, which brush removes, are removed first
/// (`[\<newline>[` is `[[`).
fn openings(command: &str) -> usize {
    fn keyword(word: &[u8]) -> bool {
        matches!(
            word,
            b"if"
                | b"while"
                | b"until"
                | b"for"
                | b"case"
                | b"select"
                | b"do"
                | b"then"
                | b"function"
                | b"coproc"
        )
    }
    let bytes = command.as_bytes();
    let mut count = 0;
    let mut start = 0;
    for (at, byte) in bytes.iter().enumerate() {
        if byte.is_ascii_alphabetic() {
            continue;
        }
        if start < at && keyword(&bytes[start..at]) {
            count += 1;
        }
        start = at + 1;
        let dollar_bracket = *byte == b'[' && at > 0 && bytes[at - 1] == b'$';
        if matches!(byte, b'(' | b'{' | b'`' | b'!') || dollar_bracket {
            count += 1;
        }
    }
    if start < bytes.len() && keyword(&bytes[start..]) {
        count += 1;
    }
    let joined;
    let text = if command.contains("\\\n") {
        joined = command.replace("\\\n", "");
        joined.as_str()
    } else {
        command
    };
    if let Some(test) = text.find("[[") {
        count += text[test..].matches("&&").count() + text[test..].matches("||").count();
    }
    count
}

/// Whether every `<<` or `<<-` in `text` (quoting ignored: an overcount only asks sooner) is
/// followed, after one blank at most, by a plain delimiter: letters, digits, `_`, `.` and `-`,
/// at least one, some of them quoted (in `'…'` or `"…"`, or after a backslash), then the end of
/// the word. brush-parser 0.4's tokenizer loops forever, its memory growing, when the text ends
/// (after a blank) while a here-document's delimiter is empty once unquoted: `cat <<'' `,
/// `$(cat <<  EOF ` (inside `$( … )` it reads a second blank as the end of an empty
/// delimiter), `<<$( & `. `<<<` is a here-string, not a here-document, unless a backslash
/// escapes its first `<` (`\<<<$( & ` is `\<` then `<<$( & `).
fn plain_here_documents(text: &str) -> bool {
    fn plain(byte: u8) -> bool {
        byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-')
    }
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(found) = text.get(at..).and_then(|rest| rest.find("<<")) {
        let mut i = at + found + 2;
        if bytes.get(i) == Some(&b'<') {
            let escaped = found + at > 0 && bytes[at + found - 1] == b'\\';
            // An escaped first `<` leaves `<<` at the next byte, which the search finds.
            at = if escaped { at + found + 1 } else { i + 1 };
            continue;
        }
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        // One blank at most: inside `$( … )` brush reads a second blank as the end of an
        // empty delimiter.
        if matches!(bytes.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        // Whether the delimiter has a plain byte: quotes alone leave it empty.
        let mut some = false;
        loop {
            match bytes.get(i) {
                Some(&b) if plain(b) => {
                    some = true;
                    i += 1;
                }
                Some(b'\\') if bytes.get(i + 1).copied().is_some_and(plain) => {
                    some = true;
                    i += 2;
                }
                Some(&q @ (b'\'' | b'"')) => {
                    let inner = bytes[i + 1..].iter().take_while(|b| plain(**b)).count();
                    if bytes.get(i + 1 + inner) != Some(&q) {
                        return false;
                    }
                    some |= inner > 0;
                    i += inner + 2;
                }
                _ => break,
            }
        }
        let ends = bytes.get(i).is_none_or(|b| {
            matches!(
                b,
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b')' | b'<' | b'>'
            )
        });
        if !some || !ends {
            return false;
        }
        at = i;
    }
    true
}

impl Walker<'_> {
    fn find(&mut self, subject: impl Into<String>, reason: impl Into<String>) {
        self.out.findings.push(Finding {
            subject: subject.into(),
            reason: reason.into(),
        });
    }

    /// Parses and walks a whole script (the command, a substitution, a `bash -c` string).
    fn script(&mut self, text: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.find(text, "nested too deeply to read");
            return;
        }
        if text.len() > MAX_LEN {
            self.find(
                format!("{} bytes", text.len()),
                format!("longer than {MAX_LEN} bytes: not read"),
            );
            return;
        }
        if openings(text) > MAX_OPENINGS {
            self.find(
                text,
                format!("more than {MAX_OPENINGS} nested constructs: not read"),
            );
            return;
        }
        // The fast tokenizer reads what agents usually send, and a flat command is walked
        // from its tokens; brush's tokenizer reads the rest, but not a here-document whose
        // delimiter is not a plain word: brush-parser 0.4's tokenizer loops forever on some
        // (`<<$( & ` at the end of the text).
        if let Some(lexemes) = tokens::lex(text) {
            if self.reading == Reading::Flat
                && let Some(commands) = flat::read(&lexemes)
            {
                for items in commands {
                    self.flat(items, depth);
                }
                return;
            }
            let tokens = tokens::to_brush(&lexemes);
            return self.parse_and_walk(text, Some(&tokens), depth);
        }
        if !plain_here_documents(text) {
            return self.find(
                text,
                "a here-document whose delimiter is not a plain word: not read",
            );
        }
        let options = words::options();
        let tokens = catch_unwind(AssertUnwindSafe(|| {
            brush_parser::uncached_tokenize_str(text, &options.tokenizer_options())
        }));
        match tokens {
            Ok(Ok(tokens)) => self.parse_and_walk(text, Some(&tokens), depth),
            // The parser's own reading gives the error with its position.
            Ok(Err(_)) => self.parse_and_walk(text, None, depth),
            Err(_) => self.find(text, "the parser failed on it"),
        }
    }

    /// Parses `text` (from its `tokens` when they are read) with brush's grammar and walks
    /// the syntax tree.
    fn parse_and_walk(&mut self, text: &str, tokens: Option<&[brush_parser::Token]>, depth: usize) {
        let parsed = catch_unwind(AssertUnwindSafe(|| {
            let options = words::options();
            match tokens {
                Some(tokens) => brush_parser::parse_tokens(tokens, &options),
                None => {
                    brush_parser::Parser::new(std::io::BufReader::new(text.as_bytes()), &options)
                        .parse_program()
                }
            }
        }));
        match parsed {
            Ok(Ok(program)) => {
                self.sources.push(text.to_owned());
                for list in &program.complete_commands {
                    self.list(list, depth);
                }
                self.sources.pop();
            }
            Ok(Err(error)) => self.find(
                text,
                format!("bash syntax the parser cannot read ({error})"),
            ),
            Err(_) => self.find(text, "the parser failed on it"),
        }
    }

    /// A simple command of a flat command: its words and redirections in the order written.
    fn flat(&mut self, items: Vec<flat::Item<'_>>, depth: usize) {
        let mut words = Vec::with_capacity(items.len());
        for item in items {
            match item {
                flat::Item::Word(raw) => words.push(self.word(raw, depth)),
                flat::Item::Redirect(redirect) => self.redirect(&redirect, depth),
            }
        }
        if !words.is_empty() {
            self.run(words, Vec::new(), depth);
        }
    }

    fn list(&mut self, list: &ast::CompoundList, depth: usize) {
        for item in &list.0 {
            self.pipeline(&item.0.first, depth);
            for next in &item.0.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, depth),
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, depth: usize) {
        for command in &pipeline.seq {
            self.command(command, depth);
        }
    }

    fn command(&mut self, command: &ast::Command, depth: usize) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, depth),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound, depth);
                self.redirects(redirects.as_ref(), depth);
            }
            ast::Command::Function(function) => {
                self.compound(&function.body.0, depth);
                self.redirects(function.body.1.as_ref(), depth);
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test(&test.expr, depth);
                self.redirects(redirects.as_ref(), depth);
            }
        }
    }

    fn test(&mut self, expr: &ast::ExtendedTestExpr, depth: usize) {
        match expr {
            ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
                self.test(a, depth);
                self.test(b, depth);
            }
            ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
                self.test(a, depth);
            }
            ast::ExtendedTestExpr::UnaryTest(_, word) => {
                self.word(&word.value, depth);
            }
            ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(&a.value, depth);
                self.word(&b.value, depth);
            }
        }
    }

    /// An arithmetic text: it runs nothing unless it holds a substitution.
    fn arithmetic(&mut self, expr: &ast::UnexpandedArithmeticExpr) {
        if expr.value.contains("$(") || expr.value.contains('`') {
            self.find(
                format!("(( {} ))", expr.value),
                "a command substitution inside arithmetic",
            );
        }
    }

    /// brush-parser reads `( ( cmd ) )` as the arithmetic command `(( cmd ))` where bash runs
    /// two subshells: an arithmetic command whose text does not open with `((` and close with
    /// `))` is read by bash as something else, so it needs approval.
    fn double_parentheses(&mut self, loc: &brush_parser::SourceSpan) {
        let written = self.sources.last().and_then(|source| {
            let byte = |index: usize| {
                source
                    .char_indices()
                    .nth(index)
                    .map_or(source.len(), |(at, _)| at)
            };
            source.get(byte(loc.start.index)..byte(loc.end.index))
        });
        let arithmetic = written.is_some_and(|w| w.starts_with("((") && w.ends_with("))"));
        if !arithmetic {
            self.find(
                written.unwrap_or("(( … ))").to_owned(),
                "parentheses the parser reads as arithmetic and bash may not",
            );
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, depth: usize) {
        use ast::CompoundCommand as C;
        match compound {
            C::Arithmetic(a) => {
                self.arithmetic(&a.expr);
                self.double_parentheses(&a.loc);
            }
            C::ArithmeticForClause(f) => {
                for expr in [&f.initializer, &f.condition, &f.updater]
                    .into_iter()
                    .flatten()
                {
                    self.arithmetic(expr);
                }
                self.list(&f.body.list, depth);
            }
            C::BraceGroup(g) => self.list(&g.list, depth),
            C::Subshell(s) => self.list(&s.list, depth),
            C::ForClause(f) => {
                for value in f.values.iter().flatten() {
                    self.word(&value.value, depth);
                }
                self.list(&f.body.list, depth);
            }
            C::CaseClause(c) => {
                self.word(&c.value.value, depth);
                for item in &c.cases {
                    for pattern in &item.patterns {
                        self.word(&pattern.value, depth);
                    }
                    if let Some(cmd) = &item.cmd {
                        self.list(cmd, depth);
                    }
                }
            }
            C::IfClause(i) => {
                self.list(&i.condition, depth);
                self.list(&i.then, depth);
                for branch in i.elses.iter().flatten() {
                    if let Some(condition) = &branch.condition {
                        self.list(condition, depth);
                    }
                    self.list(&branch.body, depth);
                }
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.list(&w.0, depth);
                self.list(&w.1.list, depth);
            }
            C::Coprocess(c) => self.command(&c.body, depth),
        }
    }

    /// Decodes a word, reading its substitutions in turn.
    fn word(&mut self, raw: &str, depth: usize) -> Word {
        let mut found = Found::default();
        let word = words::decode(raw, &mut found);
        self.found(found, raw, depth);
        word
    }

    fn found(&mut self, found: Found, raw: &str, depth: usize) {
        if let Some(hidden) = found.hidden {
            self.find(raw, hidden);
        }
        for substitution in found.substitutions {
            self.script(&substitution, depth + 1);
        }
    }

    fn redirects(&mut self, redirects: Option<&ast::RedirectList>, depth: usize) {
        for redirect in redirects.iter().flat_map(|r| r.0.iter()) {
            self.redirect(redirect, depth);
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect, depth: usize) {
        use ast::IoFileRedirectKind as K;
        use ast::IoFileRedirectTarget as T;
        match redirect {
            ast::IoRedirect::File(_, kind, target) => match target {
                T::Filename(word) => {
                    let writes = matches!(
                        kind,
                        K::Write | K::Append | K::Clobber | K::ReadAndWrite | K::DuplicateOutput
                    );
                    let decoded = self.word(&word.value, depth);
                    if writes {
                        self.target(&decoded);
                    }
                }
                T::Duplicate(word) => {
                    let decoded = self.word(&word.value, depth);
                    // `>&2`, `>&-` duplicate or close a descriptor; `>&file` writes the file.
                    let descriptor = decoded.literal().is_some_and(|t| {
                        t == "-" || t.trim_end_matches('-').parse::<u32>().is_ok()
                    });
                    if matches!(kind, K::DuplicateOutput) && !descriptor {
                        self.target(&decoded);
                    }
                }
                T::Fd(_) => {}
                T::ProcessSubstitution(_, sub) => self.list(&sub.list, depth),
            },
            ast::IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion {
                    let mut found = Found::default();
                    words::heredoc(&doc.doc.value, &mut found);
                    self.found(found, "<<", depth);
                }
            }
            ast::IoRedirect::HereString(_, word) => {
                self.word(&word.value, depth);
            }
            ast::IoRedirect::OutputAndError(word, _) => {
                let decoded = self.word(&word.value, depth);
                self.target(&decoded);
            }
        }
    }

    /// A path the command writes.
    fn target(&mut self, word: &Word) {
        let Some(path) = word.literal() else {
            self.find(
                format!("> {}", word.raw),
                "writes to a path that is not literal",
            );
            return;
        };
        if let Some(reason) = self.unwritable(path) {
            self.find(format!("> {}", word.raw), reason);
        }
    }

    /// Why `path` may not be written, if it may not.
    fn unwritable(&self, path: &str) -> Option<String> {
        const DEVICES: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];
        if DEVICES.contains(&path)
            || path
                .strip_prefix("/dev/fd/")
                .is_some_and(|n| n.parse::<u32>().is_ok())
        {
            return None;
        }
        let given = Path::new(path);
        let absolute = if given.is_absolute() {
            given.to_path_buf()
        } else {
            if self.cwd_changed {
                return Some("writes to a relative path after a change of directory".to_owned());
            }
            match self.place.cwd {
                Some(cwd) => cwd.join(given),
                None => {
                    return Some(
                        "writes to a relative path and the working directory is not known"
                            .to_owned(),
                    );
                }
            }
        };
        let normal = normalize(&absolute);
        if (self.place.writable)(&normal) {
            None
        } else {
            Some(format!(
                "writes outside the writable paths ({})",
                normal.display()
            ))
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, depth: usize) {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut words = Vec::new();
        let mut assignments = Vec::new();
        for item in simple.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, depth),
                Item::Word(w) => words.push(self.word(&w.value, depth)),
                Item::AssignmentWord(assignment, _) => {
                    self.assignment(assignment, depth);
                    assignments.push(assignment_name(assignment));
                }
                Item::ProcessSubstitution(_, sub) => self.list(&sub.list, depth),
            }
        }
        if let Some(name) = &simple.word_or_name {
            words.push(self.word(&name.value, depth));
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, depth),
                Item::Word(w) => words.push(self.word(&w.value, depth)),
                // `export X=…`, `local X=…`: an argument like any other.
                Item::AssignmentWord(assignment, w) => {
                    self.assignment(assignment, depth);
                    let mut found = Found::default();
                    words.push(words::decode(&w.value, &mut found));
                }
                Item::ProcessSubstitution(_, sub) => self.list(&sub.list, depth),
            }
        }
        if words.is_empty() {
            // Assignments alone run nothing.
            return;
        }
        for name in &assignments {
            if changes_what_runs(name) {
                self.find(
                    format!("{name}=…"),
                    "assigns a variable that changes what the command runs",
                );
            }
        }
        let mut via = Vec::new();
        if !assignments.is_empty() {
            via.push("NAME=value".to_owned());
        }
        self.run(words, via, depth);
    }

    /// Reads an assignment's value for substitutions.
    fn assignment(&mut self, assignment: &ast::Assignment, depth: usize) {
        match &assignment.value {
            ast::AssignmentValue::Scalar(w) => {
                self.word(&w.value, depth);
            }
            ast::AssignmentValue::Array(items) => {
                for (key, value) in items {
                    if let Some(key) = key {
                        self.word(&key.value, depth);
                    }
                    self.word(&value.value, depth);
                }
            }
        }
    }

    /// A command's words: wrappers seen through, escalations found, the segment recorded.
    fn run(&mut self, mut words: Vec<Word>, mut via: Vec<String>, depth: usize) {
        for _ in 0..MAX_DEPTH {
            match self.step(words, &mut via, depth) {
                Step::Inner(inner) => words = inner,
                Step::Segment(segment) => {
                    if !segment.is_empty() {
                        self.out.segments.push(Segment {
                            words: segment,
                            open_ended: false,
                            via,
                            needs_open_rule: None,
                        });
                    }
                    return;
                }
                Step::Done => return,
            }
        }
        self.find(via.join(" "), "wrappers nested too deeply to read");
    }

    /// One wrapper seen through, or the command itself.
    fn step(&mut self, words: Vec<Word>, via: &mut Vec<String>, depth: usize) -> Step {
        let Some(first) = words.first() else {
            return Step::Done;
        };
        let Some(name) = first.literal() else {
            self.find(first.raw.clone(), "the command's name is an expansion");
            return Step::Done;
        };
        // A path to a wrapper is that wrapper (`/usr/bin/sudo`). The name is copied only by
        // the arms that keep it: most commands are none of these.
        let base = name.rsplit('/').next().unwrap_or(name);
        match base {
            "sudo" | "doas" | "pkexec" | "run0" | "su" | "eval" | "exec" => {
                let (base, name) = (base.to_owned(), name.to_owned());
                self.escalation(&base, name, words, via, depth)
            }
            "command" => {
                let query = words
                    .get(1)
                    .and_then(|w| w.literal())
                    .is_some_and(|a| a.starts_with("-v") || a.starts_with("-V"));
                if query {
                    return Step::Segment(words);
                }
                let name = name.to_owned();
                self.wrapper(&COMMAND, name, &words, via, depth)
            }
            "time" => {
                let name = name.to_owned();
                self.time(&words);
                self.wrapper(&TIME, name, &words, via, depth)
            }
            "env" => match self.env(&words[1..]) {
                Some(rest) if !rest.is_empty() => {
                    via.push(name.to_owned());
                    Step::Inner(rest)
                }
                // `env` alone prints the environment: a command of its own.
                Some(_) => Step::Segment(words),
                None => Step::Done,
            },
            "xargs" => {
                let name = name.to_owned();
                let Some(rest) = self.options(&name, &words[1..], &XARGS) else {
                    return Step::Done;
                };
                via.push(name);
                let inner = if rest.is_empty() {
                    vec![Word::plain("echo")]
                } else {
                    rest
                };
                self.open_ended(inner, via.clone(), "runs it with arguments it reads");
                Step::Done
            }
            "find" => {
                self.find_command(&words, via);
                Step::Segment(words)
            }
            "bash" | "sh" | "dash" | "zsh" | "ksh" | "mksh" | "ash" => {
                match shell_string(&words[1..]) {
                    ShellString::None => Step::Segment(words),
                    ShellString::Literal(text) => {
                        self.script(&text, depth + 1);
                        Step::Done
                    }
                    ShellString::Unknown(raw) => {
                        self.find(
                            format!("{name} -c {raw}"),
                            "runs a string that is an expansion",
                        );
                        Step::Done
                    }
                }
            }
            // `watch CMD ARGS…` runs its arguments, joined by spaces, with sh.
            "watch" => {
                let name = name.to_owned();
                let Some(rest) = self.options(&name, &words[1..], &WATCH) else {
                    return Step::Done;
                };
                let text: Option<Vec<&str>> = rest.iter().map(|w| w.literal()).collect();
                match text {
                    Some(text) if !text.is_empty() => self.script(&text.join(" "), depth + 1),
                    Some(_) => return Step::Segment(words),
                    None => self.find(
                        format!("watch {}", display_raw(&rest)),
                        "runs a string that is an expansion",
                    ),
                }
                Step::Done
            }
            other => match WRAPPERS.iter().find(|w| w.name == other) {
                Some(wrapper) => self.wrapper(wrapper, name.to_owned(), &words, via, depth),
                None => self.plain(words, depth),
            },
        }
    }

    /// A command that is no wrapper: `cd` forgets the directory, `tee` writes its files, and the
    /// strings `alias` and `trap` keep to run later are read as commands too (so a deny rule
    /// sees them; the command itself still needs its own rule).
    fn plain(&mut self, words: Vec<Word>, depth: usize) -> Step {
        let base = words
            .first()
            .and_then(|w| w.literal())
            .map(|name| name.rsplit('/').next().unwrap_or(name));
        match base {
            Some("cd" | "pushd" | "popd") => self.cwd_changed = true,
            Some("tee") => self.tee(&words),
            Some("alias") => {
                for value in words[1..]
                    .iter()
                    .filter_map(|w| w.literal()?.split_once('=').map(|(_, v)| v))
                {
                    self.script(value, depth + 1);
                }
            }
            Some("trap") => {
                let action = words[1..]
                    .iter()
                    .find(|w| !w.literal().is_some_and(|t| t.starts_with('-') || t == "--"));
                match action.map(|w| w.literal()) {
                    Some(Some(text)) => self.script(text, depth + 1),
                    Some(None) => {
                        let raw = action.map_or("", |w| w.raw.as_str());
                        self.find(format!("trap {raw}"), "runs a string that is an expansion");
                    }
                    None => {}
                }
            }
            _ => {}
        }
        Step::Segment(words)
    }

    /// A wrapper that runs the command after its options and positionals, unchanged; an
    /// option it does not know (which may take a value) stops the reading: it needs approval.
    fn wrapper(
        &mut self,
        wrapper: &Wrapper,
        name: String,
        words: &[Word],
        via: &mut Vec<String>,
        depth: usize,
    ) -> Step {
        let Some(mut rest) = self.options(&name, &words[1..], wrapper) else {
            return Step::Done;
        };
        if rest.len() < wrapper.positionals {
            return Step::Segment(words.to_vec());
        }
        rest.drain(..wrapper.positionals);
        // `flock FILE -c STRING` runs the string with sh.
        if wrapper.name == "flock"
            && let Some(flag) = rest.first().and_then(|w| w.literal())
            && (flag == "-c" || flag == "--command")
        {
            return self.shell_text(&name, rest.get(1), depth);
        }
        via.push(name);
        Step::Inner(rest)
    }

    /// A wrapper that runs its command with other rights, or text, or a variable.
    fn escalation(
        &mut self,
        base: &str,
        name: String,
        words: Vec<Word>,
        via: &mut Vec<String>,
        depth: usize,
    ) -> Step {
        match base {
            "sudo" | "doas" | "pkexec" | "run0" => {
                self.find(name.clone(), "runs a command as another user");
                via.push(name);
                Step::Inner(skip_options(&words[1..], SUDO_VALUES))
            }
            "su" => {
                self.find(name, "runs a command as another user");
                Step::Done
            }
            "eval" => {
                self.find(name, "runs text as a command");
                let text: Option<Vec<&str>> = words[1..].iter().map(|w| w.literal()).collect();
                // Read what it would run too, so a deny rule still sees it.
                if let Some(text) = text {
                    self.script(&text.join(" "), depth + 1);
                }
                Step::Done
            }
            "exec" => {
                let Some(rest) = self.options(&name, &words[1..], &EXEC) else {
                    return Step::Done;
                };
                if let Some(command) = rest.first().filter(|w| w.literal().is_none()) {
                    self.find(
                        format!("exec {}", command.raw),
                        "runs a command named by an expansion",
                    );
                    return Step::Done;
                }
                via.push(name);
                Step::Inner(rest)
            }
            _ => Step::Segment(words),
        }
    }

    /// The words after a wrapper's options; `None` (found: it needs approval) at an option
    /// the wrapper's list does not know.
    fn options(&mut self, name: &str, words: &[Word], wrapper: &Wrapper) -> Option<Vec<Word>> {
        match strict_options(words, wrapper) {
            Ok(rest) => Some(rest),
            Err(option) => {
                self.find(format!("{name} {option}"), UNKNOWN_OPTION);
                None
            }
        }
    }

    /// A string a wrapper hands to a shell (`flock FILE -c STRING`): read in turn when it is
    /// literal.
    fn shell_text(&mut self, name: &str, text: Option<&Word>, depth: usize) -> Step {
        match text.map(|word| (word, word.literal())) {
            Some((_, Some(text))) => {
                self.script(text, depth + 1);
            }
            Some((word, None)) => self.find(
                format!("{name} -c {}", word.raw),
                "runs a string that is an expansion",
            ),
            None => {}
        }
        Step::Done
    }

    /// `tee`'s files: every argument but an option.
    fn tee(&mut self, words: &[Word]) {
        for target in words[1..].iter().filter(|w| {
            !w.literal()
                .is_some_and(|l| l.starts_with('-') && l.len() > 1)
        }) {
            self.target(target);
        }
    }

    /// `time -o FILE` writes the timings to FILE.
    fn time(&mut self, words: &[Word]) {
        for pair in words[1..].windows(2) {
            if matches!(pair[0].literal(), Some("-o" | "--output")) {
                self.target(&pair[1]);
            }
        }
    }

    /// `env`'s options and assignments; the command after them (`None` when the rules cannot
    /// follow it).
    fn env(&mut self, args: &[Word]) -> Option<Vec<Word>> {
        let mut i = 0;
        while let Some(word) = args.get(i) {
            let Some(text) = word.literal() else {
                self.find(
                    format!("env {}", word.raw),
                    "an expansion among env's arguments",
                );
                return None;
            };
            if text == "--" {
                i += 1;
                break;
            }
            if text == "-S"
                || text.starts_with("--split-string")
                || (text.starts_with('-') && !text.starts_with("--") && text.contains('S'))
            {
                self.find(format!("env {text}"), "splits a string into a command");
                return None;
            }
            if text == "-C" || text.starts_with("--chdir") {
                self.cwd_changed = true;
                i += if text == "-C" { 2 } else { 1 };
                continue;
            }
            if text == "-u" || text == "--unset" {
                i += 2;
                continue;
            }
            let signal = ENV_SIGNALS
                .iter()
                .any(|o| text == *o || text.strip_prefix(o).is_some_and(|r| r.starts_with('=')));
            if ENV_FLAGS.contains(&text)
                || signal
                || text.starts_with("--unset=")
                || (text.starts_with("-u") && !text.starts_with("--"))
            {
                i += 1;
                continue;
            }
            if text.starts_with('-') {
                self.find(format!("env {text}"), UNKNOWN_OPTION);
                return None;
            }
            if let Some((name, _)) = text.split_once('=') {
                if changes_what_runs(name) {
                    self.find(
                        format!("env {name}=…"),
                        "assigns a variable that changes what the command runs",
                    );
                }
                i += 1;
                continue;
            }
            break;
        }
        Some(args.get(i..).unwrap_or_default().to_vec())
    }

    /// A command run with unknown arguments appended (`xargs`, `find -exec`).
    fn open_ended(&mut self, words: Vec<Word>, via: Vec<String>, reason: &'static str) {
        if words.first().is_some_and(|w| w.literal().is_none()) {
            self.find(words[0].raw.clone(), "the command's name is an expansion");
            return;
        }
        self.out.segments.push(Segment {
            words,
            open_ended: true,
            via,
            needs_open_rule: Some(reason),
        });
    }

    /// `find`: itself, the commands its `-exec`s run, and its actions that write.
    fn find_command(&mut self, words: &[Word], via: &[String]) {
        let mut i = 1;
        while i < words.len() {
            let text = words[i].literal().unwrap_or_default();
            match text {
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let start = i + 1;
                    let mut end = start;
                    while end < words.len() && !matches!(words[end].literal(), Some(";" | "+")) {
                        end += 1;
                    }
                    let inner: Vec<Word> = words[start..end]
                        .iter()
                        .map(|w| {
                            if w.literal() == Some("{}") {
                                Word::unknown("{}")
                            } else {
                                w.clone()
                            }
                        })
                        .collect();
                    if !inner.is_empty() {
                        let mut via = via.to_vec();
                        via.push(format!("find {text}"));
                        self.open_ended(inner, via, "runs it on the files it finds");
                    }
                    i = end + 1;
                }
                "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                    self.find(format!("find {text}"), "deletes or writes files");
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }
}

/// What seeing through one word of a command gave.
enum Step {
    /// A wrapper: the command it runs.
    Inner(Vec<Word>),
    /// The command the rules judge.
    Segment(Vec<Word>),
    /// Nothing more to judge (what it runs was read, or found unreadable).
    Done,
}

/// Why a wrapper with an option the rules do not know needs approval: the option may take a
/// value, and the command after it would be misread.
const UNKNOWN_OPTION: &str = "an option of a wrapper the rules do not know";

/// A command that runs the command after its options (and `positionals` more words)
/// unchanged: the rules judge that command.
#[derive(Debug)]
struct Wrapper {
    name: &'static str,
    /// Options without a value.
    flags: &'static [&'static str],
    /// Options followed by a value (`-n 5`; `-n5` and `--name=5` are one word).
    values: &'static [&'static str],
    /// `-5` is an option (`nice -5`).
    numeric: bool,
    /// Words between the options and the command (`timeout`'s duration, `flock`'s file).
    positionals: usize,
}

const fn wrapper(
    name: &'static str,
    flags: &'static [&'static str],
    values: &'static [&'static str],
    positionals: usize,
) -> Wrapper {
    Wrapper {
        name,
        flags,
        values,
        numeric: false,
        positionals,
    }
}

/// The wrappers seen through, with their options (from their manual pages).
const WRAPPERS: &[Wrapper] = &[
    wrapper("nohup", &[], &[], 0),
    wrapper("builtin", &[], &[], 0),
    Wrapper {
        numeric: true,
        ..wrapper("nice", &[], &["-n", "--adjustment"], 0)
    },
    wrapper(
        "timeout",
        &["--foreground", "--preserve-status", "-v", "--verbose"],
        &["-k", "--kill-after", "-s", "--signal"],
        1,
    ),
    wrapper(
        "setsid",
        &["-c", "--ctty", "-f", "--fork", "-w", "--wait"],
        &[],
        0,
    ),
    wrapper("unbuffer", &["-p"], &[], 0),
    wrapper("chronic", &["-e", "-v"], &[], 0),
    wrapper(
        "stdbuf",
        &[],
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        0,
    ),
    wrapper(
        "ionice",
        &["-t", "--ignore"],
        &[
            "-c",
            "--class",
            "-n",
            "--classdata",
            "-p",
            "--pid",
            "-P",
            "--pgid",
            "-u",
            "--uid",
        ],
        0,
    ),
    wrapper(
        "taskset",
        &["-a", "--all-tasks", "-c", "--cpu-list"],
        &[],
        1,
    ),
    wrapper(
        "chrt",
        &[
            "-a",
            "--all-tasks",
            "-b",
            "--batch",
            "-d",
            "--deadline",
            "-f",
            "--fifo",
            "-i",
            "--idle",
            "-o",
            "--other",
            "-r",
            "--rr",
            "-R",
            "--reset-on-fork",
            "-v",
            "--verbose",
        ],
        &[
            "-T",
            "--sched-runtime",
            "-P",
            "--sched-period",
            "-D",
            "--sched-deadline",
        ],
        1,
    ),
    wrapper(
        "flock",
        &[
            "-s",
            "--shared",
            "-x",
            "-e",
            "--exclusive",
            "-u",
            "--unlock",
            "-n",
            "--nb",
            "--nonblock",
            "-o",
            "--close",
            "--verbose",
            "-F",
            "--no-fork",
        ],
        &["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"],
        1,
    ),
];

/// `env`'s options without a value.
const ENV_FLAGS: &[&str] = &[
    "-",
    "-i",
    "--ignore-environment",
    "-0",
    "--null",
    "-v",
    "--debug",
    "--list-signal-handling",
];
/// `env`'s signal options (`--block-signal[=SIG]`).
const ENV_SIGNALS: &[&str] = &["--block-signal", "--default-signal", "--ignore-signal"];

/// `command`'s options (`-v` and `-V` query, they run nothing).
const COMMAND: Wrapper = wrapper("command", &["-p"], &[], 0);
/// `/usr/bin/time`'s options (the `time` keyword is the parser's).
const TIME: Wrapper = wrapper(
    "time",
    &[
        "-p",
        "--portability",
        "-v",
        "--verbose",
        "-a",
        "--append",
        "-q",
        "--quiet",
    ],
    &["-f", "--format", "-o", "--output"],
    0,
);
/// `exec`'s options.
const EXEC: Wrapper = wrapper("exec", &["-c", "-l"], &["-a"], 0);
/// `watch`'s options.
const WATCH: Wrapper = wrapper(
    "watch",
    &[
        "-b",
        "--beep",
        "-e",
        "--errexit",
        "-g",
        "--chgexit",
        "-t",
        "--no-title",
        "-x",
        "--exec",
        "-c",
        "--color",
        "-p",
        "--precise",
        "-d",
        "--differences",
    ],
    &["-n", "--interval", "-q", "--equexit"],
    0,
);
/// `xargs`'s options.
const XARGS: Wrapper = wrapper(
    "xargs",
    &[
        "-0",
        "--null",
        "-r",
        "--no-run-if-empty",
        "-t",
        "--verbose",
        "-p",
        "--interactive",
        "-x",
        "--exit",
        "-o",
        "--open-tty",
    ],
    &[
        "-a",
        "--arg-file",
        "-d",
        "--delimiter",
        "-E",
        "-I",
        "-L",
        "-n",
        "--max-args",
        "-P",
        "--max-procs",
        "-s",
        "--max-chars",
        "--process-slot-var",
        "--replace",
        "--eof",
        "--max-lines",
    ],
    0,
);

/// The words after `wrapper`'s options (`--` ends them); `Err` with the first option it does
/// not know.
fn strict_options(words: &[Word], wrapper: &Wrapper) -> Result<Vec<Word>, String> {
    let mut i = 0;
    while let Some(word) = words.get(i) {
        let Some(text) = word.literal() else {
            if word.raw.starts_with('-') {
                return Err(word.raw.clone());
            }
            break;
        };
        if text == "--" {
            i += 1;
            break;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        let known = |option: &str| wrapper.flags.contains(&option);
        let takes_value = |option: &str| wrapper.values.contains(&option);
        if takes_value(text) {
            i += 2;
        } else if known(text)
            || (wrapper.numeric && text[1..].chars().all(|c| c.is_ascii_digit()))
            || text
                .split_once('=')
                .is_some_and(|(name, _)| takes_value(name) && name.starts_with("--"))
            || short_cluster(text, wrapper)
        {
            i += 1;
        } else {
            return Err(text.to_owned());
        }
    }
    Ok(words.get(i..).unwrap_or_default().to_vec())
}

/// `-xvf` of flags, or `-n5`: a flag cluster, or a short option with its value attached.
fn short_cluster(text: &str, wrapper: &Wrapper) -> bool {
    if text.starts_with("--") || text.len() < 3 {
        return false;
    }
    if text
        .get(..2)
        .is_some_and(|first| wrapper.values.contains(&first))
    {
        return true;
    }
    text[1..].chars().all(|c| {
        let mut buffer = [0u8; 4];
        let option = format!("-{}", c.encode_utf8(&mut buffer));
        wrapper.flags.contains(&option.as_str())
    })
}

fn display_raw(words: &[Word]) -> String {
    words
        .iter()
        .map(|w| w.raw.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `sudo`'s options that take a value.
const SUDO_VALUES: &[&str] = &[
    "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group",
];

fn assignment_name(assignment: &ast::Assignment) -> String {
    match &assignment.name {
        ast::AssignmentName::VariableName(name)
        | ast::AssignmentName::ArrayElementName(name, _) => name.clone(),
    }
}

/// The words after a wrapper's options (`-x`, `--long`, `--long=value`, and those of
/// `with_value` followed by their value); `--` ends them.
fn skip_options(words: &[Word], with_value: &[&str]) -> Vec<Word> {
    let mut i = 0;
    while let Some(word) = words.get(i) {
        let Some(text) = word.literal() else {
            break;
        };
        if text == "--" {
            i += 1;
            break;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        // `nice -10`: a number is the option's own value.
        i += if with_value.contains(&text) { 2 } else { 1 };
    }
    words.get(i..).unwrap_or_default().to_vec()
}

enum ShellString {
    /// Not `-c`: the shell runs a script file or reads its input.
    None,
    Literal(String),
    Unknown(String),
}

/// The string of `bash -c STRING` (options before it, `-c` alone or among short options).
fn shell_string(args: &[Word]) -> ShellString {
    let mut command_flag = false;
    let mut option_value = false;
    for word in args {
        if option_value {
            option_value = false;
            continue;
        }
        let Some(text) = word.literal() else {
            return if command_flag {
                ShellString::Unknown(word.raw.clone())
            } else {
                ShellString::None
            };
        };
        if command_flag {
            return ShellString::Literal(text.to_owned());
        }
        if text.starts_with('-') && !text.starts_with("--") && text.len() > 1 {
            if text.contains('c') {
                command_flag = true;
            }
            // `-o pipefail`, `-O extglob`: a value follows.
            option_value = text.ends_with(['o', 'O']);
            continue;
        }
        if text.starts_with('+') && text.len() > 1 {
            option_value = text.ends_with(['o', 'O']);
            continue;
        }
        if text.starts_with("--") {
            continue;
        }
        return ShellString::None;
    }
    ShellString::None
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{openings, plain_here_documents};

    /// The count as words split at every byte that is not an ASCII letter.
    fn openings_by_split(command: &str) -> usize {
        let symbols = command
            .bytes()
            .filter(|b| matches!(b, b'(' | b'{' | b'`' | b'!'))
            .count()
            + command.matches("$[").count();
        let chain = command
            .replace("\\\n", "")
            .split_once("[[")
            .map_or(0, |(_, test)| {
                test.split("&&").count() - 1 + test.split("||").count() - 1
            });
        let keywords = command
            .split(|c: char| !c.is_ascii_alphabetic())
            .filter(|w| {
                matches!(
                    *w,
                    "if" | "while"
                        | "until"
                        | "for"
                        | "case"
                        | "select"
                        | "do"
                        | "then"
                        | "function"
                        | "coproc"
                )
            })
            .count();
        symbols + keywords + chain
    }

    #[test]
    fn here_documents_with_plain_delimiters_are_read() {
        for text in [
            "cat <<EOF\nx\nEOF",
            "cat <<-EOF\nx\nEOF",
            "cat << 'EOF'\nx\nEOF",
            "cat <<\"E_1.x-y\"\nx\nE_1.x-y",
            "cat <<\\EOF\nx\nEOF",
            "cat <<E\\OF\nx\nEOF",
            "cat <<'E'\"F\"G\nx\nEFG",
            "$(cat <<EOF\nx\nEOF\n)",
            "cat <<EOF;ls",
            "cat <<<$(ls)",
            "cat <<<<$(ls)",
            "\\<<<<$(ls)",
            "cat << EOF",
            "cat <<'E'''\"\"",
            "git status",
        ] {
            assert!(plain_here_documents(text), "{text:?}");
        }
        for text in [
            "<<$( &$ \t ",
            "cat <<$(ls)",
            "cat <<",
            "cat <<'EOF",
            "cat <<E$x",
            "cat <<`ls`",
            "cat << \"a b\"",
            "cat <<-${x}",
            "cat <<''",
            "cat <<\"\"''",
            "cat <<  EOF",
            "cat << \tEOF",
            "\\<<<$( & ",
            "x\\<<<-$( & ",
        ] {
            assert!(!plain_here_documents(text), "{text:?}");
        }
    }

    /// `command` judged with no rules on a thread of its own; a judgement that takes longer
    /// than 30 s fails the test (the thread is left behind: it cannot be stopped).
    fn judge_within_30_s(command: &str) -> crate::Judgement {
        let (tx, rx) = std::sync::mpsc::channel();
        let owned = command.to_owned();
        std::thread::spawn(move || {
            let rules = crate::CommandRules::new();
            let _ = tx.send(rules.judge(&owned, &crate::Surroundings::new()));
        });
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no judgement of {command:?} in 30 s"))
    }

    /// brush-parser 0.4's tokenizer never returns on these, its memory growing (found by the
    /// tokenizer's property test and by fuzzing `judge`): the rules must answer, and ask.
    #[test]
    fn a_here_document_brush_loops_on_asks_at_once() {
        for command in [
            "<<$( &$ \t ",
            "x<<$( & \t",
            "<<$( &$ ",
            "cat <<$( & ",
            // Found by fuzzing `judge`: a backslash before `<<<`, a delimiter of quotes alone,
            // two blanks before the delimiter inside `$( … )`.
            "\\<<<$( &\u{1b} ",
            "cat <<'' ",
            "cat <<\"\" ",
            "cat <<-'' & ",
            "echo $(cat <<  EOF ",
        ] {
            let judgement = judge_within_30_s(command);
            assert_eq!(judgement.outcome, crate::Outcome::Ask, "{command:?}");
            assert!(
                judgement
                    .findings
                    .iter()
                    .any(|f| f.reason.contains("delimiter is not a plain word")),
                "{judgement:?}"
            );
        }
    }

    /// brush-parser 0.4's word parser takes exponential time on unclosed `$((` (found by
    /// fuzzing `judge`: nine took 2.4 s, twelve more than 100 s).
    #[test]
    fn a_word_with_many_unclosed_substitutions_asks_at_once() {
        for command in [
            format!("cat <<EOF\n{}\nEOF\n", "$((".repeat(12)),
            format!("echo $(cat <<'EOF'\n{}\nEOF\n)", "$((".repeat(12)),
            format!("cat <<EOF\n{}\nEOF\n", "$($((".repeat(7)),
            "<<EOF\n$(($(($((($(($($(((+$((($((f /\nEOF".to_owned(),
        ] {
            let judgement = judge_within_30_s(&command);
            assert_eq!(judgement.outcome, crate::Outcome::Ask, "{command:?}");
        }
    }

    #[test]
    fn openings_counts_symbols_and_whole_keywords() {
        assert_eq!(openings("if true; then (ls); fi"), 3);
        assert_eq!(openings("iffy fortune undo"), 0);
        assert_eq!(openings("for"), 1);
        assert_eq!(openings("é(do)é{`"), 4);
        assert_eq!(openings("[[ ! a != b ]] && echo $[1] [x] $$[ || ls"), 6);
        assert_eq!(openings("ls && ls || ls [\\\n[ x &\\\n& y ]] |||"), 2);
    }

    proptest! {
        #[test]
        fn openings_is_the_count_of_split_words(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("if"), Just("do"), Just("done"), Just("for"), Just("coproc"),
                    Just("function"), Just("x"), Just(" "), Just(";"), Just("("), Just("{"),
                    Just("`"), Just("é"), Just("1"), Just("_"), Just("then"), Just("case"),
                    Just("!"), Just("$"), Just("["), Just("$["), Just("&&"), Just("&"),
                    Just("|"), Just("||"), Just("[["), Just("\\\n"),
                ],
                0..40,
            )
        ) {
            let command = parts.concat();
            prop_assert_eq!(openings(&command), openings_by_split(&command));
        }
    }
}
