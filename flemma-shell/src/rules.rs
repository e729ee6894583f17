//! Allow, ask and deny rules, and their judgement of a command.

use std::fmt;
use std::path::Path;

use serde::Serialize;

use crate::error::PatternError;
use crate::pattern::{Match, Pattern};
use crate::script::{self, Place};

/// What a rule says of the commands it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    /// Runs without asking, when every other simple command of the command is allowed too.
    Allow,
    /// Asks the user.
    Ask,
    /// Refuses.
    Deny,
}

impl RuleKind {
    /// `allow`, `ask` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Ask => "ask",
            RuleKind::Deny => "deny",
        }
    }
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule: its kind, its pattern and where it was written (`flemma.toml`,
/// `.claude/settings.json`), for explanations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// Allow, ask or deny.
    pub kind: RuleKind,
    /// The pattern.
    #[serde(serialize_with = "as_text")]
    pub pattern: Pattern,
    /// Where it comes from, as shown in explanations.
    pub origin: String,
}

fn as_text<S: serde::Serializer>(pattern: &Pattern, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(pattern.as_str())
}

/// The rules on `bash` commands: allow, ask and deny patterns.
///
/// A command is parsed as bash parses it (with [brush-parser](https://docs.rs/brush-parser)) and
/// split into the simple commands it runs: the parts of lists and pipelines, of subshells and
/// groups, command and process substitutions, here-documents, `bash -c` strings, the bodies of
/// functions, loops and conditionals. Wrappers that only change how a command runs (`timeout`,
/// `nice`, `nohup`, `time`, `env NAME=value`, `command`, `exec`) are seen through. Then, over
/// all of them: a simple command matched by a deny rule denies the whole command; otherwise one
/// matched by an ask rule, or anything the rules cannot allow (`sudo`, `eval`, a command name
/// that is an expansion, a write outside the writable paths, text that does not parse) asks;
/// otherwise the command is allowed when every simple command is matched by an allow rule, and
/// the rules have no opinion when one is matched by none.
///
/// ```
/// use flemma_shell::{CommandRules, Outcome, RuleKind, Surroundings};
///
/// let mut rules = CommandRules::new();
/// rules.add(RuleKind::Allow, "git status", "flemma.toml")?;
/// rules.add(RuleKind::Allow, "cargo test *", "flemma.toml")?;
/// rules.add(RuleKind::Deny, "rm -rf *", "flemma.toml")?;
///
/// let here = Surroundings::new();
/// assert_eq!(rules.judge("git status && cargo test -p x", &here).outcome, Outcome::Allow);
/// assert_eq!(rules.judge("git status && rm -rf ~", &here).outcome, Outcome::Deny);
/// assert_eq!(rules.judge("git status; make", &here).outcome, Outcome::Pass);
/// assert_eq!(rules.judge("sudo git status", &here).outcome, Outcome::Ask);
/// # Ok::<(), flemma_shell::PatternError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRules {
    rules: Vec<Rule>,
}

/// Where a command runs: the directory relative paths are taken against, and which paths it may
/// write without asking (by default none but the devices, so every redirection to a file asks).
pub struct Surroundings<'a> {
    cwd: Option<&'a Path>,
    writable: Box<dyn Fn(&Path) -> bool + Send + Sync + 'a>,
}

impl fmt::Debug for Surroundings<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Surroundings")
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

impl Default for Surroundings<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> Surroundings<'a> {
    /// No working directory known, nothing writable.
    pub fn new() -> Self {
        Surroundings {
            cwd: None,
            writable: Box::new(|_| false),
        }
    }

    /// The directory the command starts in.
    #[must_use]
    pub fn cwd(mut self, cwd: &'a Path) -> Self {
        self.cwd = Some(cwd);
        self
    }

    /// Which absolute paths (normalized: no `.` or `..`) the command may write without asking.
    #[must_use]
    pub fn writable(mut self, writable: impl Fn(&Path) -> bool + Send + Sync + 'a) -> Self {
        self.writable = Box::new(writable);
        self
    }

    /// The command may write under each of `roots` (and nothing else).
    #[must_use]
    pub fn writable_under(self, roots: &'a [impl AsRef<Path> + Sync]) -> Self {
        self.writable(move |path| roots.iter().any(|root| path.starts_with(root)))
    }
}

