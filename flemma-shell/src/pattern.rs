//! Prefix patterns on a simple command's words (`git diff *`), matched with three answers: the
//! command is matched, it may be (a word the pattern needs is an expansion), or it is not.

use std::fmt;
use std::sync::Arc;

use crate::error::PatternError;
use crate::words::Word;

/// A rule's pattern: words separated by spaces. A last word `*` matches zero or more further
/// words; any other `*` matches any characters within one word. `git status` matches exactly
/// `git status`; `git diff *` matches `git diff` and `git diff --stat HEAD`; `cargo
/// --features=*` matches one word beginning `--features=`; `*` alone matches every command.
///
/// ```
/// use flemma_shell::Pattern;
///
/// let pattern: Pattern = "git diff *".parse()?;
/// assert_eq!(pattern.as_str(), "git diff *");
/// assert!("".parse::<Pattern>().is_err());
/// # Ok::<(), flemma_shell::PatternError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Pattern(Arc<Parts>);

/// A pattern's text and words, shared by its copies (each judged command names its rules).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Parts {
    text: String,
    words: Vec<String>,
    /// The last word is a lone `*`.
    open: bool,
}

impl Pattern {
    /// The pattern as written (its words joined by one space).
    pub fn as_str(&self) -> &str {
        &self.0.text
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pattern")
            .field("text", &self.0.text)
            .field("words", &self.0.words)
            .field("open", &self.0.open)
            .finish()
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.text)
    }
}

impl std::str::FromStr for Pattern {
    type Err = PatternError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut words: Vec<String> = text.split_ascii_whitespace().map(str::to_owned).collect();
        if words.is_empty() {
            return Err(PatternError::Empty);
        }
        let open = words.last().is_some_and(|w| w == "*");
        if open {
            words.pop();
        }
        let text = words
            .iter()
            .map(String::as_str)
            .chain(open.then_some("*"))
            .collect::<Vec<_>>()
            .join(" ");
        Ok(Pattern(Arc::new(Parts { text, words, open })))
    }
}

/// How a pattern matches a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Match {
    No,
    /// It would match for some values of the command's expansions.
    Maybe,
    Yes,
}

impl Pattern {
    /// Matches `words` (the command word first); `open_ended` when unknown words follow them
    /// (what `xargs` appends). `by_name` also lets a command word that is a path match by its
    /// last component (`/bin/rm` as `rm`), as deny and ask rules do.
    pub(crate) fn matches(&self, words: &[Word], open_ended: bool, by_name: bool) -> Match {
        // The command word decides most patterns at once.
        if let (Some(first), Some(Some(name))) = (
            self.0.words.first().filter(|w| !w.contains('*')),
            words.first().map(|w| w.literal()),
        ) && first != name
            && !(by_name && name.rsplit('/').next() == Some(first.as_str()))
        {
            return Match::No;
        }
        let exact = self.match_from(words, open_ended, None);
        if !by_name || exact == Match::Yes {
            return exact;
        }
        let name = words
            .first()
            .and_then(|w| w.literal())
            .and_then(|w| w.rsplit_once('/'))
            .map(|(_, name)| name);
        match name {
            Some(name) if !name.is_empty() => {
                exact.max(self.match_from(words, open_ended, Some(name)))
            }
            _ => exact,
        }
    }

    fn match_from(&self, words: &[Word], open_ended: bool, first: Option<&str>) -> Match {
        let mut memo = vec![None; (self.0.words.len() + 1) * (words.len() + 1)];
        let m = Matcher {
            pattern: self,
            words,
            open_ended,
            first,
        };
        m.at(0, 0, &mut memo)
    }
}

struct Matcher<'a> {
    pattern: &'a Pattern,
    words: &'a [Word],
    open_ended: bool,
    /// The command word to use instead of the first word's text.
    first: Option<&'a str>,
}

