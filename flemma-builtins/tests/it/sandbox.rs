//! The sandbox (spec §14): backend selection and its messages, bubblewrap's exact command
//! line and availability errors, and commands run under the real bubblewrap.
//!
//! The real-bubblewrap tests need `bwrap` installed and a kernel that lets this user create
//! namespaces; where either is missing they fail with the reason (CI installs bubblewrap).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use flemma_builtins::Bwrap;
use flemma_config::{Config, SandboxOptions};
use flemma_core::ToolOutput;
use flemma_core::sandbox::{
    PassThrough, SandboxBackend, SandboxBackends, SandboxError, SandboxPolicy,
};
use serde_json::json;

use crate::bash::{Call, assert_none_left, escapees, scratch, wait_until_running};

fn options() -> SandboxOptions {
    Config::new().options().unwrap().sandbox
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn bwrap_argv_is_pinned() {
    let a = scratch("argv-a");
    let b = scratch("argv-b");
    let mut options = options();
    options.backends.bwrap.path = "/opt/bin/bwrap".into();
    options.backends.bwrap.extra_args = strings(&["--setenv", "X", "1"]);
    let policy = SandboxPolicy {
        conversation: None,
        rw_paths: vec![
            a.to_path_buf(),
            b.to_path_buf(),
            PathBuf::from("/nonexistent/flemma/dir"),
        ],
        network: true,
        allow_privileged: false,
        read_only: vec![],
    };
    let argv = Bwrap
        .wrap(&policy, &options, strings(&["bash", "-c", "echo hi"]))
        .unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    assert_eq!(
        argv,
        strings(&[
            "/opt/bin/bwrap",
            "--ro-bind",
            "/",
            "/",
            "--bind",
            a,
            a,
            "--bind",
            b,
            b,
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-uts",
            "--unshare-ipc",
            "--share-net",
            "--die-with-parent",
            "--new-session",
            "--setenv",
            "X",
            "1",
            "bash",
            "-c",
            "echo hi",
        ])
    );

    let policy = SandboxPolicy {
        conversation: None,
        rw_paths: vec![],
        network: false,
        allow_privileged: true,
        read_only: vec![],
    };
    options.backends.bwrap.extra_args.clear();
    let argv = Bwrap.wrap(&policy, &options, strings(&["true"])).unwrap();
    assert_eq!(
        argv.join(" "),
        "/opt/bin/bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --unshare-uts \
         --unshare-ipc --unshare-net --die-with-parent --new-session true"
    );
}

#[test]
fn bwrap_availability_errors() {
    let mut options = options();
    options.backends.bwrap.path = "/nonexistent/bwrap".into();
    assert_eq!(
        Bwrap.available(&options).unwrap_err().to_string(),
        "bubblewrap (bwrap) not found at '/nonexistent/bwrap'. Install it (e.g. apt install bubblewrap) or set sandbox.backends.bwrap.path."
    );
    // A file that is not executable is not a bwrap either.
    let dir = scratch("not-executable");
    let file = dir.join("bwrap");
    std::fs::write(&file, "").unwrap();
    options.backends.bwrap.path = file.to_str().unwrap().to_owned();
    assert!(
        Bwrap
            .available(&options)
            .unwrap_err()
            .to_string()
            .starts_with("bubblewrap (bwrap) not found at '")
    );
    // On PATH by name.
    options.backends.bwrap.path = "no-such-bwrap-binary".into();
    assert!(Bwrap.available(&options).is_err());
}

/// A backend for selection tests.
#[derive(Debug)]
struct Fake {
    name: &'static str,
    available: bool,
}

impl SandboxBackend for Fake {
    fn name(&self) -> &str {
        self.name
    }

    fn available(&self, _options: &SandboxOptions) -> Result<(), SandboxError> {
        if self.available {
            Ok(())
        } else {
            Err(SandboxError::new(format!("{} is not here", self.name)))
        }
    }

    fn wrap(
        &self,
        _policy: &SandboxPolicy,
        _options: &SandboxOptions,
        mut argv: Vec<String>,
    ) -> Result<Vec<String>, SandboxError> {
        argv.insert(0, self.name.to_owned());
        Ok(argv)
    }
}

fn fake(name: &'static str, available: bool) -> Arc<dyn SandboxBackend> {
    Arc::new(Fake { name, available })
}

fn selected(
    backends: &SandboxBackends,
    options: &SandboxOptions,
) -> Result<Option<String>, String> {
    backends
        .select(options)
        .map(|b| b.map(|b| b.name().to_owned()))
        .map_err(|e| e.to_string())
}

#[test]
fn selection_by_priority_then_name() {
    let mut backends = SandboxBackends::new();
    backends.register(fake("zeta", true), 10).unwrap();
    backends.register(fake("beta", true), 60).unwrap();
    backends.register(fake("alpha", true), 60).unwrap();
    backends.register(fake("top", false), 90).unwrap();
    assert_eq!(
        backends.names(),
        [
            ("top".into(), 90),
            ("alpha".into(), 60),
            ("beta".into(), 60),
            ("zeta".into(), 10)
        ]
    );
    let mut options = options();
    assert_eq!(selected(&backends, &options), Ok(Some("alpha".into())));
    options.backend = "required".into();
    assert_eq!(selected(&backends, &options), Ok(Some("alpha".into())));
    options.backend = "zeta".into();
    assert_eq!(selected(&backends, &options), Ok(Some("zeta".into())));
    options.backend = "top".into();
    assert_eq!(selected(&backends, &options), Err("top is not here".into()));
    options.backend = "nope".into();
    assert_eq!(
        selected(&backends, &options),
        Err("Unknown sandbox backend: nope".into())
    );
    assert_eq!(
        backends
            .register(fake("alpha", true), 1)
            .unwrap_err()
            .to_string(),
        "Sandbox backend already registered: alpha"
    );
}

#[test]
fn no_backend_runs_unsandboxed() {
    let mut backends = SandboxBackends::new();
    backends.register(fake("gone", false), 50).unwrap();
    let mut options = options();
    for mode in ["auto", "required"] {
        options.backend = mode.into();
        assert_eq!(selected(&backends, &options), Ok(None));
        assert!(!backends.is_available(&options));
        let sandbox = backends.sandbox(&options, policy(vec![]));
        assert!(!sandbox.is_enabled());
        assert_eq!(sandbox.wrap_command(strings(&["ls"])), Ok(strings(&["ls"])));
    }
}

fn policy(rw_paths: Vec<PathBuf>) -> SandboxPolicy {
    SandboxPolicy {
        conversation: None,
        rw_paths,
        network: true,
        allow_privileged: false,
        read_only: vec![],
    }
}

#[test]
fn sandbox_from_the_selection() {
    let mut backends = SandboxBackends::new();
    backends.register(Arc::new(PassThrough), 50).unwrap();
    backends.register(fake("wrapper", true), 60).unwrap();
    let mut options = options();
    let sandbox = backends.sandbox(&options, policy(vec!["/tmp".into()]));
    assert_eq!(
        sandbox.wrap_command(strings(&["ls"])),
        Ok(strings(&["wrapper", "ls"]))
    );
    assert!(!sandbox.is_path_writable(std::path::Path::new("/etc/x"), std::path::Path::new("/")));

    // An explicit backend that cannot be used: every wrap fails with the reason.
    options.backend = "missing".into();
    let sandbox = backends.sandbox(&options, policy(vec![]));
    assert!(sandbox.is_enabled());
    assert_eq!(
        sandbox
            .wrap_command(strings(&["ls"]))
            .unwrap_err()
            .to_string(),
        "Unknown sandbox backend: missing"
    );

    // Disabled: commands as given.
    options.enabled = false;
    assert!(!backends.sandbox(&options, policy(vec![])).is_enabled());
}

#[tokio::test]
async fn bash_reports_a_sandbox_error() {
    let mut call = Call::new("sandbox-error");
    let mut options = options();
    options.backend = "firejail".into();
    call.sandbox = flemma_builtins::sandbox_backends().sandbox(&options, policy(vec![]));
    assert_eq!(
        call.command("echo hi").await,
        ToolOutput::error("Sandbox error: Unknown sandbox backend: firejail")
    );
}

/// bubblewrap must be installed and able to create its namespaces here; fails loudly with the
/// reason otherwise.
fn require_bwrap() {
    let options = options();
    if let Err(error) = Bwrap.available(&options) {
        panic!("bubblewrap is required by this test and is not available: {error}");
    }
    let argv = Bwrap
        .wrap(&policy(vec![]), &options, strings(&["true"]))
        .unwrap();
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bubblewrap cannot create its namespaces on this machine ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// A call sandboxed by the real bubblewrap, `dir` writable.
pub(crate) fn sandboxed(name: &str, network: bool) -> Call {
    require_bwrap();
    let mut call = Call::new(name);
    let options = options();
    let mut policy = policy(vec![call.dir.to_path_buf()]);
    policy.network = network;
    call.sandbox = flemma_builtins::sandbox_backends().sandbox(&options, policy);
    assert!(call.sandbox.is_enabled());
    call
}

#[tokio::test]
async fn bwrap_writes_inside_rw_paths_only() {
    let call = sandboxed("bwrap-write", true);
    let inside = call.dir.join("inside.txt");
    assert_eq!(
        call.command(&format!(
            "echo ok > {} && cat {}",
            inside.display(),
            inside.display()
        ))
        .await,
        ToolOutput::text("ok")
    );
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "ok\n");

    let elsewhere = scratch("bwrap-outside");
    let outside = elsewhere.join("outside.txt");
    let out = call
        .command(&format!("echo no > {}", outside.display()))
        .await;
    assert_eq!(
        out,
        ToolOutput::error(format!(
            "bash: line 1: {}: Read-only file system\n\nCommand exited with code 1",
            outside.display()
        ))
    );
    assert!(!outside.exists());
}

#[tokio::test]
async fn bwrap_without_network_cannot_connect() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");

    let call = sandboxed("bwrap-net-on", true);
    assert_eq!(call.command(&connect).await, ToolOutput::text("connected"));

    let call = sandboxed("bwrap-net-off", false);
    let out = call.command(&connect).await;
    match &out {
        ToolOutput::Failure { error, .. } => {
            assert!(
                error.contains("Connection refused") || error.contains("Network is unreachable"),
                "{error}"
            );
            assert!(error.ends_with("Command exited with code 1"), "{error}");
        }
        ToolOutput::Success(_) => panic!("connected without network: {out:?}"),
    }
    drop(listener);
}

