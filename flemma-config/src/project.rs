//! The conversation's project: the directory tree a conversation's tools and file references
//! are bounded by, whatever directory the host process was started from.
//!
//! A conversation at `/home/me/code/app/notes/design.chat` belongs to the repository that holds
//! it (`/home/me/code/app`, the nearest ancestor with a `.git`), or to its own directory when no
//! repository holds it. A repository root at `/` or at `$HOME` (a dotfiles repository) is not
//! taken: it would make the whole machine or the whole home directory the project.

use std::path::{Component, Path, PathBuf};

/// The conversation file's directory made absolute once, with symlinks resolved (the directory
/// `urn:flemma:buffer:path` names, resolved like `realpath`). A relative `file` is taken against
/// the process working directory, which is the one moment that directory matters.
///
/// # Errors
///
/// The file cannot be resolved (it does not exist, or a component is unreadable).
///
/// ```
/// let dir = std::env::temp_dir().join(format!("flemma-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("x.chat"), "@You:\nhi\n")?;
/// let resolved = flemma_config::conversation_dir(&dir.join("x.chat"))?;
/// assert_eq!(resolved, dir.canonicalize()?);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn conversation_dir(file: &Path) -> std::io::Result<PathBuf> {
    let file = file.canonicalize()?;
    Ok(file
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_owned))
}

/// The conversation file as the SDK keeps it: absolute, with symlinks resolved (the file's
/// own, so that an atomic rewrite replaces the target and keeps the link), `.` and `..`
/// folded. A relative `file` is taken against the process working directory, once, here.
///
/// Never fails: a file that does not exist yet keeps its name under its deepest existing
/// ancestor's resolved path; when even the working directory cannot be read, `file` comes
/// back as given.
///
/// ```
/// use std::path::Path;
/// let dir = std::env::temp_dir().join(format!("flemma-doc-path-{}", std::process::id()));
/// std::fs::create_dir_all(dir.join("notes"))?;
/// let dir = dir.canonicalize()?;
/// // Not there yet: made absolute and normal all the same.
/// let chat = dir.join("notes/../notes/./new.chat");
/// assert_eq!(flemma_config::conversation_path(&chat), dir.join("notes/new.chat"));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn conversation_path(file: &Path) -> PathBuf {
    if let Ok(real) = file.canonicalize() {
        return real;
    }
    let Ok(absolute) = std::path::absolute(file) else {
        return file.to_owned();
    };
    // The deepest ancestor that exists, resolved, then the rest folded onto it.
    let mut rest: Vec<Component<'_>> = Vec::new();
    let mut existing = absolute.as_path();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |mut path, component| {
                match component {
                    Component::ParentDir => {
                        path.pop();
                    }
                    Component::Normal(name) => path.push(name),
                    Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                }
                path
            });
        }
        let mut components = existing.components();
        match components.next_back() {
            Some(last) if !matches!(last, Component::RootDir | Component::Prefix(_)) => {
                rest.push(last);
                existing = components.as_path();
            }
            _ => return absolute,
        }
    }
}

/// `path` with `.` removed and `..` folded lexically, without touching the file system: a
/// `..` folds the name before it, stops at the root (`/../x` is `/x`) and is kept where there is
/// no name to fold (`../x` stays `../x`, `a/../../x` is `../x`). The one lexical folding of the
/// workspace (sandbox policies, store paths, file references).
///
/// ```
/// use std::path::Path;
/// assert_eq!(flemma_config::fold_path(Path::new("/a/./b/../c")), Path::new("/a/c"));
/// assert_eq!(flemma_config::fold_path(Path::new("/../x")), Path::new("/x"));
/// assert_eq!(flemma_config::fold_path(Path::new("a/../../x")), Path::new("../x"));
/// ```
#[must_use]
pub fn fold_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                Some(Component::ParentDir | Component::CurDir) | None => out.push(".."),
            },
            other => out.push(other),
        }
    }
    out
}

