//! The flat commands, read from their tokens ([`crate::tokens`]) without brush's grammar: lists and pipelines of
//! simple commands made of plain words and file redirections. Most commands an agent runs are
//! of this shape, and brush's parser spends most of its time on them trying each word as an
//! assignment. Anything else (a reserved word, a parenthesis, a brace, a word with `=`, a
//! here-document, `time`, `!`, an operator out of place) is left to brush's parser: [`read`]
//! returns `None`. The tests hold the walk of every flat command equal to the walk of brush's
//! syntax tree of it.

use brush_parser::ast::{IoFileRedirectKind, IoFileRedirectTarget, IoRedirect, Word};

use crate::tokens::Lexeme;

/// One part of a flat simple command, in the order written.
#[derive(Debug)]
pub(crate) enum Item<'t> {
    /// A word as written (quotes and expansions still in it).
    Word(&'t str),
    /// A redirection.
    Redirect(IoRedirect),
}

/// The simple commands of a flat command, each its items in the order written; `None` when the
/// command is not flat (brush's parser then reads it) or is not bash syntax.
pub(crate) fn read<'t>(tokens: &'t [Lexeme<'_>]) -> Option<Vec<Vec<Item<'t>>>> {
    let mut commands = Vec::new();
    let mut items: Vec<Item<'_>> = Vec::new();
    // What may come next: `true` after a command's first item, when a separator may follow.
    let mut i = 0;
    // After `&&`, `||` or `|` a command must follow (newlines may come between).
    let mut needs_command = false;
    while let Some(token) = tokens.get(i) {
        let text = token.text.as_ref();
        if !token.operator {
            if special(text) {
                return None;
            }
            if let Some(op) = tokens.get(i + 1)
                && op.operator
                && op.text.starts_with(['<', '>'])
                && text.bytes().all(|b| b.is_ascii_digit())
                && token.end.index == op.start.index
            {
                // An I/O number: the descriptor of the redirection that follows.
                let fd = text.parse().ok()?;
                let (redirect, used) = redirect(Some(fd), &op.text, tokens.get(i + 2))?;
                items.push(Item::Redirect(redirect));
                i += 1 + used;
            } else {
                items.push(Item::Word(text));
                i += 1;
            }
            needs_command = false;
            continue;
        }
        match text {
            "&&" | "||" | "|" | "|&" => {
                if items.is_empty() {
                    return None;
                }
                commands.push(std::mem::take(&mut items));
                needs_command = true;
                i += 1;
            }
            ";" | "&" => {
                if items.is_empty() {
                    return None;
                }
                commands.push(std::mem::take(&mut items));
                i += 1;
            }
            "\n" => {
                // A newline ends a command, except where a command must still follow.
                if !items.is_empty() {
                    commands.push(std::mem::take(&mut items));
                }
                i += 1;
            }
            op => {
                let (redirect, used) = redirect(None, op, tokens.get(i + 1))?;
                items.push(Item::Redirect(redirect));
                i += used;
                needs_command = false;
            }
        }
    }
    if needs_command {
        return None;
    }
    if !items.is_empty() {
        commands.push(items);
    }
    Some(commands)
}

/// A word brush's grammar gives a meaning of its own: a reserved word, `time` (a timed
/// pipeline), or a word that may be an assignment (a name, then `=` somewhere: brush tries every
/// such word as one; `--opt=value` or `"a=b"` cannot be).
fn special(word: &str) -> bool {
    matches!(
        word,
        "!" | "{"
            | "}"
            | "case"
            | "do"
            | "done"
            | "elif"
            | "else"
            | "esac"
            | "fi"
            | "for"
            | "if"
            | "in"
            | "then"
            | "until"
            | "while"
            | "[["
            | "]]"
            | "function"
            | "select"
            | "coproc"
            | "time"
    ) || (word.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') && word.contains('='))
}

/// The redirection `op` opens, with its target the next token: the redirection and how many
/// tokens it takes (the operator and the target); `None` for an operator that is not a file
/// redirection or a target that is not a word.
fn redirect(fd: Option<i32>, op: &str, target: Option<&Lexeme<'_>>) -> Option<(IoRedirect, usize)> {
    let target = target.filter(|t| !t.operator)?;
    let word = || Word {
        value: target.text.clone().into_owned(),
        loc: None,
    };
    let file = |kind| IoRedirect::File(fd, kind, IoFileRedirectTarget::Filename(word()));
    let duplicate = |kind| IoRedirect::File(fd, kind, IoFileRedirectTarget::Duplicate(word()));
    let redirect = match op {
        "<" => file(IoFileRedirectKind::Read),
        ">" => file(IoFileRedirectKind::Write),
        ">>" => file(IoFileRedirectKind::Append),
        "<>" => file(IoFileRedirectKind::ReadAndWrite),
        ">|" => file(IoFileRedirectKind::Clobber),
        "<&" => duplicate(IoFileRedirectKind::DuplicateInput),
        ">&" => duplicate(IoFileRedirectKind::DuplicateOutput),
        "&>" if fd.is_none() => IoRedirect::OutputAndError(word(), false),
        "&>>" if fd.is_none() => IoRedirect::OutputAndError(word(), true),
        "<<<" => IoRedirect::HereString(fd, word()),
        _ => return None,
    };
    Some((redirect, 2))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;

    use crate::script::{Place, Reading, analyze_reading};

    fn writable(path: &Path) -> bool {
        path.starts_with("/work/project")
    }

    /// The walk of `command` read flat where it can be, and by brush's parser alone.
    fn both(command: &str) -> (String, String) {
        let place = Place {
            cwd: Some(Path::new("/work/project")),
            writable: &writable,
        };
        let flat = analyze_reading(command, &place, Reading::Flat);
        let tree = analyze_reading(command, &place, Reading::Tree);
        (format!("{flat:?}"), format!("{tree:?}"))
    }

    fn is_flat(command: &str) -> bool {
        crate::tokens::lex(command).is_some_and(|lexemes| super::read(&lexemes).is_some())
    }

    /// Typical agent commands, all flat.
    const TYPICAL: &[&str] = &[
        "git status",
        "git diff --stat HEAD~1 -- src/",
        "cargo test -p flemma-shell -- --nocapture 2>&1 | grep -v 'warning: unused' | head -n 40",
        "echo \"built at $(date +%s)\" > /work/project/build.log",
        "cd flemma-shell && cargo build --release",
        "ls -la | wc -l",
        "grep -rn \"fn main\" src | head",
        "cat Cargo.toml; cat README.md",
        "make 2> errors.log || echo failed",
        "npm test &> /dev/null & wait",
        "rg TODO --type rust |& less",
        "sort < input.txt >> sorted.txt",
        "cat <<< 'text'",
        "git log --oneline -n 5\ngit status",
        "python3 -c 'print(1)'",
        "find . -name '*.rs' -exec wc -l {} +",
        "sudo rm -rf /",
        "echo $HOME ${PATH} \"$USER\"",
        "git commit -m \"fix: the \\\"flat\\\" reading\"",
        "tar czf /tmp/out.tgz . >| /tmp/log",
        "exec 3<> /tmp/fd",
        "cat file >&2",
        "bash -c 'git status && rm -rf ~'",
        "timeout 10 nice -n 5 cargo test",
        "git status --format=short",
        "cargo build --features=lua,otel \"x=y\" 1=2",
        "echo 2 > out.log",
        "echo 2>out.log 1 <in 3>&1",
        "echo a2>out.log",
    ];

    #[test]
    fn typical_commands_are_read_flat_and_walked_as_the_tree_is() {
        for command in TYPICAL {
            assert!(is_flat(command), "not flat: {command}");
            let (flat, tree) = both(command);
            assert_eq!(flat, tree, "{command}");
        }
    }

    #[test]
    fn what_is_not_flat_is_left_to_the_parser() {
        for command in [
            "x=1 git status",
            "git status a=b",
            "export _x=$(ls)",
            "if true; then ls; fi",
            "(cd src && ls)",
            "{ ls; }",
            "time ls",
            "! ls",
            "cat <<EOF\nhi\nEOF",
            "ls &&",
            "; ls",
            "ls ;; ls",
            "f() { ls; }",
            "ls | ",
            "echo > ",
            "diff <(ls a) <(ls b)",
            "[[ -f x ]] && ls",
            "ls\n&& ls",
            // brush's parser fails on a descriptor past i32 (the walk then asks).
            "echo 99999999999>out.log",
        ] {
            assert!(!is_flat(command), "flat: {command:?}");
            let (flat, tree) = both(command);
            assert_eq!(flat, tree, "{command:?}");
        }
    }

    #[test]
    fn every_command_of_the_table_is_walked_as_the_tree_is() {
        #[derive(serde::Deserialize)]
        struct Table {
            case: Vec<Case>,
        }
        #[derive(serde::Deserialize)]
        struct Case {
            command: String,
        }
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/commands.toml");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let table: Table = toml::from_str(&text).unwrap_or(Table { case: Vec::new() });
        assert!(table.case.len() >= 100, "the table: {}", table.case.len());
        let mut flat_ones = 0;
        for case in &table.case {
            flat_ones += usize::from(is_flat(&case.command));
            let (flat, tree) = both(&case.command);
            assert_eq!(flat, tree, "{:?}", case.command);
        }
        assert!(flat_ones >= 50, "{flat_ones} flat commands in the table");
    }

    /// Fragments of commands, flat or not, valid or not.
    fn fragment() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "git",
            "status",
            "rm",
            "-rf",
            "~",
            "/tmp/x",
            "out.log",
            "2",
            "1",
            "10",
            " ",
            " ",
            " ",
            "\t",
            "\n",
            "&&",
            "||",
            "|",
            "|&",
            ";",
            ";;",
            "&",
            ">",
            ">>",
            "<",
            "<<<",
            ">|",
            "<>",
            "&>",
            "&>>",
            ">&",
            "<&",
            "2>&1",
            ">&2",
            "'a b'",
            "\"a $x\"",
            "\"$(date)\"",
            "$(ls)",
            "`ls`",
            "$x",
            "${x}",
            "\\",
            "\\ ",
            "x=1",
            "=",
            "{",
            "}",
            "(",
            ")",
            "!",
            "time",
            "if",
            "then",
            "fi",
            "#",
            "<<",
            "EOF",
            "*",
            "?",
            "[",
            "]",
            "é",
            "$'\\x41'",
            "sudo",
            "eval",
            "bash",
            "-c",
            "xargs",
            "find",
            "-exec",
            "tee",
            "cd",
            "env",
            "timeout",
            "5",
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn any_command_is_walked_flat_as_the_tree_is(
            parts in prop::collection::vec(
                (fragment(), prop::sample::select(vec![" ", " ", ""])),
                0..24,
            )
        ) {
            let command: String = parts.into_iter().flat_map(|(f, gap)| [f, gap]).collect();
            let (flat, tree) = both(&command);
            prop_assert_eq!(flat, tree, "{:?}", command);
        }
    }
}
