//! What a hostile command cannot do to the host that judges it: overflow its stack, take its
//! time, or get read as something it is not.

use flemma_shell::{CommandRules, Outcome, RuleKind, Surroundings};

fn rules() -> CommandRules {
    let mut rules = CommandRules::new();
    rules.add(RuleKind::Allow, "ls *", "test").unwrap();
    rules.add(RuleKind::Deny, "rm -rf *", "test").unwrap();
    rules
}

/// Judges on a thread with the stack of a Tokio worker (2 MiB), as a host would.
fn judge_on_small_stack(command: String) -> Outcome {
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || rules().judge(&command, &Surroundings::new()).outcome)
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn deep_nesting_within_the_bound_is_read_on_a_small_stack() {
    let n = 120;
    let groups = format!("{}ls{}", "{ ".repeat(n), "; }".repeat(n));
    assert_eq!(judge_on_small_stack(groups), Outcome::Allow);
    let subshells = format!("{}ls{}", "(ls; ".repeat(n), ")".repeat(n));
    assert_eq!(judge_on_small_stack(subshells), Outcome::Allow);
    // Each substitution is read in turn, 16 levels deep at most.
    let substitutions = |n| format!("{}ls{}", "ls $(".repeat(n), ")".repeat(n));
    assert_eq!(judge_on_small_stack(substitutions(16)), Outcome::Allow);
    assert_eq!(judge_on_small_stack(substitutions(17)), Outcome::Ask);
    // At the bound, read on the reader's own large stack.
    let most = format!("{}ls{}", "{ ".repeat(250), "; }".repeat(250));
    assert_eq!(judge_on_small_stack(most), Outcome::Allow);
    let ifs = format!("{}ls{}", "if true; then ".repeat(60), "; fi".repeat(60));
    // `true` has no rule: the rules pass, after reading every level.
    assert_eq!(judge_on_small_stack(ifs), Outcome::Pass);
}

#[test]
fn nesting_past_the_bound_asks_without_reading() {
    for command in [
        format!("{}rm -rf /{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("{}ls{}", "{ ".repeat(300), "; }".repeat(300)),
        format!("{}ls{}", "if true; then ".repeat(300), "; fi".repeat(300)),
        format!("echo {}", "`".repeat(600)),
        // Found by fuzzing: brush's tokenizer recurses on `$[`, its parser on the `!` of a
        // test, and a test's chain of `&&` is a tree as deep as it is long (the walk and the
        // drop recurse on it): in a release build these overflowed a 2 MiB stack from about
        // 1,700 `$[`, 2,400 `!` and 11,000 `&&`.
        format!("echo {}", "$[".repeat(3_000)),
        format!("[[ {}x ]]", "! ".repeat(3_000)),
        format!("[[ x{} ]]", "&&x".repeat(21_800)),
        format!("[\\\n[ x{} ]]", " || x".repeat(10_000)),
    ] {
        assert_eq!(judge_on_small_stack(command), Outcome::Ask);
    }
}

#[test]
fn a_command_longer_than_the_bound_asks() {
    let long = format!("ls {}", "a ".repeat(40_000));
    let judgement = rules().judge(&long, &Surroundings::new());
    assert_eq!(judgement.outcome, Outcome::Ask);
    assert!(
        judgement.findings[0]
            .reason
            .contains("longer than 65536 bytes")
    );
}

#[test]
fn a_long_chain_within_the_bound_is_read() {
    let chain = vec!["ls"; 5_000].join(" && ");
    assert_eq!(judge_on_small_stack(chain.clone()), Outcome::Allow);
    assert_eq!(
        judge_on_small_stack(format!("{chain} && rm -rf /")),
        Outcome::Deny
    );
}