/// The file that makes the directory holding it a project of its own, whatever holds it (a
/// worker puts one in each conversation's directory: see `flemma_object::local_path`).
pub const PROJECT_MARKER: &str = ".flemma-project";

/// The project that holds a conversation whose (absolute, resolved) directory is `dir`: the
/// nearest ancestor of `dir` (itself included) that holds a `.git` entry or a
/// [`PROJECT_MARKER`], else `dir` itself. A `.git` at `/` or at `$HOME` does not count (see
/// the module docs).
///
/// ```
/// let base = std::env::temp_dir().join(format!("flemma-doc-root-{}", std::process::id()));
/// std::fs::create_dir_all(base.join("repo/.git"))?;
/// std::fs::create_dir_all(base.join("repo/notes"))?;
/// std::fs::create_dir_all(base.join("loose"))?;
/// assert_eq!(flemma_config::project_root(&base.join("repo/notes")), base.join("repo"));
/// assert_eq!(flemma_config::project_root(&base.join("loose")), base.join("loose"));
/// # std::fs::remove_dir_all(&base)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn project_root(dir: &Path) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    project_root_with_home(dir, home.as_deref())
}

/// [`project_root`] with the home directory given (tests, hosts with their own idea of home).
pub fn project_root_with_home(dir: &Path, home: Option<&Path>) -> PathBuf {
    // Home's identity once; each candidate is then one `stat`.
    let home = home.map(|home| (home, DirId::of(home)));
    let too_wide = |candidate: &Path| {
        candidate.parent().is_none()
            || home.as_ref().is_some_and(|(home, id)| {
                candidate == *home
                    || id
                        .as_ref()
                        .is_some_and(|id| DirId::of(candidate).as_ref() == Some(id))
            })
    };
    for candidate in dir.ancestors() {
        if too_wide(candidate) {
            break;
        }
        if candidate.join(".git").exists() || candidate.join(PROJECT_MARKER).exists() {
            return candidate.to_owned();
        }
    }
    dir.to_owned()
}

/// What tells two paths of one directory apart from paths of two: the device and inode where
/// there are such (Unix), else the resolved path.
#[derive(Debug, PartialEq, Eq)]
struct DirId(#[cfg(unix)] (u64, u64), #[cfg(not(unix))] PathBuf);

impl DirId {
    /// `None` when `path` cannot be looked at.
    fn of(path: &Path) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            let metadata = std::fs::metadata(path).ok()?;
            Some(Self((metadata.dev(), metadata.ino())))
        }
        #[cfg(not(unix))]
        {
            path.canonicalize().ok().map(Self)
        }
    }
}

/// The most a project file read with [`read_project_file`] may hold.
pub const MAX_PROJECT_FILE_BYTES: u64 = 1024 * 1024;

/// Reads a file a project holds for the host (a Claude Code settings file, a subagent
/// definition): text the host did not write, so it must be a regular file of the project, not
/// a symbolic link, at most [`MAX_PROJECT_FILE_BYTES`], UTF-8. It is opened without following a
/// last-component link and without waiting on a FIFO put there after it was examined, and is
/// checked again through the open file, so a FIFO or a device never stops the host.
///
/// # Errors
///
/// `NotFound` when there is no file; `InvalidInput` for a link, a FIFO, a directory or a
/// device, or a file over 1 MiB; `InvalidData` for text that is not UTF-8; any other error
/// reading it.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("flemma-doc-read-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// std::fs::write(dir.join("settings.json"), "{}")?;
/// assert_eq!(flemma_config::read_project_file(&dir.join("settings.json"))?, "{}");
/// let dir_itself = flemma_config::read_project_file(&dir).unwrap_err();
/// assert_eq!(dir_itself.kind(), std::io::ErrorKind::InvalidInput);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn read_project_file(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read as _};
    let refused = |reason: &str| Error::new(ErrorKind::InvalidInput, reason.to_owned());
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(refused(
            "a symbolic link (the file must be a regular file of the project)",
        ));
    }
    if !meta.is_file() {
        return Err(refused("not a regular file"));
    }
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_PROJECT_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_PROJECT_FILE_BYTES {
        return Err(refused("larger than 1 MiB"));
    }
    String::from_utf8(bytes).map_err(|e| Error::new(ErrorKind::InvalidData, e.utf8_error()))
}

