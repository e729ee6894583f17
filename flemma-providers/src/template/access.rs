//! Which files templates and `@./file` references may read, and the paths they name.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

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

    /// Whether the references and `include()` of the conversation at `chat` may read `path`
    /// (absolute): `Ok` when they may, [`TemplateError::Denied`] when the access refuses it,
    /// [`TemplateError::Read`] for a file under an allowed directory that cannot be found.
    ///
    /// ```
    /// use flemma_providers::{FileAccess, TemplateError};
    ///
    /// let dir = std::env::temp_dir();
    /// let chat = dir.join("notes.chat");
    /// let access = FileAccess::within(&dir);
    /// assert!(matches!(
    ///     access.may_read(Some(&chat), std::path::Path::new("/etc/passwd")),
    ///     Err(TemplateError::Denied { .. })
    /// ));
    /// assert!(FileAccess::Any.may_read(Some(&chat), std::path::Path::new("/etc/passwd")).is_ok());
    /// ```
    ///
    /// # Errors
    ///
    /// As above.
    pub fn may_read(&self, chat: Option<&Path>, path: &Path) -> Result<(), TemplateError> {
        self.clone()
            .resolved(chat)
            .check(path, &mut Lookups::default())
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

/// How many references look into a directory before it is listed.
const LIST_AFTER: u32 = 8;
/// The most names a listed directory may have (a larger one is not listed).
const MAX_LISTED: usize = 4096;

/// What a build learnt about the file system: the directories found missing, the real paths
/// of those that exist and, for a directory many references look into, its names. One
/// failed `stat` of `src/` answers every reference under it, a reference in a directory
/// already resolved costs one `lstat` of the file instead of a `canonicalize` (a `getcwd` and
/// a `readlink` per path component), and once the directory is listed, none. Kept for one
/// build only: a file may appear between two requests, and a build sees the files as they
/// are when it looks (a file created in a directory after the build listed it is not seen
/// until the next build, as a directory created after the build found it missing is not).
#[derive(Default)]
pub(crate) struct Lookups {
    /// Directory → the error its `canonicalize` gave (a "not found").
    missing: PathMap<i32>,
    /// Directory → what is known of it.
    real: PathMap<Dir>,
}

/// A directory found to exist.
struct Dir {
    /// Its real path (symbolic links resolved).
    real: PathBuf,
    /// How many references looked into it.
    looked: u32,
    /// Whether it was listed (or tried to be).
    listed: bool,
    /// Its names when listed: name → whether it is a symbolic link.
    names: Option<PathMap<bool>>,
    /// The names, ASCII-lowercased: a name missing from `names` but found here may exist on
    /// a file system that ignores case, and is looked up.
    folded: HashSet<Box<[u8]>, foldhash::fast::RandomState>,
    /// The error an `lstat` of a name it lacks gave (a "not found"), once one did.
    absent: Option<i32>,
}

impl Dir {
    fn new(real: PathBuf) -> Self {
        Self {
            real,
            looked: 0,
            listed: false,
            names: None,
            folded: HashSet::default(),
            absent: None,
        }
    }

    /// Lists the directory, unless it has too many names or cannot be read.
    fn list(&mut self) {
        self.listed = true;
        let Ok(entries) = std::fs::read_dir(&self.real) else {
            return;
        };
        let mut names = PathMap::default();
        for entry in entries {
            let Ok(entry) = entry else { return };
            let Ok(kind) = entry.file_type() else { return };
            if names.len() == MAX_LISTED {
                return;
            }
            let name = entry.file_name();
            let bytes = name.as_encoded_bytes();
            self.folded.insert(bytes.to_ascii_lowercase().into());
            names.insert(bytes.into(), kind.is_symlink());
        }
        self.names = Some(names);
    }

    /// What the listing says of `name`: `Some(Ok(is_symlink))` when listed, `Some(Err(code))`
    /// when surely absent (a plain ASCII name, no name equal to it but for case, and an
    /// `lstat` already told the error), `None` when only a look-up can tell.
    fn listed(&self, name: &OsStr) -> Option<Result<bool, i32>> {
        let bytes = name.as_encoded_bytes();
        if let Some(symlink) = self.names.as_ref()?.get(bytes) {
            return Some(Ok(*symlink));
        }
        let plain = bytes.is_ascii() && !self.folded.contains(&*bytes.to_ascii_lowercase());
        plain.then_some(Err(self.absent?))
    }
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
                    self.real.insert(key(parent).into(), Dir::new(real));
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
        let Some(dir) = self.real.get_mut(key(parent)) else {
            return std::fs::canonicalize(path);
        };
        dir.looked += 1;
        if !dir.listed && dir.looked > LIST_AFTER {
            dir.list();
        }
        let candidate = join(&dir.real, name);
        // In a resolved directory, a file that is not a symbolic link is its own real path;
        // a link (or anything unexpected) is resolved in full.
        match dir.listed(name) {
            Some(Ok(false)) => return Ok(candidate),
            Some(Ok(true)) => return std::fs::canonicalize(path),
            Some(Err(code)) => return Err(std::io::Error::from_raw_os_error(code)),
            None => {}
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if !meta.file_type().is_symlink() => Ok(candidate),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                dir.absent = err.raw_os_error().or(dir.absent);
                Err(err)
            }
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
    let mut out = flemma_config::fold_path(path);
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
        let scratch = tempfile::Builder::new()
            .prefix("flemma-lookups-")
            .tempdir()
            .unwrap();
        let dir = scratch.path().to_path_buf();
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
        // Again and again: the later rounds are answered from what the first learnt, and
        // from the listings of the directories looked into more than `LIST_AFTER` times.
        for _ in 0..(LIST_AFTER + 3) {
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
        assert!(lookups.real[key(&dir.join("real"))].names.is_some());
        // A file that appears after the listing is not seen by this build (as a directory
        // found missing is not), and is by the next one.
        std::fs::write(dir.join("real/new.txt"), "n").unwrap();
        let new = dir.join("real/new.txt");
        let missing = std::fs::read(dir.join("real/missing.txt")).unwrap_err();
        let got = lookups.canonicalize(&new).map_err(|e| e.to_string());
        assert_eq!(got, Err(missing.to_string()));
        assert_eq!(
            Lookups::default().canonicalize(&new).unwrap(),
            std::fs::canonicalize(&new).unwrap()
        );
        // A name that differs from a listed one only by case (a file system may ignore
        // case), or that is not ASCII, is looked up.
        std::fs::write(dir.join("real/A.TXT"), "A").unwrap();
        for name in ["real/A.TXT", "real/Missing.txt", "real/é.txt"] {
            let path = dir.join(name);
            let expected = std::fs::canonicalize(&path).map_err(|e| e.to_string());
            let got = lookups.canonicalize(&path).map_err(|e| e.to_string());
            assert_eq!(got, expected, "{name}");
        }
    }
}
