//! Command rules for flemma's `bash` tool: "allow `git status`" never allows
//! `git status && rm -rf ~`.
//!
//! [`CommandRules`] holds allow, ask and deny [`Pattern`]s (`git status`, `cargo test *`,
//! `rm -rf *`). [`CommandRules::judge`] parses a command with a real bash parser
//! ([brush-parser](https://docs.rs/brush-parser); flat commands, lists and pipelines of plain
//! simple commands, are read from tokens of its own that tests hold equal to brush-parser's
//! reading), splits it into every simple command it would
//! run, sees through wrappers such as `timeout` and `env`, and gives a [`Judgement`]: the
//! [`Outcome`] (allow, ask, deny, or pass when no rule matches a part), each simple command with
//! the rule that decided it, and the [`Finding`]s that need approval whatever the rules allow
//! (`sudo`, `eval`, a write outside the writable paths, text that does not parse).
//!
//! The approval chain of `flemma-approval` runs these rules as the resolver
//! `urn:flemma:approval:bash-rules`, from the options `tools.bash.allow`, `tools.bash.ask` and
//! `tools.bash.deny`.
//!
//! ```
//! use flemma_shell::{CommandRules, Outcome, RuleKind, Surroundings};
//! use std::path::Path;
//!
//! let mut rules = CommandRules::new();
//! rules.add(RuleKind::Allow, "echo *", "example")?;
//! let roots = [Path::new("/work/project")];
//! let here = Surroundings::new().cwd(Path::new("/work/project")).writable_under(&roots);
//!
//! assert_eq!(rules.judge("echo hi > notes.txt", &here).outcome, Outcome::Allow);
//! let outside = rules.judge("echo hi > /etc/motd", &here);
//! assert_eq!(outside.outcome, Outcome::Ask);
//! assert_eq!(outside.findings[0].subject, "> /etc/motd");
//! # Ok::<(), flemma_shell::PatternError>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]
mod error;
mod flat;
mod pattern;
mod rules;
mod script;
mod tokens;
mod words;

pub use error::PatternError;
pub use pattern::Pattern;
pub use rules::{
    CommandRules, Finding, Judgement, Outcome, Rule, RuleKind, Segment, SegmentVerdict,
    Surroundings,
};