/// Opens `path` for reading without following a last-component link or waiting on a FIFO,
/// and checks again through the open file that it is a regular file.
#[cfg(unix)]
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = std::fs::File::from(rustix::fs::open(path, flags, Mode::empty())?);
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

#[cfg(not(unix))]
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("flemma-project-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir.canonicalize().unwrap())
        }
        fn mkdir(&self, rel: &str) -> PathBuf {
            let path = self.0.join(rel);
            std::fs::create_dir_all(&path).unwrap();
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_nearest_repository_holds_the_conversation() {
        let s = Scratch::new("nearest");
        s.mkdir("outer/.git");
        s.mkdir("outer/inner/.git");
        let deep = s.mkdir("outer/inner/a/b");
        assert_eq!(project_root_with_home(&deep, None), s.0.join("outer/inner"));
    }

    #[test]
    fn a_git_file_counts_as_a_repository() {
        // Worktrees and submodules have a `.git` file, not a directory.
        let s = Scratch::new("gitfile");
        let wt = s.mkdir("wt");
        std::fs::write(wt.join(".git"), "gitdir: /elsewhere\n").unwrap();
        let sub = s.mkdir("wt/sub");
        assert_eq!(project_root_with_home(&sub, None), wt);
    }

    #[test]
    fn without_a_repository_the_directory_is_the_project() {
        let s = Scratch::new("loose");
        let dir = s.mkdir("a/b");
        assert_eq!(project_root_with_home(&dir, None), dir);
    }

    #[test]
    fn a_repository_at_home_is_not_the_project() {
        let s = Scratch::new("home");
        let home = s.mkdir("home");
        s.mkdir("home/.git");
        let notes = s.mkdir("home/notes");
        assert_eq!(project_root_with_home(&notes, Some(&home)), notes);
        // A repository below home still is.
        s.mkdir("home/code/.git");
        let src = s.mkdir("home/code/src");
        assert_eq!(
            project_root_with_home(&src, Some(&home)),
            s.0.join("home/code")
        );
    }

    #[test]
    fn the_root_directory_is_never_the_project_by_way_of_a_repository() {
        assert_eq!(project_root_with_home(Path::new("/"), None), Path::new("/"));
    }

    #[test]
    fn conversation_dir_resolves_relative_files_and_symlinks() {
        let s = Scratch::new("convdir");
        let real = s.mkdir("real");
        std::fs::write(real.join("c.chat"), "").unwrap();
        std::os::unix::fs::symlink(&real, s.0.join("link")).unwrap();
        assert_eq!(
            conversation_dir(&s.0.join("link/c.chat")).ok(),
            Some(real.clone())
        );
        assert_eq!(
            conversation_dir(&s.0.join("link/../real/c.chat")).ok(),
            Some(real)
        );
        assert!(conversation_dir(&s.0.join("missing.chat")).is_err());
    }

    #[test]
    fn conversation_path_is_absolute_and_resolved_even_before_the_file_exists() {
        let s = Scratch::new("convpath");
        let real = s.mkdir("real");
        std::os::unix::fs::symlink(&real, s.0.join("link")).unwrap();
        // Missing file, symlinked and dotted directory.
        assert_eq!(
            conversation_path(&s.0.join("link/./sub/../c.chat")),
            real.join("c.chat")
        );
        // Missing directories too.
        assert_eq!(
            conversation_path(&s.0.join("link/new/dir/c.chat")),
            real.join("new/dir/c.chat")
        );
        // An existing file that is a link resolves to its target.
        std::fs::write(real.join("t.chat"), "").unwrap();
        std::os::unix::fs::symlink(real.join("t.chat"), s.0.join("l.chat")).unwrap();
        assert_eq!(conversation_path(&s.0.join("l.chat")), real.join("t.chat"));
    }
}
