//! The resolved sandbox policy: which paths a sandboxed call may write.

use std::fmt;
use std::path::{Path, PathBuf};

use flemma_config::SandboxOptions;

/// A resolved policy: absolute, symlink-free writable paths, none under another, and the
/// files tools may not write even there.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxPolicy {
    /// The writable paths, sorted, deduplicated under their parents.
    pub rw_paths: Vec<PathBuf>,
    /// Files and directories tools may not write (nor anything under a directory), wherever
    /// they are and whether or not the sandbox is on (`sandbox.policy.protect_conversation`):
    /// the conversation's file, the options files and hook scripts the host loaded, and in the
    /// conversation's project what the host or the user's tools run or read as configuration
    /// ([`protected_paths`]): absolute, symlinks resolved, without repeats. `write`, `edit` and
    /// `flemma.save_to` refuse them; under bubblewrap those that exist are bound read-only.
    pub read_only: Vec<PathBuf>,
    /// The conversation's own file, when it is one of [`read_only`](Self::read_only). The host
    /// rewrites it (write, then rename over it) while tools run, so bubblewrap does not bind it
    /// read-only: a mount on a file that is renamed over while a sandbox is being set up makes
    /// that setup fail (`Unable to remount destination … with correct flags`), and a running
    /// sandbox loses the mount at the next rename anyway. The file tools still refuse it.
    pub conversation: Option<PathBuf>,
    /// Whether network access is allowed.
    pub network: bool,
    /// Whether the user namespace is kept.
    pub allow_privileged: bool,
}