impl Matcher<'_> {
    fn at(&self, i: usize, j: usize, memo: &mut Vec<Option<Match>>) -> Match {
        let key = i * (self.words.len() + 1) + j;
        if let Some(known) = memo[key] {
            return known;
        }
        let result = self.compute(i, j, memo);
        memo[key] = Some(result);
        result
    }

    fn compute(&self, i: usize, j: usize, memo: &mut Vec<Option<Match>>) -> Match {
        let pattern = &self.pattern.0.words;
        if i == pattern.len() {
            if self.pattern.0.open {
                // A last `*` takes whatever is left, known or not.
                return Match::Yes;
            }
            if j == self.words.len() {
                // Unknown arguments may follow, or none.
                return if self.open_ended {
                    Match::Maybe
                } else {
                    Match::Yes
                };
            }
            // Words left over: only expansions that may come to nothing leave a chance.
            return if self.words[j..].iter().all(|w| w.splits) {
                Match::Maybe
            } else {
                Match::No
            };
        }
        if j == self.words.len() {
            // The pattern wants more words: unknown arguments could supply them.
            return if self.open_ended {
                Match::Maybe
            } else {
                Match::No
            };
        }
        let word = &self.words[j];
        if word.splits {
            // Zero, one or several words: any way could fit, none for sure.
            let ways = [
                self.at(i, j + 1, memo),
                self.at(i + 1, j, memo),
                self.at(i + 1, j + 1, memo),
            ];
            return if ways.iter().any(|m| *m != Match::No) {
                Match::Maybe
            } else {
                Match::No
            };
        }
        let text = if j == 0 {
            self.first.or(word.literal())
        } else {
            word.literal()
        };
        match text {
            Some(text) if glob(&pattern[i], text) => self.at(i + 1, j + 1, memo),
            Some(_) => Match::No,
            None if pattern[i] == "*" => self.at(i + 1, j + 1, memo),
            None => self.at(i + 1, j + 1, memo).min(Match::Maybe),
        }
    }
}

/// `*` in `pattern` matches any characters (none included); everything else itself.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, rest) = (parts[0], &parts[1..]);
    let Some(mut text) = text.strip_prefix(first) else {
        return false;
    };
    let (last, middle) = rest.split_last().map_or(("", &[][..]), |(l, m)| (*l, m));
    for part in middle {
        match text.find(part) {
            Some(at) => text = &text[at + part.len()..],
            None => return false,
        }
    }
    text.len() >= last.len() && text.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(words: &str) -> Vec<Word> {
        words
            .split(' ')
            .map(|w| match w {
                "$x" => Word::decoded(w, None, true),
                "\"$x\"" => Word::decoded(w, None, false),
                _ => Word::plain(w),
            })
            .collect()
    }

    fn m(pattern: &str, words: &str) -> Match {
        pattern
            .parse::<Pattern>()
            .unwrap()
            .matches(&lit(words), false, true)
    }

    #[test]
    fn exact_and_open_patterns() {
        assert_eq!(m("git status", "git status"), Match::Yes);
        assert_eq!(m("git status", "git status -s"), Match::No);
        assert_eq!(m("git diff *", "git diff"), Match::Yes);
        assert_eq!(m("git diff *", "git diff --stat HEAD"), Match::Yes);
        assert_eq!(m("git diff *", "git difftool"), Match::No);
        assert_eq!(m("cargo --features=*", "cargo --features=a,b"), Match::Yes);
        assert_eq!(m("rm -rf *", "/bin/rm -rf /"), Match::Yes);
    }

    #[test]
    fn expansions_may_match() {
        assert_eq!(m("rm -rf *", "rm $x"), Match::Maybe);
        assert_eq!(m("rm -rf *", "rm \"$x\" /"), Match::Maybe);
        assert_eq!(m("rm -rf *", "rm -r $x"), Match::No);
        assert_eq!(m("git diff *", "git diff $x"), Match::Yes);
        assert_eq!(m("git status", "git status $x"), Match::Maybe);
    }

    #[test]
    fn globs_within_a_word() {
        assert!(glob("a*c", "abc"));
        assert!(glob("a*c", "ac"));
        assert!(!glob("a*c", "ab"));
        assert!(glob("*", ""));
        assert!(glob("*.rs", "main.rs"));
        assert!(!glob("a*b*a", "ab"));
        assert!(glob("a*b*a", "abba"));
    }
}