/// What the rules say of a whole command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every simple command is allowed, and nothing asks.
    Allow,
    /// Something needs approval.
    Ask,
    /// A simple command is denied.
    Deny,
    /// A simple command is matched by no rule: the rules have no opinion.
    Pass,
}

impl Outcome {
    /// `allow`, `ask`, `deny` or `pass`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::Ask => "ask",
            Outcome::Deny => "deny",
            Outcome::Pass => "pass",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What decided one simple command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum SegmentVerdict {
    /// An allow rule matched.
    Allowed {
        /// The rule.
        rule: Rule,
    },
    /// An ask rule matched, or a deny rule may match (an expansion could complete it).
    Asked {
        /// The rule.
        rule: Rule,
        /// The rule matches only for some values of the command's expansions.
        maybe: bool,
    },
    /// A deny rule matched.
    Denied {
        /// The rule.
        rule: Rule,
    },
    /// No rule matched.
    Unmatched,
}

/// One simple command of a command, and what decided it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// The command as the rules read it: its words after quote removal, an expansion as
    /// written, joined by spaces.
    pub command: String,
    /// The wrappers seen through to reach it, outermost first (`timeout`, `sudo`,
    /// `find -exec`).
    pub via: Vec<String>,
    /// Unknown arguments follow it (`xargs`, `find -exec`): only an allow rule ending in `*`
    /// allows it.
    pub open_ended: bool,
    /// The rule that decided it.
    #[serde(flatten)]
    pub verdict: SegmentVerdict,
}

/// Something in a command that needs approval whatever the rules allow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What was found (`sudo`, `> /etc/passwd`, the text that does not parse).
    pub subject: String,
    /// Why it needs approval.
    pub reason: String,
}

/// The rules' judgement of a command: the outcome, each simple command with the rule that
/// decided it, and what needs approval besides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// The outcome.
    pub outcome: Outcome,
    /// The simple commands, in the order they appear.
    pub segments: Vec<Segment>,
    /// What needs approval whatever the rules allow.
    pub findings: Vec<Finding>,
}

impl Judgement {
    /// One line saying why: the denied command and its rule, what asks, or what no rule
    /// matches.
    pub fn summary(&self) -> String {
        let quoted = |s: &Segment| format!("`{}`", s.command);
        match self.outcome {
            Outcome::Deny => self
                .segments
                .iter()
                .find_map(|s| match &s.verdict {
                    SegmentVerdict::Denied { rule } => Some(format!(
                        "{} matches tools.bash.deny entry {:?}",
                        quoted(s),
                        rule.pattern.as_str()
                    )),
                    _ => None,
                })
                .unwrap_or_default(),
            Outcome::Ask => {
                let asked = self.segments.iter().find_map(|s| match &s.verdict {
                    SegmentVerdict::Asked { rule, maybe } => Some((s, rule, *maybe)),
                    _ => None,
                });
                if let Some((s, rule, maybe)) = asked {
                    let kind = if maybe { "may match" } else { "matches" };
                    return format!(
                        "{} {kind} tools.bash.{} entry {:?}",
                        quoted(s),
                        rule.kind,
                        rule.pattern.as_str()
                    );
                }
                self.findings
                    .first()
                    .map(|f| format!("`{}` {}", f.subject, f.reason))
                    .unwrap_or_default()
            }
            Outcome::Allow => {
                let mut line = "every command is allowed (".to_owned();
                push_quoted(&mut line, self.segments.iter());
                line.push(')');
                line
            }
            Outcome::Pass => {
                let mut line = "no rule matches ".to_owned();
                push_quoted(
                    &mut line,
                    self.segments
                        .iter()
                        .filter(|s| s.verdict == SegmentVerdict::Unmatched),
                );
                line
            }
        }
    }
}

/// Appends each segment's command in backquotes, separated by `, `.
fn push_quoted<'a>(line: &mut String, segments: impl Iterator<Item = &'a Segment>) {
    for (i, segment) in segments.enumerate() {
        if i > 0 {
            line.push_str(", ");
        }
        line.push('`');
        line.push_str(&segment.command);
        line.push('`');
    }
}

