//! Scratch directories under the temporary directory, removed when the test ends, passed or
//! failed (a test that panics still drops its locals).

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A fresh directory `std::env::temp_dir()/NAME` (its path canonical: symlink-free, so sandbox
/// policies compare equal), removed with everything in it when dropped. Declare it before
/// anything that uses the directory, so that it is dropped after them.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// The directory `NAME` under the temporary directory, emptied of an earlier run's files.
    pub(crate) fn new(name: impl AsRef<Path>) -> Self {
        let dir = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(std::fs::canonicalize(&dir).unwrap())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
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