/// What `urn:flemma:…` entries and `$VAR`s resolve to.
#[derive(Clone)]
pub struct PolicyInputs<'a> {
    /// The process working directory: `urn:flemma:cwd`, and the base of relative entries for
    /// a conversation without a file.
    pub cwd: &'a Path,
    /// The conversation file, if it has one: `urn:flemma:buffer:path` is its directory,
    /// `urn:flemma:project` the project holding it ([`flemma_config::project_root`], with
    /// `HOME` from [`env`](Self::env)), and relative entries are taken against its directory.
    pub chat: Option<&'a Path>,
    /// The store directory (`urn:flemma:store`), if known.
    pub store: Option<&'a Path>,
    /// Environment lookups.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl fmt::Debug for PolicyInputs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyInputs")
            .field("cwd", &self.cwd)
            .field("chat", &self.chat)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl SandboxPolicy {
    /// Resolves `sandbox.policy`: each `rw_paths` entry expanded (URNs, `$VAR`,
    /// `${VAR:-default}`, `~`; unset variables and unknown URNs dropped), made absolute
    /// (relative entries against the conversation's directory, the working directory for a
    /// conversation without a file), symlinks resolved (also for paths that do not exist
    /// yet), sorted, and paths under a kept one dropped.
    ///
    /// `urn:flemma:project` (a default entry in place of the Flemma plugin's `urn:flemma:cwd`) is the
    /// conversation's project: the nearest repository holding its file, else its directory
    /// ([`flemma_config::project_root`]). `urn:flemma:cwd` is the process working directory
    /// and only counts when listed.
    ///
    /// ```
    /// use std::path::Path;
    /// use flemma_core::sandbox::{PolicyInputs, SandboxPolicy};
    ///
    /// let mut options = flemma_config::Config::new().options()?.sandbox;
    /// options.policy.rw_paths = vec!["urn:flemma:cwd".into(), "urn:flemma:cwd/sub".into(), "$UNSET".into()];
    /// let env = |_: &str| None;
    /// let inputs = PolicyInputs { cwd: Path::new("/nonexistent/work"), chat: None, store: None, env: &env };
    /// let policy = SandboxPolicy::resolve(&options, &inputs);
    /// assert_eq!(policy.rw_paths, [Path::new("/nonexistent/work")]);
    ///
    /// // The defaults, run from `/`: the conversation's project (here its directory, as no
    /// // repository holds it), the temporary directory and the caches; not `/`.
    /// let options = flemma_config::Config::new().options()?.sandbox;
    /// let env = |name: &str| (name == "HOME").then(|| "/nonexistent/home".to_owned());
    /// let chat = Path::new("/nonexistent/proj/notes/a.chat");
    /// let inputs = PolicyInputs { cwd: Path::new("/"), chat: Some(chat), store: None, env: &env };
    /// let policy = SandboxPolicy::resolve(&options, &inputs);
    /// assert_eq!(policy.rw_paths, [
    ///     Path::new("/nonexistent/home/.cache"),
    ///     Path::new("/nonexistent/home/.local/share"),
    ///     Path::new("/nonexistent/proj/notes"),
    ///     Path::new("/tmp"),
    /// ]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(options: &SandboxOptions, inputs: &PolicyInputs<'_>) -> Self {
        let base = inputs
            .chat
            .and_then(|chat| real_path(chat).parent().map(Path::to_owned))
            .unwrap_or_else(|| inputs.cwd.to_owned());
        let mut paths: Vec<PathBuf> = options
            .policy
            .rw_paths
            .iter()
            .filter_map(|entry| expand_entry(entry, inputs))
            .map(|path| {
                let absolute = if path.is_absolute() {
                    path
                } else {
                    base.join(path)
                };
                real_path(&normalize(&absolute))
            })
            .collect();
        paths.sort();
        let mut kept: Vec<PathBuf> = Vec::with_capacity(paths.len());
        for path in paths {
            if !kept.iter().any(|k| path.starts_with(k)) {
                kept.push(path);
            }
        }
        let mut policy = Self {
            rw_paths: kept,
            read_only: Vec::new(),
            conversation: None,
            network: options.policy.network,
            allow_privileged: options.policy.allow_privileged,
        };
        if options.policy.protect_conversation
            && let Some(chat) = inputs.chat
        {
            policy.add_read_only(chat);
            policy.conversation = policy.read_only.last().cloned();
            let dir = real_path(chat).parent().map(Path::to_owned);
            let home = (inputs.env)("HOME").map(PathBuf::from);
            if let Some(dir) = dir {
                let project = flemma_config::project_root_with_home(&dir, home.as_deref());
                for path in protected_paths(&project, inputs.store) {
                    policy.add_read_only(&path);
                }
            }
        }
        policy
    }

    /// The policy with these files made read-only too ([`read_only`](Self::read_only)), as
    /// long as `sandbox.policy.protect_conversation` is on: hosts pass the options files
    /// they loaded ([`flemma_config::Config::protected_files`]). Relative paths are taken
    /// against the working directory.
    #[must_use]
    pub fn protecting<P: AsRef<Path>>(
        mut self,
        options: &SandboxOptions,
        files: impl IntoIterator<Item = P>,
    ) -> Self {
        if options.policy.protect_conversation {
            for file in files {
                self.add_read_only(file.as_ref());
            }
        }
        self
    }

    /// Adds one read-only file, resolved.
    fn add_read_only(&mut self, file: &Path) {
        let absolute = std::path::absolute(file).unwrap_or_else(|_| file.to_owned());
        let real = real_path(&normalize(&absolute));
        if !self.read_only.contains(&real) {
            self.read_only.push(real);
        }
    }

    /// The read-only path that covers `path` (made absolute against `cwd`), if any: the same
    /// path or one under a read-only directory once symlinks are resolved, or (on Unix) the
    /// same file through a hard link.
    pub fn read_only_file(&self, path: &Path, cwd: &Path) -> Option<&Path> {
        if self.read_only.is_empty() {
            return None;
        }
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            cwd.join(path)
        };
        let real = real_path(&normalize(&absolute));
        if let Some(found) = self.read_only.iter().find(|p| real.starts_with(p)) {
            return Some(found);
        }
        let target = file_id(&real)?;
        self.read_only
            .iter()
            .find(|p| file_id(p) == Some(target))
            .map(PathBuf::as_path)
    }

    /// The policy of a conversation as the executor resolves it: its file (`chat`, from
    /// `flemma_core::Conversation::path`) and store directory, the process's
    /// working directory (for an explicit `urn:flemma:cwd`) and environment.
    pub fn for_conversation(
        options: &SandboxOptions,
        chat: Option<&Path>,
        store: Option<&Path>,
    ) -> Self {
        let cwd = std::env::current_dir().unwrap_or_default();
        let env = |name: &str| std::env::var(name).ok();
        Self::resolve(
            options,
            &PolicyInputs {
                cwd: &cwd,
                chat,
                store,
                env: &env,
            },
        )
    }

    /// Whether `path` (made absolute against `cwd`, symlinks resolved) is one of the writable
    /// paths or under one, and not a [read-only file](Self::read_only_file).
    pub fn allows_write(&self, path: &Path, cwd: &Path) -> bool {
        if self.read_only_file(path, cwd).is_some() {
            return false;
        }
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            cwd.join(path)
        };
        let real = real_path(&normalize(&absolute));
        self.rw_paths.iter().any(|p| real.starts_with(p))
    }
}

/// What tools may not write in a conversation's `project` and store directory, whether or not
/// it exists yet: what the host or the user's own tools run or read as configuration. A tool
/// that writes one of them runs code outside any sandbox later (a git hook or
/// `core.fsmonitor` on the user's next `git status`, a command hook of `.claude/settings.json`
/// or `flemma.toml` on the next cycle), or forges the host's bookkeeping.
///
/// - `.git` (a directory, or a file naming the repository's directory: that directory and its
///   common directory, for a worktree, too);
/// - `.claude` (Claude Code's settings and hooks, read with `claude_settings = true`),
///   `flemma.toml` and `.flemma/agents` (agent definitions; the default store lives in
///   `.flemma/` next to the conversation, and stays writable), and the
///   [`PROJECT_MARKER`](flemma_config::PROJECT_MARKER) that bounds the project;
/// - the store's bookkeeping: `calls/` (who runs which call), `jobs/` (the job journal) and
///   `usage.jsonl` (what the conversation's requests used and cost).
///
/// ```
/// use std::path::Path;
/// let paths = flemma_core::sandbox::protected_paths(Path::new("/p"), Some(Path::new("/p/.flemma/x.chat")));
/// assert!(paths.contains(&Path::new("/p/.git").to_path_buf()));
/// assert!(paths.contains(&Path::new("/p/.flemma/x.chat/calls").to_path_buf()));
/// ```
pub fn protected_paths(project: &Path, store: Option<&Path>) -> Vec<PathBuf> {
    let mut paths = vec![project.join(".git")];
    if let Ok(text) = std::fs::read_to_string(project.join(".git"))
        && let Some(gitdir) = text.lines().find_map(|l| l.strip_prefix("gitdir:"))
    {
        let gitdir = project.join(gitdir.trim());
        if let Ok(common) = std::fs::read_to_string(gitdir.join("commondir")) {
            paths.push(gitdir.join(common.trim()));
        }
        paths.push(gitdir);
    }
    paths.extend(
        [
            ".claude",
            "flemma.toml",
            ".flemma/agents",
            flemma_config::PROJECT_MARKER,
        ]
        .map(|name| project.join(name)),
    );
    if let Some(store) = store {
        paths.extend(["calls", "jobs", "usage.jsonl"].map(|name| store.join(name)));
    }
    paths
}

