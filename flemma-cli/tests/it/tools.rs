//! `flemma tools`, `cycle`, `approve`, `reject`, `approve-all` on fixture transcripts.

use std::path::PathBuf;

use pretty_assertions::assert_eq;

use crate::scratch::Scratch;
use crate::{flemma, scratch, text};

/// A private copy of a fixture (each test its own, as tests run in parallel).
fn fixture(name: &str, test: &str) -> Scratch {
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tools")
        .join(name);
    scratch(&format!("{test}-{name}"), &std::fs::read(source).unwrap())
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = flemma(args, None);
    (
        out.status.code().unwrap(),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn cycle_places_pending_placeholders_in_one_message_and_says_what_is_next() {
    let file = fixture("pending_and_statuses.chat", "pending");
    let path = file.to_str().unwrap();
    // Without the sandbox (bubblewrap would let the sandbox resolver approve bash), nothing
    // approves these calls: they wait.
    let no_sandbox = ["--set", "sandbox.enabled=false"];
    let (code, stdout, stderr) = run(&[&["cycle", path, "--json"][..], &no_sandbox].concat());
    assert_eq!((code, stderr.as_str()), (0, ""));
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report,
        serde_json::json!({
            "placed": [
                {"id": "toolu_01", "tool": "bash", "status": "pending"},
                {"id": "toolu_02", "tool": "bash", "status": "pending"},
                {"id": "toolu_03", "tool": "bash", "status": "pending"},
            ],
            "completed": [],
            "delivered": [],
            "warnings": [],
            "recovered": {"adopted": [], "finished": [], "lost": [], "elsewhere": []},
            "next": "await_approval",
        })
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(
            "```\n\n@You:\n\n**Tool Result:** `toolu_01` (pending)\n```\n```\n\n\
         **Tool Result:** `toolu_02` (pending)\n```\n```\n\n\
         **Tool Result:** `toolu_03` (pending)\n```\n```\n"
        ),
        "{after}"
    );
    // A second cycle changes nothing.
    let (code, stdout, _) = run(&[&["cycle", path][..], &no_sandbox].concat());
    assert_eq!((code, stdout.as_str()), (0, "next: await_approval\n"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after);

    // Reject one with a reason, approve one, then the rest with approve-all.
    assert_eq!(
        run(&[
            "reject",
            path,
            "toolu_02",
            "--message",
            "Not the build dir."
        ])
        .0,
        0
    );
    assert_eq!(run(&["approve", path, "toolu_01"]).0, 0);
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains("**Tool Result:** `toolu_01` (approved)\n```\n```"),
        "{after}"
    );
    assert!(
        after.contains(
            "**Tool Result:** `toolu_02` (rejected)\n```\nUser feedback: Not the build dir.\n```"
        ),
        "{after}"
    );
    assert_eq!(run(&["approve-all", path]).0, 0);
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("**Tool Result:** `toolu_03` (approved)")
    );
}

