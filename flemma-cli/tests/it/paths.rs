//! Paths follow the conversation, not the spelling of FILE or the directory the command runs
//! in: `read`, `write`, `ls`, `grep`, `find`, `bash`'s working directory,
//! `$FLEMMA_TOOLS_STORE_PATH`, truncation notices, `flemma.save_to` and `@./file` references
//! come out the same for `x.chat`, `../proj/sub/x.chat` and `./sub/x.chat`. And the
//! sandbox's writable set is the conversation's project: running from `/` or `$HOME` does
//! not widen it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::text;

/// A scratch tree: `proj/` (a repository: `.git`), the conversation in `proj/sub/`, files
/// around it, and `other/`, a directory outside the project.
struct Tree {
    base: PathBuf,
}

impl Tree {
    fn new(root: &Path, name: &str) -> Self {
        let base = root.join(format!("flemma-cli-paths-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for dir in ["proj/.git", "proj/sub", "proj/d", "other", "home"] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        std::fs::write(base.join("proj/outside.txt"), "outside-token\n").unwrap();
        std::fs::write(base.join("proj/d/ref.txt"), "ref-content\n").unwrap();
        Self {
            base: base.canonicalize().unwrap(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Runs `flemma` in `dir` with `HOME` set to `home` and the cache/temporary variables unset
/// (so the default writable set is predictable).
fn flemma_in(dir: &Path, home: &Path, args: &[&str]) -> Output {
    crate::flemma_command()
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env_remove("TMPDIR")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_DATA_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// The tool calls of the test, in order (`toolu_scripted_1_<n>` / `toolu_<n>`).
fn calls() -> Vec<(&'static str, Value)> {
    vec![
        (
            "read",
            json!({"label": "r", "path": "../outside.txt", "offset": null, "limit": null}),
        ),
        (
            "write",
            json!({"label": "w", "path": "../x.txt", "content": "hello"}),
        ),
        (
            "ls",
            json!({"label": "l", "path": "../d", "max_depth": null, "limit": null}),
        ),
        (
            // The transcript holds the token too (the read result): only .txt files.
            "grep",
            json!({"label": "g", "pattern": "out[s]ide-token", "path": "..", "glob": "*.txt", "limit": null}),
        ),
        (
            "find",
            json!({"label": "f", "pattern": "outside.*", "path": "..", "limit": null}),
        ),
        (
            "bash",
            json!({"label": "b", "timeout": null, "command":
                "pwd; printf '%s\\n' \"$FLEMMA_TOOLS_STORE_PATH\"; echo stored > \"$FLEMMA_TOOLS_STORE_PATH/by-bash.txt\""}),
        ),
        (
            "bash",
            json!({"label": "big", "timeout": null, "command": "seq 1 3000"}),
        ),
        (
            "bash",
            json!({"label": "s", "timeout": null, "command": "echo three",
                "flemma.save_to": "$FLEMMA_TOOLS_STORE_PATH/three.txt"}),
        ),
    ]
}

/// The conversation: a reference to `proj/d/ref.txt` from `proj/sub/`, two levels up and
/// back down.
const CHAT: &str = "@You:\nGo, and see @../../proj/d/ref.txt\n";

/// The transcript of `cycle`: the calls already asked for.
fn transcript_with_calls() -> String {
    let mut text = format!("{CHAT}\n@Assistant:\n");
    for (n, (tool, input)) in calls().iter().enumerate() {
        let _ = write!(
            text,
            "**Tool Use:** `{tool}` (`toolu_{}`)\n\n```json\n{input}\n```\n\n",
            n + 1
        );
    }
    text
}

/// Each tool result's content by call number (1-based).
fn results(transcript: &str) -> HashMap<usize, String> {
    let doc = flemma::ast::parse(transcript);
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    doc.messages
        .iter()
        .flat_map(flemma::ast::Message::tool_results)
        .map(|r| {
            let id = r.tool_use_id.as_str();
            let n = id.rsplit('_').next().unwrap().parse().unwrap();
            (n, r.content.clone())
        })
        .collect()
}

/// What every spelling of FILE must give, for the tree `t` (a run from anywhere).
fn assert_paths_follow_the_conversation(t: &Tree, transcript: &str, how: &str) {
    let results = results(transcript);
    let sub = t.path("proj/sub");
    let store = sub.join(".flemma/x.chat");
    let result = |n: usize| {
        results
            .get(&n)
            .unwrap_or_else(|| panic!("{how}: no result {n}"))
    };
    assert_eq!(result(1), "outside-token", "{how}: read ../outside.txt");
    assert_eq!(
        result(2),
        "Successfully wrote 5 bytes to ../x.txt",
        "{how}: write"
    );
    assert_eq!(
        std::fs::read_to_string(t.path("proj/x.txt"))
            .ok()
            .as_deref(),
        Some("hello"),
        "{how}: write ../x.txt lands beside sub/"
    );
    assert_eq!(result(3), "ref.txt\n\n[1 entry]", "{how}: ls ../d");
    assert_eq!(
        result(4),
        "../outside.txt:1:outside-token\n\n[1 match]",
        "{how}: grep .."
    );
    assert_eq!(result(5), "../outside.txt", "{how}: find ..");
    assert_eq!(
        *result(6),
        format!("{}\n{}", sub.display(), store.display()),
        "{how}: bash runs in the conversation's directory; the store path is absolute"
    );
    assert_eq!(
        std::fs::read_to_string(store.join("by-bash.txt"))
            .ok()
            .as_deref(),
        Some("stored\n"),
        "{how}: bash writes into $FLEMMA_TOOLS_STORE_PATH"
    );
    let notice = result(7).lines().last().unwrap().to_owned();
    let overflow = store.join("tool_bash_toolu_scripted_1_7.txt");
    let overflow = if transcript.contains("toolu_scripted_") {
        overflow
    } else {
        store.join("tool_bash_toolu_7.txt")
    };
    assert_eq!(
        notice,
        format!(
            "[Showing lines 1001-3000 of 3000. Full output: {}]",
            overflow.display()
        ),
        "{how}: the truncation notice names the absolute store file"
    );
    assert!(overflow.is_file(), "{how}: {} missing", overflow.display());
    let three = store.join("three.txt");
    assert_eq!(
        std::fs::read_to_string(&three).ok().as_deref(),
        Some("three"),
        "{how}: save_to $FLEMMA_TOOLS_STORE_PATH/three.txt"
    );
    assert!(
        result(8).ends_with(&format!(
            "[Output saved: {} — 5B, 1 lines]",
            three.display()
        )),
        "{how}: {}",
        result(8)
    );
    // Nothing landed where the spelling of FILE or the working directory would put it.
    for wrong in ["proj/sub/x.txt", "x.txt", "other/x.txt", "proj/sub/proj"] {
        assert!(!t.path(wrong).exists(), "{how}: {wrong} was written");
    }
}

/// The three spellings: (directory to run in, FILE).
const SPELLINGS: [(&str, &str); 3] = [
    ("proj/sub", "x.chat"),
    ("other", "../proj/sub/x.chat"),
    ("proj", "./sub/x.chat"),
];

#[test]
fn run_with_a_relative_file_resolves_every_path_from_the_conversation() {
    for (n, (dir, file)) in SPELLINGS.iter().enumerate() {
        let t = Tree::new(&std::env::temp_dir(), &format!("run{n}"));
        std::fs::write(t.path("proj/sub/x.chat"), CHAT).unwrap();
        let turns: Vec<Value> = calls()
            .into_iter()
            .map(|(name, input)| json!({"name": name, "input": input}))
            .collect();
        let script = json!([{"tool_uses": turns}, {"text": "Done."}]);
        std::fs::write(t.path("script.json"), script.to_string()).unwrap();
        let script = t.path("script.json");
        let out = flemma_in(
            &t.path(dir),
            &t.path("home"),
            &[
                "run",
                file,
                "--provider",
                "scripted",
                "--script",
                script.to_str().unwrap(),
                "--approve",
                "all",
            ],
        );
        let how = format!("run {file} in {dir}");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{how}: {stderr}");
        // The reference was attached (a failed one is a warning).
        assert!(!stderr.contains("not attached"), "{how}: {stderr}");
        let transcript = std::fs::read_to_string(t.path("proj/sub/x.chat")).unwrap();
        assert_paths_follow_the_conversation(&t, &transcript, &how);
    }
}

#[test]
fn cycle_with_a_relative_file_resolves_every_path_from_the_conversation() {
    for (n, (dir, file)) in SPELLINGS.iter().enumerate() {
        let t = Tree::new(&std::env::temp_dir(), &format!("cycle{n}"));
        std::fs::write(t.path("proj/sub/x.chat"), transcript_with_calls()).unwrap();
        let out = flemma_in(&t.path(dir), &t.path("home"), &["cycle", file]);
        let how = format!("cycle {file} in {dir}");
        assert_eq!(out.status.code(), Some(0), "{how}: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout).lines().last(),
            Some("next: send"),
            "{how}"
        );
        let transcript = std::fs::read_to_string(t.path("proj/sub/x.chat")).unwrap();
        assert_paths_follow_the_conversation(&t, &transcript, &how);
    }
}

#[test]
fn request_with_a_relative_file_attaches_references_from_the_conversation() {
    for (n, (dir, file)) in SPELLINGS.iter().enumerate() {
        let t = Tree::new(&std::env::temp_dir(), &format!("request{n}"));
        std::fs::write(t.path("proj/sub/x.chat"), CHAT).unwrap();
        let out = flemma_in(
            &t.path(dir),
            &t.path("home"),
            &["request", "--provider", "anthropic", file],
        );
        let how = format!("request {file} in {dir}");
        assert_eq!(
            (out.status.code(), text(&out.stderr).as_str()),
            (Some(0), ""),
            "{how}"
        );
        let body: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "Go, and see "},
                // The prompt cache's breakpoint on the latest message.
                {"type": "text", "text": "ref-content\n", "cache_control": {"type": "ephemeral"}},
            ]),
            "{how}"
        );
    }
}

/// A directory outside `/tmp` and `$TMPDIR` (both writable by default, so a test of what is
/// *not* writable cannot live there): cargo's scratch directory for integration tests, else
/// `/var/tmp`.
pub(crate) fn outside_the_temporary_directories() -> PathBuf {
    let temporary: Vec<PathBuf> = ["/tmp".into(), std::env::temp_dir()]
        .iter()
        .filter_map(|p: &PathBuf| p.canonicalize().ok())
        .collect();
    [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/var/tmp"),
    ]
    .into_iter()
    .filter_map(|p| p.canonicalize().ok())
    .find(|p| !temporary.iter().any(|t| p.starts_with(t)))
    .expect("a scratch directory outside /tmp and $TMPDIR")
}

/// The result of each call of a transcript that `cycle` ran: id → (status, content).
fn outcomes(transcript: &str) -> HashMap<String, (Option<String>, String)> {
    flemma::ast::parse(transcript)
        .messages
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

fn tool_use(id: &str, tool: &str, input: &Value) -> String {
    format!("**Tool Use:** `{tool}` (`{id}`)\n\n```json\n{input}\n```\n\n")
}

#[test]
fn a_command_run_from_the_root_directory_cannot_write_outside_the_project() {
    let t = Tree::new(&outside_the_temporary_directories(), "root");
    // An `/etc` of the test's own, outside the project.
    let etc = t.path("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let (by_write, by_bash) = (etc.join("flemma_x"), etc.join("flemma_y"));
    let inside = t.path("proj/inside.txt");
    let chat = t.path("proj/wr.chat");
    let mut text = "@You:\nGo.\n\n@Assistant:\n".to_owned();
    text.push_str(&tool_use(
        "toolu_w",
        "write",
        &json!({"label": "w", "path": by_write, "content": "x"}),
    ));
    text.push_str(&tool_use(
        "toolu_b",
        "bash",
        &json!({"label": "b", "timeout": null,
            "command": format!("echo x > {}", by_bash.display())}),
    ));
    text.push_str(&tool_use(
        "toolu_in",
        "write",
        &json!({"label": "in", "path": inside, "content": "in"}),
    ));
    std::fs::write(&chat, text).unwrap();
    let out = flemma_in(
        Path::new("/"),
        &t.path("home"),
        &["cycle", chat.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", crate::text(&out.stderr));
    let outcomes = outcomes(&std::fs::read_to_string(&chat).unwrap());
    assert_eq!(
        outcomes["toolu_w"],
        (
            Some("error".to_owned()),
            format!(
                "Sandbox: write denied – path is outside writable directories: {}",
                by_write.display()
            )
        )
    );
    assert_eq!(
        outcomes["toolu_b"],
        (
            Some("error".to_owned()),
            format!(
                "bash: line 1: {}: Read-only file system\n\nCommand exited with code 1",
                by_bash.display()
            )
        )
    );
    assert!(!by_write.exists() && !by_bash.exists());
    // Inside the project the same write works.
    assert_eq!(outcomes["toolu_in"].0, None);
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "in");
}

#[test]
fn approval_explain_prints_the_writable_set_of_the_file() {
    let t = Tree::new(&outside_the_temporary_directories(), "explain");
    let chat = t.path("proj/wr.chat");
    std::fs::write(&chat, "@You:\nhi\n").unwrap();
    // Run from `/`: the project, the caches under HOME and /tmp; not `/`.
    let out = flemma_in(
        Path::new("/"),
        &t.path("home"),
        &[
            "approval",
            "explain",
            chat.to_str().unwrap(),
            "--tool",
            "write",
            "--json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", crate::text(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let home = t.path("home");
    let mut writable = vec![
        home.join(".cache"),
        home.join(".local/share"),
        t.path("proj"),
        Path::new("/tmp").canonicalize().unwrap(),
    ];
    writable.sort();
    // The read-only paths (tested in `protect`): the chat, what the host or git runs or reads
    // in its project, the store's bookkeeping, and `./flemma.toml` of `/`.
    let project = t.path("proj");
    let mut read_only = vec![chat.clone()];
    read_only.extend(
        [
            ".git",
            ".claude",
            "flemma.toml",
            ".flemma/agents",
            ".flemma-project",
            ".flemma/wr.chat/calls",
            ".flemma/wr.chat/jobs",
            ".flemma/wr.chat/usage.jsonl",
        ]
        .map(|p| project.join(p)),
    );
    read_only.push(std::path::PathBuf::from("/flemma.toml"));
    assert_eq!(
        json["writable"],
        json!({"enforced": true, "paths": writable, "read_only": read_only})
    );
    // And in words.
    let out = flemma_in(
        Path::new("/"),
        &t.path("home"),
        &[
            "approval",
            "explain",
            chat.to_str().unwrap(),
            "--tool",
            "write",
        ],
    );
    let listed = writable.iter().fold(String::new(), |mut text, p| {
        let _ = writeln!(text, "  {}", p.display());
        text
    });
    assert!(
        crate::text(&out.stdout).contains(&format!(
            "writable: tools may write only under\n{listed}read-only: "
        )),
        "{}",
        crate::text(&out.stdout)
    );
}

#[test]
fn a_command_run_from_home_or_the_projects_parent_cannot_write_home() {
    for (n, cwd) in ["", "home"].iter().enumerate() {
        let t = Tree::new(&outside_the_temporary_directories(), &format!("home{n}"));
        let bashrc = t.path("home/.bashrc");
        std::fs::write(&bashrc, "# rc\n").unwrap();
        let chat = t.path("proj/h.chat");
        let mut text = "@You:\nGo.\n\n@Assistant:\n".to_owned();
        text.push_str(&tool_use(
            "toolu_b",
            "bash",
            &json!({"label": "b", "timeout": null, "command": "echo evil >> ~/.bashrc"}),
        ));
        text.push_str(&tool_use(
            "toolu_w",
            "write",
            &json!({"label": "w", "path": "~/.bashrc", "content": "evil"}),
        ));
        std::fs::write(&chat, text).unwrap();
        let out = flemma_in(
            &t.path(cwd),
            &t.path("home"),
            &["cycle", chat.to_str().unwrap()],
        );
        let how = format!("run in {:?}", t.path(cwd));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{how}: {}",
            crate::text(&out.stderr)
        );
        let outcomes = outcomes(&std::fs::read_to_string(&chat).unwrap());
        assert_eq!(
            outcomes["toolu_b"],
            (
                Some("error".to_owned()),
                format!(
                    "bash: line 1: {}: Read-only file system\n\nCommand exited with code 1",
                    bashrc.display()
                )
            ),
            "{how}"
        );
        assert_eq!(
            outcomes["toolu_w"],
            (
                Some("error".to_owned()),
                "Sandbox: write denied – path is outside writable directories: ~/.bashrc"
                    .to_owned()
            ),
            "{how}"
        );
        assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# rc\n", "{how}");
    }
}
