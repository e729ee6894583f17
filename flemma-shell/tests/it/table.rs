//! The decision table: commands and what the rules of `tests/data/commands.toml` decide for
//! each, chained, piped, substituted, wrapped, redirected, quoted and escaped alike.

use std::path::{Path, PathBuf};

use flemma_shell::{CommandRules, Outcome, RuleKind, Surroundings};
use serde::Deserialize;

#[derive(Deserialize)]
struct Table {
    cwd: PathBuf,
    writable: Vec<PathBuf>,
    allow: Vec<String>,
    ask: Vec<String>,
    deny: Vec<String>,
    case: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    command: String,
    expect: String,
    why: String,
}

/// The table's rules, where its commands run, and its cases.
pub(crate) struct Loaded {
    pub(crate) rules: CommandRules,
    pub(crate) cwd: PathBuf,
    pub(crate) writable: Vec<PathBuf>,
    /// Command, expected outcome, why.
    pub(crate) cases: Vec<(String, String, String)>,
}

/// The table, read once.
pub(crate) fn table() -> &'static Loaded {
    static TABLE: std::sync::LazyLock<Loaded> = std::sync::LazyLock::new(read);
    &TABLE
}

fn read() -> Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/commands.toml");
    let text = std::fs::read_to_string(&path).expect("the table");
    let table: Table = toml::from_str(&text).expect("the table parses");
    let mut rules = CommandRules::new();
    for (kind, patterns) in [
        (RuleKind::Allow, &table.allow),
        (RuleKind::Ask, &table.ask),
        (RuleKind::Deny, &table.deny),
    ] {
        for pattern in patterns {
            rules
                .add(kind, pattern, "commands.toml")
                .expect("a pattern");
        }
    }
    let cases = table
        .case
        .into_iter()
        .map(|c| (c.command, c.expect, c.why))
        .collect();
    Loaded {
        rules,
        cwd: table.cwd,
        writable: table.writable,
        cases,
    }
}

#[test]
fn every_command_of_the_table_gets_its_decision() {
    let Loaded {
        rules,
        cwd,
        writable,
        cases,
    } = table();
    let here = Surroundings::new().cwd(cwd).writable_under(writable);
    assert!(cases.len() >= 100, "{} cases", cases.len());
    let mut wrong = Vec::new();
    for (command, expect, why) in cases {
        let judgement = rules.judge(command, &here);
        if judgement.outcome.as_str() != expect {
            wrong.push(format!(
                "{command:?} ({why}): expected {expect}, got {} ({})",
                judgement.outcome,
                judgement.summary()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
    // Every decision is in the table.
    for outcome in [Outcome::Allow, Outcome::Ask, Outcome::Deny, Outcome::Pass] {
        assert!(
            cases.iter().any(|(_, e, _)| e == outcome.as_str()),
            "no {outcome} case"
        );
    }
}