/// One `rw_paths` entry expanded; `None` drops it.
fn expand_entry(entry: &str, inputs: &PolicyInputs<'_>) -> Option<PathBuf> {
    if let Some(rest) = entry.strip_prefix("urn:") {
        // A URN, optionally followed by a sub-path: `urn:flemma:cwd/sub`.
        let (urn, sub) = rest.split_once('/').map_or((rest, ""), |(u, s)| (u, s));
        let base: PathBuf = match urn {
            "flemma:cwd" => inputs.cwd.to_owned(),
            "flemma:buffer:path" => real_path(inputs.chat?).parent()?.to_owned(),
            "flemma:project" => {
                let dir = real_path(inputs.chat?).parent()?.to_owned();
                let home = (inputs.env)("HOME").map(PathBuf::from);
                flemma_config::project_root_with_home(&dir, home.as_deref())
            }
            "flemma:store" => inputs.store?.to_owned(),
            _ => return None,
        };
        return Some(if sub.is_empty() { base } else { base.join(sub) });
    }
    let expanded = expand_vars(entry, inputs.env)?;
    Some(expand_tilde(&expanded, inputs.env))
}

/// `$VAR` and `${VAR}` (`None` when unset) and `${VAR:-default}` (the default `~`-expanded).
fn expand_vars(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(braced) = after.strip_prefix('{') {
            let close = braced.find('}')?;
            let inner = &braced[..close];
            let value = match inner.split_once(":-") {
                Some((name, default)) => env(name)
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| expand_tilde(default, env).to_string_lossy().into_owned()),
                None => env(inner)?,
            };
            out.push_str(&value);
            rest = &braced[close + 1..];
        } else {
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if len == 0 {
                out.push('$');
                rest = after;
                continue;
            }
            out.push_str(&env(&after[..len])?);
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    Some(out)
}

/// A path option expanded as the sandbox's paths are (`$VAR`, `${VAR:-default}`, `~`), the
/// variables read through `env`; `None` when a variable is unset.
///
/// ```
/// use flemma_core::sandbox::expand_path;
///
/// let env = |name: &str| (name == "HOME").then(|| "/home/ada".to_owned());
/// assert_eq!(expand_path("~/notes/${DIR:-x}", &env), Some("/home/ada/notes/x".into()));
/// assert_eq!(expand_path("$UNSET/x", &env), None);
/// ```
pub fn expand_path(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let expanded = expand_vars(text, env)?;
    Some(expand_tilde(&expanded, env))
}

/// A leading `~` or `~/` as the home directory (`HOME` read through `env`); other paths as
/// they are.
pub fn expand_tilde(path: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match (path.strip_prefix('~'), env("HOME")) {
        (Some(""), Some(home)) => PathBuf::from(home),
        (Some(rest), Some(home)) if rest.starts_with('/') => PathBuf::from(format!("{home}{rest}")),
        _ => PathBuf::from(path),
    }
}

/// Removes `.` and resolves `..` lexically ([`flemma_config::fold_path`]).
pub(crate) use flemma_config::fold_path as normalize;

/// `path` with its deepest existing ancestor's symlinks resolved and the rest appended.
pub(crate) fn real_path(path: &Path) -> PathBuf {
    let mut existing = path;
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return path.to_owned(),
        }
    }
}

/// The device and inode of an existing file, to see a hard link to a read-only file.
#[cfg(unix)]
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// No inode numbers here: only paths are compared.
#[cfg(not(unix))]
fn file_id(_path: &Path) -> Option<(u64, u64)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_keeps_the_parents_it_cannot_fold() {
        let n = |p: &str| normalize(Path::new(p));
        assert_eq!(n("/a/./b/../c"), PathBuf::from("/a/c"));
        assert_eq!(n("/../x"), PathBuf::from("/x"));
        assert_eq!(n("../x"), PathBuf::from("../x"));
        assert_eq!(n("./../../d/x"), PathBuf::from("../../d/x"));
        assert_eq!(n("a/../../x"), PathBuf::from("../x"));
    }
}