impl CommandRules {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule.
    ///
    /// # Errors
    ///
    /// [`PatternError`] for a pattern without a word.
    pub fn add(
        &mut self,
        kind: RuleKind,
        pattern: &str,
        origin: impl Into<String>,
    ) -> Result<&mut Self, PatternError> {
        self.rules.push(Rule {
            kind,
            pattern: pattern.parse()?,
            origin: origin.into(),
        });
        Ok(self)
    }

    /// Adds rules built elsewhere (another file's).
    pub fn extend(&mut self, rules: impl IntoIterator<Item = Rule>) {
        self.rules.extend(rules);
    }

    /// The rules, in the order they were added.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Judges `command` run in `here`.
    pub fn judge(&self, command: &str, here: &Surroundings<'_>) -> Judgement {
        let place = Place {
            cwd: here.cwd,
            writable: &*here.writable,
        };
        let analysis = script::analyze(command, &place);
        let mut findings: Vec<Finding> = analysis
            .findings
            .into_iter()
            .map(|f| Finding {
                subject: f.subject,
                reason: f.reason,
            })
            .collect();
        let mut segments = Vec::with_capacity(analysis.segments.len());
        for segment in analysis.segments {
            let verdict = self.verdict(&segment);
            if let (Some(reason), SegmentVerdict::Unmatched) = (segment.needs_open_rule, &verdict) {
                findings.push(Finding {
                    subject: display(&segment.words),
                    reason: format!(
                        "{} ({}): no allow rule ending in `*` covers it",
                        reason,
                        segment.via.last().map_or("", String::as_str)
                    ),
                });
            }
            segments.push(Segment {
                command: display(&segment.words),
                via: segment.via,
                open_ended: segment.open_ended,
                verdict,
            });
        }
        let outcome = if segments
            .iter()
            .any(|s| matches!(s.verdict, SegmentVerdict::Denied { .. }))
        {
            Outcome::Deny
        } else if !findings.is_empty()
            || segments
                .iter()
                .any(|s| matches!(s.verdict, SegmentVerdict::Asked { .. }))
        {
            Outcome::Ask
        } else if !segments.is_empty()
            && segments
                .iter()
                .all(|s| matches!(s.verdict, SegmentVerdict::Allowed { .. }))
        {
            Outcome::Allow
        } else {
            Outcome::Pass
        };
        Judgement {
            outcome,
            segments,
            findings,
        }
    }

    /// The rule deciding one simple command: deny, then ask, then allow.
    fn verdict(&self, segment: &script::Segment) -> SegmentVerdict {
        let matching = |kind: RuleKind, by_name: bool| {
            let mut best: Option<(&Rule, Match)> = None;
            for rule in self.rules.iter().filter(|r| r.kind == kind) {
                let m = rule
                    .pattern
                    .matches(&segment.words, segment.open_ended, by_name);
                if m > best.map_or(Match::No, |(_, b)| b) {
                    best = Some((rule, m));
                    if m == Match::Yes {
                        break;
                    }
                }
            }
            best
        };
        let deny = matching(RuleKind::Deny, true);
        if let Some((rule, Match::Yes)) = deny {
            return SegmentVerdict::Denied { rule: rule.clone() };
        }
        if let Some((rule, m)) = matching(RuleKind::Ask, true) {
            return SegmentVerdict::Asked {
                rule: rule.clone(),
                maybe: m == Match::Maybe,
            };
        }
        if let Some((rule, _)) = deny {
            return SegmentVerdict::Asked {
                rule: rule.clone(),
                maybe: true,
            };
        }
        match matching(RuleKind::Allow, false) {
            Some((rule, Match::Yes)) => SegmentVerdict::Allowed { rule: rule.clone() },
            _ => SegmentVerdict::Unmatched,
        }
    }
}

/// A simple command's words for display: literal words as they read, expansions as written.
fn display(words: &[crate::words::Word]) -> String {
    let mut line = String::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(word.literal().unwrap_or(&word.raw));
    }
    line
}
