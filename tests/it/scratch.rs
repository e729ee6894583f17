//! Scratch directories under the temporary directory, removed when the test ends, passed or
//! failed (a test that panics still drops its locals).

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A fresh directory `std::env::temp_dir()/NAME`, removed with everything in it when dropped.
/// Declare it before anything that uses the directory (a server, a child process, an
/// executor), so that it is dropped after them.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// The directory `NAME` under the temporary directory, emptied of an earlier run's files.
    pub(crate) fn new(name: impl AsRef<Path>) -> Self {
        let dir = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// As [`Scratch::new`], the path canonical (no symbolic link in it).
    pub(crate) fn canonical(name: impl AsRef<Path>) -> Self {
        let mut dir = Self::new(name);
        dir.0 = dir.0.canonicalize().unwrap();
        dir
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
