//! Scratch directories under the temporary directory, removed when the test ends, passed or
//! failed (a test that panics still drops its locals).

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A fresh directory `std::env::temp_dir()/NAME`, or a file in it, removed with everything in
/// it when dropped. Declare it before anything that uses the directory (a server, a child
/// process), so that it is dropped after them.
pub(crate) struct Scratch {
    /// What is removed.
    dir: PathBuf,
    /// What the guard stands for: the directory, or a file in it.
    path: PathBuf,
}

impl Scratch {
    /// The directory `NAME` under the temporary directory, emptied of an earlier run's files.
    pub(crate) fn new(name: impl AsRef<Path>) -> Self {
        let dir = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            path: dir.clone(),
            dir,
        }
    }

    /// As [`Scratch::new`], the path canonical (no symbolic link in it).
    #[cfg(all(unix, feature = "mcp"))]
    pub(crate) fn canonical(name: impl AsRef<Path>) -> Self {
        let mut scratch = Self::new(name);
        scratch.dir = scratch.dir.canonicalize().unwrap();
        scratch.path = scratch.dir.clone();
        scratch
    }

    /// The file `name` of the directory, holding `content`: what the guard stands for now.
    pub(crate) fn file(mut self, name: &str, content: impl AsRef<[u8]>) -> Self {
        self.path = self.dir.join(name);
        std::fs::write(&self.path, content).unwrap();
        self
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.path.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