#[tokio::test]
async fn bwrap_proc_shows_only_the_sandbox() {
    let call = sandboxed("bwrap-proc", true);
    let out = call
        .command("cat /proc/1/comm; for p in /proc/[0-9]*; do echo ${p#/proc/}; done | sort -n | tr '\\n' ' '")
        .await;
    let ToolOutput::Success(output) = &out else {
        panic!("{out:?}")
    };
    let text = output.to_text();
    let (init, pids) = text.split_once('\n').unwrap();
    assert_eq!(init, "bwrap");
    let pids: Vec<u32> = pids
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    // bwrap's init, the shell, the loop's subshells: a handful, numbered from 1.
    assert!(pids.len() <= 6 && pids.iter().all(|&p| p < 20), "{pids:?}");
    assert!(!pids.contains(&std::process::id()) || std::process::id() < 20);
}

#[tokio::test]
async fn bwrap_escapees_die_with_the_sandbox() {
    let call = sandboxed("bwrap-orphans", true);
    let (command, durations) = escapees(std::process::id() % 1000 + 777_000);
    let command = format!("{command}; sleep 1000");
    let run = call.run(json!({"label": "t", "command": command, "timeout": 3}));
    let (out, ()) = tokio::join!(run, wait_until_running(&durations));
    assert_eq!(
        out,
        ToolOutput::error("started\n\nCommand timed out after 3 seconds.")
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_none_left(&durations);
}

/// Not in the spec: the read-only files inside a writable path come after the writable binds,
/// each directory between the two bound onto itself first (so it cannot be renamed away),
/// then the file read-only; a file outside every writable path or missing adds nothing.
#[test]
fn bwrap_binds_read_only_files_after_the_writable_paths() {
    let root = scratch("argv-ro");
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    for file in ["a/b/x.chat", "a/b/y.toml", "top.toml"] {
        std::fs::write(root.join(file), "").unwrap();
    }
    let options = options();
    let policy = SandboxPolicy {
        conversation: None,
        rw_paths: vec![root.to_path_buf()],
        read_only: vec![
            root.join("a/b/x.chat"),
            root.join("a/b/y.toml"),
            root.join("top.toml"),
            root.join("missing.toml"),
            PathBuf::from("/etc/hostname"),
        ],
        network: true,
        allow_privileged: false,
    };
    let argv = Bwrap.wrap(&policy, &options, strings(&["true"])).unwrap();
    let p = |rel: &str| {
        if rel.is_empty() {
            root.display().to_string()
        } else {
            root.join(rel).display().to_string()
        }
    };
    let binds = [
        ("--bind", p("")),
        ("--bind", p("a")),
        ("--bind", p("a/b")),
        ("--ro-bind", p("a/b/x.chat")),
        ("--ro-bind", p("a/b/y.toml")),
        ("--ro-bind", p("top.toml")),
    ]
    .iter()
    .map(|(op, path)| format!("{op} {path} {path}"))
    .collect::<Vec<_>>()
    .join(" ");
    assert_eq!(
        argv.join(" "),
        format!(
            "bwrap --ro-bind / / {binds} --dev /dev --proc /proc --unshare-user --unshare-pid \
             --unshare-uts --unshare-ipc --share-net --die-with-parent --new-session true"
        )
    );
}

/// The conversation's file (symlinks resolved) and the host's files are the policy's
/// read-only files; they are refused with the sandbox on or off, also through a symbolic or
/// hard link; `protect_conversation = false` gives the spec's policy (none).
#[test]
fn the_conversation_and_the_hosts_files_are_read_only_sandboxed_or_not() {
    let root = scratch("read-only");
    std::fs::create_dir_all(root.join("notes")).unwrap();
    let chat = root.join("notes/x.chat");
    std::fs::write(&chat, "@You:\nhi\n").unwrap();
    std::fs::write(root.join("flemma.toml"), "").unwrap();
    let link = root.join("notes/link.chat");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("x.chat", &link).unwrap();
    let hard = root.join("hard.chat");
    let _ = std::fs::remove_file(&hard);
    std::fs::hard_link(&chat, &hard).unwrap();

    let mut options = options();
    options.policy.rw_paths = vec![root.display().to_string()];
    let policy = SandboxPolicy::for_conversation(&options, Some(&link), None)
        .protecting(&options, [root.join("flemma.toml")]);
    // The chat, what the host or git runs or reads in its project (here its directory: no
    // repository holds it), and the options file.
    let project = root.join("notes");
    let mut expected = vec![chat.clone()];
    expected.extend(
        [
            ".git",
            ".claude",
            "flemma.toml",
            ".flemma/agents",
            ".flemma-project",
        ]
        .map(|p| project.join(p)),
    );
    expected.push(root.join("flemma.toml"));
    assert_eq!(policy.read_only, expected);

    let mut backends = SandboxBackends::new();
    backends.register(Arc::new(PassThrough), 50).unwrap();
    for enabled in [true, false] {
        options.enabled = enabled;
        let sandbox = backends.sandbox(&options, policy.clone());
        assert_eq!(sandbox.is_enabled(), enabled);
        let dir = root.join("notes");
        for path in [
            "x.chat",
            "./x.chat",
            "../notes/x.chat",
            "link.chat",
            "../hard.chat",
            "../flemma.toml",
        ] {
            let path = std::path::Path::new(path);
            assert!(
                !sandbox.is_path_writable(path, &dir),
                "{enabled}: {}",
                path.display()
            );
            assert!(sandbox.read_only_file(path, &dir).is_some());
        }
        assert!(sandbox.is_path_writable(std::path::Path::new("y.chat"), &dir));
        assert!(sandbox.save_to_check().is_some());
    }

    options.policy.protect_conversation = false;
    let spec = SandboxPolicy::for_conversation(&options, Some(&link), None)
        .protecting(&options, [root.join("flemma.toml")]);
    assert!(spec.read_only.is_empty());
    options.enabled = false;
    let sandbox = backends.sandbox(&options, spec);
    assert!(sandbox.is_path_writable(&chat, &root));
    assert!(sandbox.save_to_check().is_none());
}
