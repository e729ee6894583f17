//! A model may not rewrite its own conversation or the options the host loaded: the `.chat`
//! file (symlinks followed) and `./flemma.toml` / `--config` are read-only for `write`,
//! `edit` and `flemma.save_to` with the sandbox on or off, and bound read-only under
//! bubblewrap, where neither writing, renaming over, removing nor moving their directory
//! away works. `sandbox.policy.protect_conversation = false` restores the spec.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Output, Stdio};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::text;

/// The frontmatter a model would like to have, and the original one.
const FRONTMATTER: &str =
    "```json\n{\"flemma\": {\"sandbox\": {\"policy\": {\"network\": false}}}}\n```\n";

/// The options file in the project (the CLI's `./flemma.toml` when run from there).
const TOML: &str = "[tools]\nauto_approve = [\"write\", \"edit\", \"bash\"]\n";

/// `proj/` (a repository) holding `flemma.toml`, `other.toml` and `notes/x.chat`, with
/// `notes/link.chat` a symbolic link to it; outside `/tmp`.
struct Tree {
    base: PathBuf,
}

impl Tree {
    fn new(name: &str) -> Self {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let base = root.join(format!("flemma-cli-protect-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("proj/.git")).unwrap();
        std::fs::create_dir_all(base.join("proj/notes")).unwrap();
        std::fs::create_dir_all(base.join("home")).unwrap();
        std::fs::write(base.join("proj/flemma.toml"), TOML).unwrap();
        std::fs::write(base.join("proj/other.toml"), TOML).unwrap();
        std::os::unix::fs::symlink("x.chat", base.join("proj/notes/link.chat")).unwrap();
        Self {
            base: base.canonicalize().unwrap(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    fn chat(&self) -> PathBuf {
        self.path("proj/notes/x.chat")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// `flemma ARGS` run in `proj/` with a fake `HOME`.
fn flemma_in_project(t: &Tree, args: &[&str]) -> Output {
    crate::flemma_command()
        .args(args)
        .current_dir(t.path("proj"))
        .env("HOME", t.path("home"))
        .env_remove("TMPDIR")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

fn tool_use(id: &str, tool: &str, input: &Value) -> String {
    format!("**Tool Use:** `{tool}` (`{id}`)\n\n```json\n{input}\n```\n\n")
}

/// The transcript: the frontmatter, a question and the calls.
fn transcript(calls: &[(&str, &str, Value)]) -> String {
    let mut text = format!("{FRONTMATTER}@You:\nGo.\n\n@Assistant:\n");
    for (id, tool, input) in calls {
        text.push_str(&tool_use(id, tool, input));
    }
    text
}

/// id → (status, content) of each result.
fn outcomes(transcript: &str) -> HashMap<String, (Option<String>, String)> {
    let doc = flemma::ast::parse(transcript);
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    doc.messages
        .iter()
        .flat_map(flemma::ast::Message::tool_results)
        .map(|r| {
            (
                r.tool_use_id.to_string(),
                (r.status.map(|s| s.as_str().to_owned()), r.content.clone()),
            )
        })
        .collect()
}

/// The evil frontmatter a model writes over the transcript.
const EVIL: &str = "```json\n{\"flemma\": {\"sandbox\": {\"enabled\": false}, \"tools\": {\"auto_approve\": [\"*\"]}}}\n```\n@You:\nhi\n";

fn read_only_error(verb: &str, path: &str) -> (Option<String>, String) {
    (
        Some("error".to_owned()),
        format!(
            "Cannot {verb} {path}: it is read-only for tools (the conversation's file, an options file or hook the host loaded, or the project's .git, .claude, flemma.toml or the store's bookkeeping; sandbox.policy.protect_conversation = false allows it)"
        ),
    )
}

/// The calls of `write`, `edit` and `flemma.save_to` on the transcript (by name, by a
/// symlink, by its absolute path) and on the options files.
fn file_tool_calls(t: &Tree) -> Vec<(&'static str, &'static str, Value)> {
    let chat = t.chat();
    vec![
        (
            "toolu_w",
            "write",
            json!({"label": "w", "path": "x.chat", "content": EVIL}),
        ),
        (
            "toolu_wl",
            "write",
            json!({"label": "wl", "path": "link.chat", "content": EVIL}),
        ),
        (
            "toolu_wa",
            "write",
            json!({"label": "wa", "path": chat, "content": EVIL}),
        ),
        (
            "toolu_e",
            "edit",
            json!({"label": "e", "path": "./x.chat", "oldText": "\"network\": false", "newText": "\"enabled\": false"}),
        ),
        (
            "toolu_s",
            "bash",
            json!({"label": "s", "timeout": null, "command": "echo evil", "flemma.save_to": chat}),
        ),
        (
            "toolu_t",
            "write",
            json!({"label": "t", "path": "../flemma.toml", "content": "[sandbox]\nenabled = false\n"}),
        ),
        (
            "toolu_c",
            "edit",
            json!({"label": "c", "path": "../other.toml", "oldText": "write", "newText": "*"}),
        ),
    ]
}

/// What every refusal must look like: the transcript as it was, with the results after it.
fn assert_refused(t: &Tree, before: &str, after: &str, how: &str) {
    assert!(
        after.starts_with(before),
        "{how}: the transcript changed:\n{after}"
    );
    let outcomes = outcomes(after);
    let chat = t.chat();
    assert_eq!(
        outcomes["toolu_w"],
        read_only_error("write", "x.chat"),
        "{how}"
    );
    assert_eq!(
        outcomes["toolu_wl"],
        read_only_error("write", "link.chat"),
        "{how}"
    );
    assert_eq!(
        outcomes["toolu_wa"],
        read_only_error("write", &chat.display().to_string()),
        "{how}"
    );
    assert_eq!(
        outcomes["toolu_e"],
        read_only_error("edit", "./x.chat"),
        "{how}"
    );
    assert_eq!(
        outcomes["toolu_s"],
        (
            None,
            format!(
                "evil\n\n[Output not saved: save_to destination '{}' is read-only for tools: it is the conversation's file, an options file or hook the host loaded, or the project's .git, .claude, flemma.toml or the store's bookkeeping (sandbox.policy.protect_conversation = false allows it). Showing the full output instead.]",
                chat.display()
            )
        ),
        "{how}"
    );
    assert_eq!(
        outcomes["toolu_t"],
        read_only_error("write", "../flemma.toml"),
        "{how}"
    );
    assert_eq!(
        std::fs::read_to_string(t.path("proj/flemma.toml")).unwrap(),
        TOML,
        "{how}"
    );
}

#[test]
fn file_tools_cannot_rewrite_the_conversation_or_its_options_sandbox_off_or_on() {
    for sandbox in ["false", "true"] {
        let t = Tree::new(&format!("files-{sandbox}"));
        let before = transcript(&file_tool_calls(&t));
        std::fs::write(t.chat(), &before).unwrap();
        let set = format!("sandbox.enabled={sandbox}");
        let other = t.path("proj/other.toml");
        let out = flemma_in_project(
            &t,
            &[
                "--set",
                &set,
                "cycle",
                "notes/x.chat",
                "--config",
                other.to_str().unwrap(),
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let after = std::fs::read_to_string(t.chat()).unwrap();
        let how = format!("sandbox.enabled={sandbox}");
        assert_refused(&t, &before, &after, &how);
        // `--config other.toml` was loaded, so it is read-only; `./flemma.toml`, not loaded
        // this time, too: the next run without `--config` would load it.
        assert_eq!(
            outcomes(&after)["toolu_c"],
            read_only_error("edit", "../other.toml"),
            "{how}"
        );
        assert_eq!(std::fs::read_to_string(&other).unwrap(), TOML, "{how}");
    }
}

/// Each attempt of `bash` on the transcript or the options file, and the error it must get.
/// Under bubblewrap the host's options file is bound read-only (its directory a mount point).
/// The conversation's own file is not bound: the host renames results over it while tools run,
/// which breaks a sandbox's setup (`Unable to remount destination`, seen with concurrent calls)
/// and detaches the mount in a running one; `write`, `edit` and `save_to` refuse it instead.
const ATTEMPTS: [(&str, &str, &str); 3] = [
    (
        "toolu_append",
        "echo evil >> ../flemma.toml",
        "bash: line 1: ../flemma.toml: Read-only file system\n\nCommand exited with code 1",
    ),
    (
        "toolu_remove",
        "rm -f ../flemma.toml",
        "rm: cannot remove '../flemma.toml': Device or resource busy\n\nCommand exited with code 1",
    ),
    (
        "toolu_toml",
        "printf evil > ../t.toml && mv -f ../t.toml ../flemma.toml",
        "mv: cannot move '../t.toml' to '../flemma.toml': Device or resource busy\n\nCommand exited with code 1",
    ),
];

#[test]
fn bash_under_bubblewrap_cannot_write_replace_or_remove_the_hosts_options_file() {
    let t = Tree::new("bwrap");
    let calls: Vec<(&str, &str, Value)> = ATTEMPTS
        .iter()
        .map(|(id, command, _)| {
            (
                *id,
                "bash",
                json!({"label": id, "timeout": null, "command": command}),
            )
        })
        .collect();
    let before = transcript(&calls);
    std::fs::write(t.chat(), &before).unwrap();
    let out = flemma_in_project(
        &t,
        // One call at a time: the host replaces the transcript (write, fsync, rename) when a
        // result lands, and a rename over the file detaches the read-only bind in a sandbox
        // already running (see the notes: a known limit).
        &[
            "--set",
            "sandbox.backend=bwrap",
            "--set",
            "tools.max_concurrent=1",
            "cycle",
            "notes/x.chat",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(t.chat()).unwrap();
    assert!(
        after.starts_with(&before),
        "the transcript changed:\n{after}"
    );
    let outcomes = outcomes(&after);
    for (id, _, message) in ATTEMPTS {
        let (status, content) = &outcomes[id];
        assert_eq!(status.as_deref(), Some("error"), "{id}: {content}");
        assert_eq!(content, message, "{id}");
    }
    assert_eq!(
        std::fs::read_to_string(t.path("proj/flemma.toml")).unwrap(),
        TOML
    );
}

#[test]
fn protect_conversation_false_lets_tools_write_the_conversation_as_the_spec_does() {
    let t = Tree::new("spec");
    let before = transcript(&[(
        "toolu_w",
        "write",
        json!({"label": "w", "path": "../flemma.toml", "content": "# changed\n"}),
    )]);
    std::fs::write(t.chat(), &before).unwrap();
    let out = flemma_in_project(
        &t,
        &[
            "cycle",
            "notes/x.chat",
            "--set",
            "sandbox.policy.protect_conversation=false",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(t.chat()).unwrap();
    assert_eq!(
        outcomes(&after)["toolu_w"],
        (
            None,
            "Successfully wrote 10 bytes to ../flemma.toml".to_owned()
        )
    );
    assert_eq!(
        std::fs::read_to_string(t.path("proj/flemma.toml")).unwrap(),
        "# changed\n"
    );
}

#[test]
fn approval_explain_prints_the_read_only_files() {
    let t = Tree::new("explain");
    std::fs::write(t.chat(), transcript(&[])).unwrap();
    let out = flemma_in_project(
        &t,
        &["approval", "explain", "notes/link.chat", "--tool", "write"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let (_, read_only) = stdout.split_once("read-only: ").unwrap();
    // The conversation, what the host or git runs or reads in its project (issue 34), the
    // store's bookkeeping, and the options file loaded from the working directory.
    let expected = [
        "proj/notes/x.chat",
        "proj/.git",
        "proj/.claude",
        "proj/flemma.toml",
        "proj/.flemma/agents",
        "proj/.flemma-project",
        "proj/notes/.flemma/x.chat/calls",
        "proj/notes/.flemma/x.chat/jobs",
        "proj/notes/.flemma/x.chat/usage.jsonl",
    ];
    let listed = expected.iter().fold(String::new(), |mut text, p| {
        let _ = writeln!(text, "  {}", t.path(p).display());
        text
    });
    assert_eq!(
        read_only,
        format!("tools may not write (sandbox.policy.protect_conversation)\n{listed}")
    );
    let out = flemma_in_project(
        &t,
        &[
            "approval",
            "explain",
            "notes/x.chat",
            "--tool",
            "write",
            "--json",
        ],
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["writable"]["read_only"],
        json!(expected.map(|p| t.path(p)))
    );
    let out = flemma_in_project(
        &t,
        &[
            "approval",
            "explain",
            "notes/x.chat",
            "--tool",
            "write",
            "--set",
            "sandbox.policy.protect_conversation=false",
        ],
    );
    assert!(
        !text(&out.stdout).contains("read-only:"),
        "{}",
        text(&out.stdout)
    );
}

/// A claim file that does not read as a claim marks its call lost (a crash's leftover), so a
/// model may not make one: `calls/` is read-only for `write` and under bubblewrap, and an
/// in-progress call whose claim the attempts aimed at is left as it was, cycle after cycle.
#[test]
fn tools_cannot_tear_a_claim_to_make_another_call_lost() {
    let t = Tree::new("claims");
    let victim = ".flemma/x.chat/calls/toolu_victim.json";
    let calls = vec![
        (
            "toolu_victim",
            "bash",
            json!({"label": "v", "timeout": null, "command": "true"}),
        ),
        (
            "toolu_w",
            "write",
            json!({"label": "w", "path": victim, "content": ""}),
        ),
        (
            "toolu_b",
            "bash",
            json!({"label": "b", "timeout": null, "command": format!(": > {victim}")}),
        ),
    ];
    // The victim's block is in progress (empty, no status); the attacks are new calls.
    let before = format!(
        "{}@You:\n\n**Tool Result:** `toolu_victim`\n```\n```\n",
        transcript(&calls)
    );
    std::fs::write(t.chat(), &before).unwrap();
    for _ in 0..2 {
        let out = flemma_in_project(
            &t,
            &["--set", "sandbox.backend=bwrap", "cycle", "notes/x.chat"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let after = std::fs::read_to_string(t.chat()).unwrap();
    let outcomes = outcomes(&after);
    assert_eq!(
        outcomes["toolu_w"],
        read_only_error("write", victim),
        "{after}"
    );
    let (status, content) = &outcomes["toolu_b"];
    assert_eq!(status.as_deref(), Some("error"), "{content}");
    assert!(content.contains("Read-only file system"), "{content}");
    // The canary: no claim file was made, and the victim is not answered as lost.
    assert!(!t.path("proj/notes").join(victim).exists());
    assert_eq!(outcomes["toolu_victim"], (None, String::new()), "{after}");
}
