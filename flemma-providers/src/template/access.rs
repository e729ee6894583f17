//! Which files templates and `@./file` references may read, and the paths they name.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use super::TemplateError;

/// Which files `include()` and `@./file` references may read.
///
/// A transcript decides what it references, and so does any file the model `read`s (its
/// result is a template): a `{{ include("/proc/self/environ") }}` in a file of the project
/// would send the host's environment to the provider. [`FileAccess::Project`] (the default)
/// keeps reads inside the conversation's project, [`FileAccess::Within`] under chosen
/// directories, [`FileAccess::None`] refuses them all, [`FileAccess::Any`] is the reference
/// implementation's behaviour. Symbolic links are resolved before the check, so a link in the
/// project that points outside it is refused. A refused reference stays text, with a warning;
/// a refused `include()` is a template error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAccess {
    /// Any file the process can read (the reference implementation's behaviour).
    Any,
    /// Files inside the conversation's project ([`flemma_config::project_root`] of the
    /// conversation file's resolved directory) or under one of these directories (the store,
    /// `templates.allowed_roots`). A conversation without a file has no project: only the
    /// directories given.
    Project(Vec<PathBuf>),
    /// Files under one of these directories only.
    Within(Vec<PathBuf>),
    /// No file.
    None,
}

impl Default for FileAccess {
    /// [`FileAccess::Project`] with no other directory.
    fn default() -> Self {
        FileAccess::Project(Vec::new())
    }
}

impl FileAccess {
    /// Files under `root` only.
    pub fn within(root: impl Into<PathBuf>) -> Self {
        FileAccess::Within(vec![root.into()])
    }

    /// The access `templates.*` asks for: `"project"` is [`FileAccess::Project`] with the
    /// store directory and `templates.allowed_roots` (`~/` expanded), `"any"` is
    /// [`FileAccess::Any`], `"none"` is [`FileAccess::None`].
    ///
    /// ```
    /// use flemma_providers::FileAccess;
    ///
    /// let options = flemma_config::Config::new().options()?;
    /// let store = std::path::Path::new("/srv/store");
    /// assert_eq!(
    ///     FileAccess::from_options(&options.templates, Some(store)),
    ///     FileAccess::Project(vec![store.to_owned()])
    /// );
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn from_options(options: &flemma_config::TemplatesOptions, store: Option<&Path>) -> Self {
        match options.file_access {
            flemma_config::FileAccessMode::Any => FileAccess::Any,
            flemma_config::FileAccessMode::None => FileAccess::None,
            _ => FileAccess::Project(
                store
                    .map(Path::to_owned)
                    .into_iter()
                    .chain(
                        options
                            .allowed_roots
                            .iter()
                            .map(|root| expand_home(Path::new(root))),
                    )
                    .collect(),
            ),
        }
    }

    /// The directories of `Project` and `Within`, resolved once (symbolic links followed) for
    /// the conversation at `chat_path`.
    pub(super) fn resolved(self, chat_path: Option<&Path>) -> Self {
        let resolve = |roots: Vec<PathBuf>| -> Vec<PathBuf> {
            roots
                .into_iter()
                .map(|root| std::fs::canonicalize(&root).unwrap_or_else(|_| normalize(&root)))
                .collect()
        };
        match self {
            FileAccess::Within(roots) => FileAccess::Within(resolve(roots)),
            FileAccess::Project(roots) => {
                let mut roots = resolve(roots);
                // A conversation not saved yet has its directory.
                let dir = |chat: PathBuf| {
                    flemma_config::conversation_dir(&chat).or_else(|_| {
                        let parent = chat.parent().filter(|p| !p.as_os_str().is_empty());
                        std::fs::canonicalize(parent.unwrap_or(Path::new(".")))
                    })
                };
                if let Some(dir) = chat_path.map(expand_home).and_then(|chat| dir(chat).ok()) {
                    roots.insert(0, flemma_config::project_root(&dir));
                }
                FileAccess::Within(roots)
            }
            other => other,
        }
    }

    /// Whether `path` may be read; `lookups` remembers the directories found missing.
    pub(super) fn check(&self, path: &Path, lookups: &mut Lookups) -> Result<(), TemplateError> {
        let denied = || TemplateError::Denied {
            path: path.to_owned(),
        };
        match self {
            FileAccess::Any => Ok(()),
            FileAccess::None => Err(denied()),
            // The roots were made canonical when the scope was built.
            // No directory to be inside: every path is refused, whatever the file system
            // says (the decision `inside` below reaches for any answer of `canonicalize`).
            FileAccess::Within(roots) | FileAccess::Project(roots) if roots.is_empty() => {
                Err(denied())
            }
            FileAccess::Within(roots) | FileAccess::Project(roots) => {
                let inside = |p: &Path| roots.iter().any(|root| p.starts_with(root));
                match lookups.canonicalize(path) {
                    Ok(real) if inside(&real) => Ok(()),
                    // A missing file under a root is reported as missing, not as denied
                    // (`path` comes from `Scope::resolve`: `.` and `..` are folded already).
                    Err(source) if inside(path) => Err(TemplateError::Read {
                        path: path.to_owned(),
                        source,
                    }),
                    _ => Err(denied()),
                }
            }
        }
    }
}

/// A map keyed by the bytes of paths (foldhash: the keys come from one build and are hashed
/// once per reference). Bytes rather than `Path`s: a `Path` hashes component by component,
/// which showed in profiles; the paths looked up are folded by [`normalize`] (or come from
/// `canonicalize`), so equal paths have equal bytes.
type PathMap<V> = HashMap<Box<[u8]>, V, foldhash::fast::RandomState>;

