//! A frontmatter or a template whose Lua backtracks forever in the pattern matcher (where the
//! instruction budget never fires) cannot hang a command: `flemma check` and `flemma request`
//! end, with `pattern too complex` naming the line.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::Project;
use crate::text;

/// Lua that backtracks `40^k` times in Lua's own matcher.
const BACKTRACK: &str = r#"string.rep("a", 40):find(string.rep("a*", 40) .. "c")"#;

/// `flemma ARGS` in `proj/`, killed (and the test failed) if it runs for a minute.
fn bounded(p: &Project, args: &[&str]) -> std::process::Output {
    let mut child = crate::flemma_command()
        .args(args)
        .current_dir(p.path("proj"))
        .env("HOME", p.path("home"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("flemma {args:?} still ran after a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_backtracking_pattern_in_a_frontmatter_or_a_template_ends() {
    let p = Project::new("lua-bounded");
    let chat = p.write(
        "proj/x.chat",
        &format!("```lua\nlocal found = {BACKTRACK}\n```\n@You:\nHi.\n"),
    );
    let check = bounded(&p, &["check", chat.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stderr));
    let said = format!("{}{}", text(&check.stdout), text(&check.stderr));
    assert!(said.contains("x.chat:2:"), "{said}");
    assert!(said.contains("pattern too complex"), "{said}");

    let chat = p.write(
        "proj/y.chat",
        &format!("@You:\nCount: {{{{ {BACKTRACK} }}}}\n"),
    );
    let request = bounded(
        &p,
        &[
            "request",
            chat.to_str().unwrap(),
            "--provider",
            "anthropic",
            "--templates",
            "lua",
        ],
    );
    let said = format!("{}{}", text(&request.stdout), text(&request.stderr));
    assert!(said.contains("pattern too complex"), "{said}");
}
