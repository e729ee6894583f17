//! The bubblewrap backend.

use std::path::{Path, PathBuf};

use flemma_config::SandboxOptions;

use flemma_core::sandbox::{SandboxBackend, SandboxError, SandboxPolicy};

/// The priority of the [`Bwrap`] backend in [`sandbox_backends`](crate::sandbox_backends).
pub const BWRAP_PRIORITY: i32 = 100;

/// `Bubblewrap sandbox requires Linux …`.
pub(crate) const REQUIRES_LINUX: &str = "Bubblewrap sandbox requires Linux (user namespaces). No sandbox backend is available for this platform.";

/// Runs commands under [bubblewrap](https://github.com/containers/bubblewrap) (`bwrap`): the
/// whole file system read-only except the policy's writable paths, fresh user (unless
/// `allow_privileged`), pid, UTS and IPC namespaces, the network namespace unshared when the
/// policy forbids network access, the sandbox killed with its parent, in a new session.
///
/// The command line is exactly the Flemma plugin's:
///
/// ```
/// use flemma_builtins::Bwrap;
/// use flemma_core::sandbox::{SandboxBackend, SandboxPolicy};
///
/// let options = flemma_config::Config::new().options()?.sandbox;
/// let policy = SandboxPolicy { rw_paths: vec!["/".into()], network: false, allow_privileged: false, ..Default::default() };
/// let argv = Bwrap.wrap(&policy, &options, vec!["bash".into(), "-c".into(), "true".into()])?;
/// assert_eq!(argv.join(" "), "bwrap --ro-bind / / --bind / / --dev /dev --proc /proc --unshare-user \
///     --unshare-pid --unshare-uts --unshare-ipc --unshare-net --die-with-parent --new-session bash -c true");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// After the writable paths come the policy's [read-only paths](SandboxPolicy::read_only) that
/// exist and lie inside one (not in the Flemma plugin): each directory between the writable path and
/// the path as `--bind DIR DIR`, then `--ro-bind PATH PATH` (a directory with everything in
/// it).
///
/// A writable path that does not exist when the command is wrapped is left out (bubblewrap refuses
/// to bind a missing source), so it drops out of the writable list, as in the Flemma plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bwrap;

impl SandboxBackend for Bwrap {
    fn name(&self) -> &'static str {
        "bwrap"
    }

    fn description(&self) -> &'static str {
        "Bubblewrap (Linux namespaces): read-only root, writable policy paths, optional network"
    }

    fn available(&self, options: &SandboxOptions) -> Result<(), SandboxError> {
        if !cfg!(target_os = "linux") {
            return Err(SandboxError::new(REQUIRES_LINUX));
        }
        let path = &options.backends.bwrap.path;
        match find_executable(path) {
            Some(_) => Ok(()),
            None => Err(SandboxError::new(format!(
                "bubblewrap (bwrap) not found at '{path}'. Install it (e.g. apt install bubblewrap) or set sandbox.backends.bwrap.path."
            ))),
        }
    }

    fn wrap(
        &self,
        policy: &SandboxPolicy,
        options: &SandboxOptions,
        argv: Vec<String>,
    ) -> Result<Vec<String>, SandboxError> {
        let bwrap = &options.backends.bwrap;
        let mut out: Vec<String> = Vec::with_capacity(argv.len() + 20 + 3 * policy.rw_paths.len());
        out.push(bwrap.path.clone());
        out.extend(["--ro-bind", "/", "/"].map(String::from));
        let mut bind = |op: &str, path: &Path| {
            let path = path.to_string_lossy().into_owned();
            out.push(op.to_owned());
            out.push(path.clone());
            out.push(path);
        };
        let writable: Vec<&PathBuf> = policy.rw_paths.iter().filter(|p| p.exists()).collect();
        for path in &writable {
            bind("--bind", path);
        }
        // Read-only files inside a writable path, bound over it (later binds win). Each
        // directory between the writable path and the file is bound onto itself first, so it
        // becomes a mount point: it cannot be renamed or removed, which would otherwise
        // move the protected file away and let a new one take its place. The file itself,
        // a mount point, cannot be written, renamed over (EBUSY) or removed.
        let mut made: Vec<PathBuf> = Vec::new();
        let rewritten = policy.conversation.as_ref();
        for file in policy
            .read_only
            .iter()
            .filter(|f| (f.is_file() || f.is_dir()) && Some(*f) != rewritten)
        {
            let Some(root) = writable.iter().find(|w| file.starts_with(w)) else {
                continue;
            };
            let mut dirs: Vec<&Path> = file
                .ancestors()
                .skip(1)
                .take_while(|d| d.starts_with(root) && *d != root.as_path())
                .collect();
            dirs.reverse();
            for dir in dirs {
                if !made.iter().any(|m| m == dir) {
                    bind("--bind", dir);
                    made.push(dir.to_owned());
                }
            }
            bind("--ro-bind", file);
        }
        out.extend(["--dev", "/dev", "--proc", "/proc"].map(String::from));
        if !policy.allow_privileged {
            out.push("--unshare-user".to_owned());
        }
        out.extend(["--unshare-pid", "--unshare-uts", "--unshare-ipc"].map(String::from));
        out.push(
            if policy.network {
                "--share-net"
            } else {
                "--unshare-net"
            }
            .to_owned(),
        );
        out.extend(["--die-with-parent", "--new-session"].map(String::from));
        out.extend(bwrap.extra_args.iter().cloned());
        out.extend(argv);
        Ok(out)
    }
}

/// Whether `path` is a file this user may execute (on Unix, an execute bit is set).
pub(crate) fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// `name` itself when it contains a `/`, else the first executable `name` on `PATH`.
pub(crate) fn find_executable(name: &str) -> Option<PathBuf> {
    if name.is_empty() {
        return None;
    }
    if name.contains('/') {
        let path = PathBuf::from(name);
        return is_executable(&path).then_some(path);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}