/// The bytes a [`PathMap`] is keyed by.
fn key(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

/// What a build learnt about the file system: the directories found missing, and the real
/// paths of those that exist. One failed `stat` of `src/` answers every reference under it,
/// and a reference in a directory already resolved costs one `lstat` of the file, instead of
/// a `canonicalize` (a `getcwd` and a `readlink` per path component) per reference. Kept for
/// one build only: a file may appear between two requests, and a build sees the files as they
/// are when it looks.
#[derive(Default)]
pub(crate) struct Lookups {
    /// Directory → the error its `canonicalize` gave (a "not found").
    missing: PathMap<i32>,
    /// Directory → its real path (symbolic links resolved).
    real: PathMap<PathBuf>,
}

impl Lookups {
    /// What `std::fs::canonicalize(path)` gives: the real path, or the error (a "not found"
    /// when a directory on the way, or the file, is missing).
    fn canonicalize(&mut self, path: &Path) -> std::io::Result<PathBuf> {
        let Some((parent, name)) = parent_and_name(path) else {
            return std::fs::canonicalize(path);
        };
        if !self.real.contains_key(key(parent)) {
            if !self.missing.is_empty()
                && let Some(code) = parent
                    .ancestors()
                    .find_map(|dir| self.missing.get(key(dir)).copied())
            {
                return Err(std::io::Error::from_raw_os_error(code));
            }
            match std::fs::canonicalize(parent) {
                Ok(real) => {
                    self.real.insert(key(parent).into(), real);
                }
                Err(err) => {
                    if err.kind() == std::io::ErrorKind::NotFound
                        && let Some(code) = err.raw_os_error()
                    {
                        self.missing.insert(key(parent).into(), code);
                    }
                    return Err(err);
                }
            }
        }
        let Some(real_parent) = self.real.get(key(parent)) else {
            return std::fs::canonicalize(path);
        };
        let candidate = join(real_parent, name);
        // In a resolved directory, a file that is not a symbolic link is its own real path;
        // a link (or anything unexpected) is resolved in full.
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if !meta.file_type().is_symlink() => Ok(candidate),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(err),
            _ => std::fs::canonicalize(path),
        }
    }
}

/// The directory of `path` (not empty) and its last name (a name, not `.` or `..`): on Unix
/// split at the last `/` (what `Path::parent` and `Path::file_name` give for a folded
/// path, without parsing its components), elsewhere with those.
fn parent_and_name(path: &Path) -> Option<(&Path, &OsStr)> {
    #[cfg(unix)]
    if let Some(text) = path.to_str() {
        let at = memchr::memrchr(b'/', text.as_bytes())?;
        let name = &text[at + 1..];
        if !matches!(name, "" | "." | "..") {
            let parent = if at == 0 { "/" } else { &text[..at] };
            return Some((Path::new(parent), OsStr::new(name)));
        }
    }
    Some((
        path.parent().filter(|p| !p.as_os_str().is_empty())?,
        path.file_name()?,
    ))
}

/// `dir/name`, `name` being one name.
fn join(dir: &Path, name: &OsStr) -> PathBuf {
    let dir = dir.as_os_str();
    let mut joined = OsString::with_capacity(dir.len() + 1 + name.len());
    joined.push(dir);
    if !dir.as_encoded_bytes().ends_with(b"/") {
        joined.push(std::path::MAIN_SEPARATOR_STR);
    }
    joined.push(name);
    PathBuf::from(joined)
}

/// `~` and `~/…` with the home directory; other paths as they are.
pub(super) fn expand_home(path: &Path) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    match path.strip_prefix("~") {
        Ok(rest) => home().map_or_else(|| path.to_owned(), |home| home.join(rest)),
        Err(_) => path.to_owned(),
    }
}

/// `.` and `..` folded without touching the file system.
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            // A `..` folds a name, never another `..` (`../../x` stays), and stops at `/`.
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_folds_dots() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("./x")), PathBuf::from("x"));
        assert_eq!(normalize(Path::new("../x")), PathBuf::from("../x"));
        assert_eq!(
            normalize(Path::new("./../../d/x")),
            PathBuf::from("../../d/x")
        );
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(normalize(Path::new(".")), PathBuf::from("."));
    }

    #[test]
    fn lookups_answer_what_canonicalize_answers() {
        let dir = std::env::temp_dir().join(format!("flemma-lookups-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real/sub")).unwrap();
        std::fs::write(dir.join("real/a.txt"), "a").unwrap();
        std::fs::write(dir.join("real/sub/b.txt"), "b").unwrap();
        std::fs::write(dir.join("file"), "f").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.join("real"), dir.join("linked")).unwrap();
            std::os::unix::fs::symlink(dir.join("real/a.txt"), dir.join("real/to_a")).unwrap();
            std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("real/dangling")).unwrap();
        }
        let names = [
            "real/a.txt",
            "real/missing.txt",
            "real/sub/b.txt",
            "real/sub/missing/c.txt",
            "missing/x.txt",
            "missing/deeper/y.txt",
            "file/z.txt",
            "linked/a.txt",
            "linked/sub/b.txt",
            "real/to_a",
            "real/dangling",
            "real/dangling/x",
            "real/sub/../a.txt",
            "real/./a.txt",
            "real//a.txt",
            "real/sub/.",
            "real/sub/..",
            "real/sub/",
        ];
        let mut lookups = Lookups::default();
        // Twice: the second round is answered from what the first learnt.
        for _ in 0..2 {
            for name in names {
                let path = dir.join(name);
                let expected = std::fs::canonicalize(&path);
                let got = lookups.canonicalize(&path);
                match (&expected, &got) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}"),
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}"),
                    _ => panic!("{name}: {expected:?} vs {got:?}"),
                }
            }
        }
        assert!(lookups.missing.contains_key(key(&dir.join("missing"))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
