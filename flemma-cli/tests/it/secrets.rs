//! What tools and templates may not see (issue 17): credentials in the host's environment are
//! not passed to `bash` (foreground, under bubblewrap, in a background job), and a file the
//! model `read`s cannot make the request carry files outside the conversation's project.
//!
//! The variables are set on the `flemma` process (`Command::env`), never on the test process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::scratch::Scratch;
use crate::text;

/// The host environment of every run: three credentials and one harmless variable.
const HOST_ENV: [(&str, &str); 4] = [
    ("ANTHROPIC_API_KEY", "sk-ant-test-a1b2c3"),
    ("MY_TOKEN", "my-token-d4e5f6"),
    ("FOO_SECRET", "foo-secret-g7h8i9"),
    ("HARMLESS_VAR", "harmless-j0k1l2"),
];

/// A fresh directory for one test (the conversation's project).
fn project(test: &str) -> Scratch {
    let dir = Scratch::new(format!("flemma-cli-secrets-{}-{test}", std::process::id()));
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    dir
}

/// `flemma ARGS` with [`HOST_ENV`] added to its environment.
fn flemma(args: &[&str]) -> Output {
    crate::flemma_command()
        .args(args)
        .envs(HOST_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// A conversation whose model asked `bash` to print its environment.
fn env_chat(dir: &Path, background: bool) -> PathBuf {
    let background = if background {
        ", \"flemma.background\": true"
    } else {
        ""
    };
    let chat = format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"require_approval\": false}}}}}}\n```\n\
         @You:\nShow me the environment.\n\n@Assistant:\n\
         **Tool Use:** `bash` (`toolu_env`)\n```json\n\
         {{\"label\": \"env\", \"command\": \"env\", \"timeout\": null{background}}}\n```\n"
    );
    let file = dir.join("env.chat");
    std::fs::write(&file, chat).unwrap();
    file
}

/// Runs `flemma cycle FILE --set …` and returns the transcript after it.
fn cycle(file: &Path, sets: &[&str]) -> String {
    let mut args = vec!["cycle", file.to_str().unwrap()];
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = flemma(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::fs::read_to_string(file).unwrap()
}

/// Which of [`HOST_ENV`]'s values the transcript shows.
fn seen(transcript: &str) -> Vec<&'static str> {
    HOST_ENV
        .iter()
        .filter(|(_, value)| transcript.contains(value))
        .map(|(name, _)| *name)
        .collect()
}

#[test]
fn bash_does_not_see_credentials() {
    let dir = project("foreground");
    let after = cycle(&env_chat(&dir, false), &["sandbox.enabled=false"]);
    assert!(after.contains("**Tool Result:** `toolu_env`"), "{after}");
    assert_eq!(seen(&after), ["HARMLESS_VAR"], "{after}");
    // The variables bash adds itself are still there.
    assert!(after.contains("FLEMMA_TOOLS_STORE_PATH="), "{after}");
    assert!(after.contains("PAGER=cat"), "{after}");
}

#[test]
fn bash_under_bubblewrap_does_not_see_credentials() {
    let dir = project("bwrap");
    let after = cycle(
        &env_chat(&dir, false),
        &["sandbox.enabled=true", "sandbox.backend=bwrap"],
    );
    assert!(after.contains("**Tool Result:** `toolu_env`"), "{after}");
    assert_eq!(seen(&after), ["HARMLESS_VAR"], "{after}");
}

#[test]
fn a_background_job_does_not_see_credentials() {
    let dir = project("background");
    let file = env_chat(&dir, true);
    cycle(&file, &["sandbox.enabled=false"]);
    let out = flemma(&[
        "cycle",
        file.to_str().unwrap(),
        "--wait",
        "--set",
        "sandbox.enabled=false",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(after.contains("**Job Result:**"), "{after}");
    assert_eq!(seen(&after), ["HARMLESS_VAR"], "{after}");
}

#[test]
fn tools_env_readmits_names_and_restores_the_spec() {
    let dir = project("keep");
    let after = cycle(
        &env_chat(&dir, false),
        &[
            "sandbox.enabled=false",
            r#"tools.env.keep=["MY_TOKEN"]"#,
            r#"tools.env.set={"ADDED_VAR": "added-m3n4"}"#,
        ],
    );
    assert_eq!(seen(&after), ["MY_TOKEN", "HARMLESS_VAR"], "{after}");
    assert!(after.contains("ADDED_VAR=added-m3n4"), "{after}");

    let dir = project("spec");
    let after = cycle(
        &env_chat(&dir, false),
        &[
            "sandbox.enabled=false",
            "tools.env.ignore_default_excludes=true",
        ],
    );
    assert_eq!(
        seen(&after),
        [
            "ANTHROPIC_API_KEY",
            "MY_TOKEN",
            "FOO_SECRET",
            "HARMLESS_VAR"
        ]
    );

    // `tools.bash.env` still applies on top of the policy.
    let dir = project("core");
    let after = cycle(
        &env_chat(&dir, false),
        &[
            "sandbox.enabled=false",
            "tools.env.inherit=core",
            r#"tools.bash.env={"BASH_ONLY": "bash-o5p6"}"#,
        ],
    );
    assert_eq!(seen(&after), Vec::<&str>::new(), "{after}");
    assert!(after.contains("BASH_ONLY=bash-o5p6"), "{after}");
    assert!(after.contains("PATH="), "{after}");
}

/// A conversation in a project whose model `read` `docs/notes.txt`: the result (a template,
/// since `read` emits templates) names the process's environment and a file outside the
/// project, and references a file inside it.
fn read_chat(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("inside.txt"), "inside-q7r8").unwrap();
    // `;type=text/plain` makes the environment a text file part (it has NUL bytes).
    let body = "env: @//proc/self/environ;type=text/plain\nhost: {{ include(\"/etc/hostname\") }}\n\
                ok: @./inside.txt";
    let chat = format!(
        "@You:\nRead docs/notes.txt.\n\n@Assistant:\n\
         **Tool Use:** `read` (`toolu_read`)\n```json\n\
         {{\"label\": \"notes\", \"path\": \"docs/notes.txt\", \"offset\": null, \"limit\": null}}\n```\n\n\
         @You:\n**Tool Result:** `toolu_read`\n\n```\n{body}\n```\n"
    );
    let file = dir.join("read.chat");
    std::fs::write(&file, chat).unwrap();
    file
}

fn request(file: &Path, sets: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["request", "--provider", "anthropic", file.to_str().unwrap()];
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = flemma(&args);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_read_result_cannot_send_the_environment_or_files_outside_the_project() {
    let dir = project("request");
    let file = read_chat(&dir);
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    let (code, body, stderr) = request(&file, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(!body.contains(HOST_ENV[0].1), "{body}");
    assert!(!body.contains("HARMLESS_VAR"), "{body}");
    // The refusal says which option widens it.
    assert!(
        stderr.contains("reading '/etc/hostname' is not allowed here")
            && stderr.contains("templates.file_access = \"any\""),
        "{stderr}"
    );
    // The template failed, so the result is sent as written: no file, no hostname.
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let result = &json["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result", "{body}");
    let sent = result["content"].to_string();
    assert!(sent.contains("include(\\\"/etc/hostname\\\")"), "{sent}");

    // Without the include, the file inside the project is attached and environ is not.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("host: {{ include(\"/etc/hostname\") }}\n", "");
    std::fs::write(&file, text).unwrap();
    let (code, body, stderr) = request(&file, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(body.contains("inside-q7r8"), "{body}");
    assert!(!body.contains(HOST_ENV[0].1), "{body}");
    assert!(
        stderr.contains("File reference @//proc/self/environ;type=text/plain not attached")
            && stderr.contains("templates.file_access = \"any\""),
        "{stderr}"
    );

    // `templates.file_access = "any"` is the spec's behaviour.
    let file = read_chat(&dir);
    let (code, body, stderr) = request(&file, &["templates.file_access=any"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(body.contains(hostname.trim()), "{body}");
    assert!(body.contains(HOST_ENV[0].1), "{body}");
    assert!(body.contains("inside-q7r8"), "{body}");
}

#[test]
fn a_symlink_in_the_project_to_a_file_outside_is_refused() {
    let dir = project("symlink");
    let outside = project("symlink-outside");
    std::fs::write(outside.join("secret.txt"), "outside-s9t0").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), dir.join("link.txt")).unwrap();
    let file = dir.join("link.chat");
    std::fs::write(&file, "@You:\nSee @./link.txt.\n").unwrap();
    let (_, body, stderr) = request(&file, &[]);
    assert!(!body.contains("outside-s9t0"), "{body}");
    assert!(
        stderr.contains("File reference @./link.txt not attached: reading")
            && stderr.contains("templates.file_access = \"any\""),
        "{stderr}"
    );
    std::fs::write(&file, "@You:\nSee {{ include(\"link.txt\") }}.\n").unwrap();
    let (_, body, stderr) = request(&file, &[]);
    assert!(!body.contains("outside-s9t0"), "{body}");
    assert!(stderr.contains("link.txt' is not allowed here"), "{stderr}");
    let (code, body, stderr) = request(&file, &["templates.file_access=any"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(body.contains("outside-s9t0"), "{body}");
}

/// `bash` outside the sandbox runs as the host's user, who may read the host's
/// `/proc/<pid>/environ`, unless the host is not dumpable. As root (who may read anything)
/// the test runs the CLI as `nobody` through `setpriv`.
#[cfg(target_os = "linux")]
#[test]
fn bash_cannot_read_the_hosts_environment_through_proc() {
    use std::os::unix::fs::chown;
    let dir = project("proc-environ");
    let chat = "```json\n{\"flemma\": {\"tools\": {\"require_approval\": false}}}\n```\n\
        @You:\nShow me your parent's environment.\n\n@Assistant:\n\
        **Tool Use:** `bash` (`toolu_proc`)\n```json\n\
        {\"label\": \"environ\", \"command\": \"tr '\\\\0' '\\\\n' < /proc/$PPID/environ\", \"timeout\": null}\n```\n";
    let file = dir.join("proc.chat");
    std::fs::write(&file, chat).unwrap();
    let root = rustix::process::geteuid().is_root();
    let mut command = if root {
        for path in [dir.to_path_buf(), dir.join(".git"), file.clone()] {
            chown(path, Some(65534), Some(65534)).unwrap();
        }
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_flemma"));
        command
    } else {
        crate::flemma_command()
    };
    let out = command
        .args([
            "cycle",
            file.to_str().unwrap(),
            "--set",
            "sandbox.enabled=false",
        ])
        .envs(HOST_ENV)
        .env("HOME", &dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(after.contains("**Tool Result:** `toolu_proc`"), "{after}");
    // The read is refused; nothing of the host's environment shows.
    assert_eq!(seen(&after), Vec::<&str>::new(), "{after}");
    assert!(after.contains("Permission denied"), "{after}");
}