/// `flemma reject --message` wraps the reason as `User feedback: <reason>` (seed; spec §15
/// `tool.rejected.feedback`), in the block and in the request; text typed into a
/// `(rejected)` block in the file is sent as written (spec §7.5); no reason is the default.
#[test]
fn a_rejection_reason_reaches_the_model_as_user_feedback() {
    let file = fixture("pending_and_statuses.chat", "feedback");
    let path = file.to_str().unwrap();
    let no_sandbox = ["--set", "sandbox.enabled=false"];
    assert_eq!(run(&[&["cycle", path][..], &no_sandbox].concat()).0, 0);
    let (code, _, stderr) = run(&[
        "reject",
        path,
        "toolu_01",
        "--message",
        "Not the build dir.",
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(run(&["reject", path, "toolu_03"]).0, 0);
    // The user rejects toolu_02 in the file, with words of their own.
    let typed = std::fs::read_to_string(&file).unwrap().replace(
        "**Tool Result:** `toolu_02` (pending)\n```\n```",
        "**Tool Result:** `toolu_02` (rejected)\n```\nI typed this myself.\n```",
    );
    std::fs::write(&file, typed).unwrap();
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(
            "**Tool Result:** `toolu_01` (rejected)\n```\nUser feedback: Not the build dir.\n```\n\n\
             **Tool Result:** `toolu_02` (rejected)\n```\nI typed this myself.\n```\n\n\
             **Tool Result:** `toolu_03` (rejected)\n```\n```\n"
        ),
        "{after}"
    );
    let (code, stdout, _) = run(&[&["cycle", path][..], &no_sandbox].concat());
    assert_eq!(
        (code, stdout.as_str()),
        (
            0,
            "completed toolu_01 bash (error)\ncompleted toolu_02 bash (error)\n\
             completed toolu_03 bash (error)\nnext: send\n"
        )
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(
            "**Tool Result:** `toolu_01` (error)\n```\nUser feedback: Not the build dir.\n```\n\n\
             **Tool Result:** `toolu_02` (error)\n```\nI typed this myself.\n```\n\n\
             **Tool Result:** `toolu_03` (error)\n```\nThis tool has been rejected by the user.\n```\n"
        ),
        "{after}"
    );
    let (code, body, stderr) = run(&["request", path, "--provider", "anthropic"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    let result = |id: &str, text: &str| serde_json::json!({"type": "tool_result", "tool_use_id": id, "content": text, "is_error": true});
    // The prompt cache's breakpoint on the latest message's last block.
    let mut last = result("toolu_03", "This tool has been rejected by the user.");
    last["cache_control"] = serde_json::json!({"type": "ephemeral"});
    assert_eq!(
        body["messages"][2],
        serde_json::json!({"role": "user", "content": [
            result("toolu_01", "User feedback: Not the build dir."),
            result("toolu_02", "I typed this myself."),
            last,
        ]})
    );
}

#[test]
fn user_action_errors_are_the_spec_texts_on_stderr_with_exit_1() {
    let file = fixture("settled_statuses.chat", "errors");
    let path = file.to_str().unwrap();
    let (code, stdout, stderr) = run(&["approve", path, "toolu_99"]);
    assert_eq!(
        (code, stdout.as_str(), stderr),
        (1, "", format!("flemma: {path}: Tool not found: toolu_99\n"))
    );
    // After a cycle the results are final.
    assert_eq!(run(&["cycle", path]).0, 0);
    let (code, _, stderr) = run(&["approve-all", path]);
    assert_eq!(
        (code, stderr),
        (1, format!("flemma: {path}: No pending tools to approve\n"))
    );
    let (code, _, stderr) = run(&["reject", path, "toolu_01"]);
    assert_eq!(
        (code, stderr),
        (
            1,
            format!("flemma: {path}: Tool toolu_01 has already completed\n")
        )
    );
}

#[test]
fn cycle_settles_pasted_and_denied_results() {
    let file = fixture("settled_statuses.chat", "settle");
    let path = file.to_str().unwrap();
    let (code, stdout, _) = run(&["cycle", path]);
    assert_eq!(
        (code, stdout.as_str()),
        (
            0,
            "completed toolu_01 bash (ok)\ncompleted toolu_02 bash (error)\nnext: send\n"
        )
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.ends_with(
            "**Tool Result:** `toolu_01`\n```\na.txt b.txt (I ran it myself)\n```\n\n\
             **Tool Result:** `toolu_02` (error)\n```\nThe tool was denied by a policy.\n```\n"
        ),
        "{after}"
    );
}

#[test]
fn a_missing_file_is_an_io_error() {
    let (code, _, stderr) = run(&["cycle", "/nonexistent/x.chat"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "flemma: cannot read /nonexistent/x.chat: No such file or directory (os error 2)\n"
    );
}

#[test]
fn tools_lists_the_tool_set_as_json_sorted_by_name() {
    let (code, stdout, _) = run(&["tools", "--json"]);
    assert_eq!(code, 0);
    let list: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    for tool in &list {
        for key in ["name", "description", "input_schema", "strict"] {
            assert!(tool.get(key).is_some(), "{key} missing in {tool}");
        }
    }
}

/// The file tools run through `flemma cycle` when the options approve them, one at a time in
/// document order (`max_concurrent = 1`), each result in the spec's format.
#[test]
fn cycle_runs_the_file_tools_in_document_order() {
    let file = fixture("file_tools.chat", "files");
    let path = file.to_str().unwrap();
    let (code, stdout, stderr) = run(&[
        "cycle",
        path,
        "--set",
        r#"tools.auto_approve=["write","edit","read","ls"]"#,
        "--set",
        "tools.max_concurrent=1",
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    let after = std::fs::read_to_string(&file).unwrap();
    let expected = "\
**Tool Result:** `toolu_w`
```
Successfully wrote 18 bytes to notes/todo.txt
```

**Tool Result:** `toolu_e`
```
Successfully replaced text in notes/todo.txt.
```

**Tool Result:** `toolu_r`
```
buy milk
call Ada and Bob
```

**Tool Result:** `toolu_l`
```
todo.txt

[1 entry]
```
";
    assert!(after.ends_with(expected), "{after}");
    let dir = file.parent().unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("notes/todo.txt")).unwrap(),
        "buy milk\ncall Ada and Bob\n"
    );
}

/// grep and find run in process through `flemma cycle`, in the spec's output formats.
#[test]
fn cycle_runs_grep_and_find() {
    let file = fixture("search_tools.chat", "search");
    let dir = file.parent().unwrap();
    std::fs::create_dir_all(dir.join("src/nested")).unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/nested/lib.rs"), "// helllo there\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "hello, but not a source\n").unwrap();
    let path = file.to_str().unwrap();
    let (code, stdout, stderr) = run(&[
        "cycle",
        path,
        "--set",
        r#"tools.auto_approve=["grep","find"]"#,
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    let after = std::fs::read_to_string(&file).unwrap();
    let expected = "\
**Tool Result:** `toolu_g`
```
src/main.rs:2:    println!(\"hello\");
src/nested/lib.rs:1:// helllo there

[2 matches]
```

**Tool Result:** `toolu_f`
```
src/main.rs
src/nested/lib.rs
```
";
    assert!(after.ends_with(expected), "{after}");
}

/// bash runs through `flemma cycle`: output, an exit code, and `(no output)`; unsandboxed
/// here, and under bubblewrap in `cycle_runs_bash_in_the_sandbox`.
#[test]
fn cycle_runs_bash() {
    let file = fixture("bash_tool.chat", "bash");
    let path = file.to_str().unwrap();
    let (code, stdout, stderr) = run(&[
        "cycle",
        path,
        "--set",
        r#"tools.auto_approve=["bash"]"#,
        "--set",
        "sandbox.enabled=false",
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    let after = std::fs::read_to_string(&file).unwrap();
    let expected = "\
**Tool Result:** `toolu_b1`
```
a
b
done
```

**Tool Result:** `toolu_b2` (error)
```
oops

Command exited with code 3
```

**Tool Result:** `toolu_b3`
```
(no output)
```
";
    assert!(after.ends_with(expected), "{after}");
}

/// With the sandbox on (the default) and bubblewrap installed (CI installs it), bash is
/// approved by the sandbox resolver without any `auto_approve` rule, and a write outside the
/// writable paths fails inside the sandbox.
#[test]
fn cycle_runs_bash_in_the_sandbox() {
    let file = fixture("sandboxed_bash.chat", "sandboxed");
    let dir = file.parent().unwrap().canonicalize().unwrap();
    let path = file.to_str().unwrap();
    let (code, stdout, stderr) = run(&["cycle", path, "--json"]);
    assert_eq!((code, stderr.as_str()), (0, ""), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["placed"][0]["status"], "approved",
        "bubblewrap must be installed and able to create namespaces: {report}"
    );
    let after = std::fs::read_to_string(&file).unwrap();
    // Inside the conversation's directory (`urn:flemma:buffer:path`) the write succeeds.
    assert_eq!(
        std::fs::read_to_string(dir.join("inside.txt")).unwrap(),
        "ok\n"
    );
    assert!(
        after.contains("**Tool Result:** `toolu_in`\n```\n(no output)\n```"),
        "{after}"
    );
    // /usr is read-only in the sandbox.
    assert!(
        after.contains("**Tool Result:** `toolu_out` (error)"),
        "{after}"
    );
    assert!(after.contains("Read-only file system"), "{after}");
}

/// `flemma tools` as text: aligned columns with a header, whether each tool is approved
/// without asking, and the description's first sentence.
#[test]
fn tools_as_text_are_aligned_columns_that_say_which_are_auto_approved() {
    let out = flemma(
        &["tools", "--set", "tools.auto_approve=[\"read\", \"ls\"]"],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "NAME                APPROVAL   DESCRIPTION");
    assert!(
        lines.contains(&"read                auto       Read the contents of a file."),
        "{stdout}"
    );
    assert!(
        lines.contains(&"ls                  auto       List directory contents."),
        "{stdout}"
    );
    assert!(
        lines.contains(&"write               ask        Write content to a file."),
        "{stdout}"
    );
    // Every description starts in the same column.
    assert!(
        lines
            .iter()
            .all(|l| l.get(31..32).is_some_and(|c| c != " ")),
        "{stdout}"
    );
}

/// `flemma jobs` of a conversation without background jobs says so.
#[test]
fn jobs_without_jobs_says_so() {
    let chat = crate::scratch("no-jobs.chat", b"@You:\nhi\n");
    let out = flemma(&["jobs", chat.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "no jobs\n");
}

/// The help lists `run` first, a line per command; a misspelled command or flag gets the
/// one meant; a worker's `--approve` offers only what a worker can do.
#[test]
fn the_help_leads_with_run_and_typos_get_a_did_you_mean() {
    let help = text(&flemma(&["--help"], None).stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(commands[0].trim_start().starts_with("run "), "{help}");
    assert!(help.lines().all(|l| l.chars().count() <= 100), "{help}");
    let typo = flemma(&["rum", "x.chat"], None);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        text(&typo.stderr).contains("a similar subcommand exists: 'run'"),
        "{}",
        text(&typo.stderr)
    );
    let flag = flemma(&["run", "x.chat", "--aprove", "none"], None);
    assert!(
        text(&flag.stderr).contains("a similar argument exists: '--approve'"),
        "{}",
        text(&flag.stderr)
    );
    let worker = flemma(&["worker", "--store", "s3://b/p", "--approve", "ask"], None);
    assert_eq!(worker.status.code(), Some(2));
    assert!(
        text(&worker.stderr).contains("[possible values: all, none]"),
        "{}",
        text(&worker.stderr)
    );
}
