//! Integration tests of flemma-store: store paths, escaping, atomic writes and backups, crash
//! safety, concurrent writers, `flemma.save_to` redirects, error messages, materialisation and
//! (feature `tokio`) the async writes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod backups;
mod concurrency;
mod crash;
mod errors;
mod long_names;
mod materialize;
#[cfg(feature = "tokio")]
mod nonblocking;
mod paths;
mod save_to;
mod security;
mod writes;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_config::StoreOptions;
use flemma_store::{EnvLookup, Store};

/// A scratch directory under the system temp dir, unique per process and test, removed on drop.
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub(crate) fn new(test: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("flemma-store-it-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        Self { path }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn join(&self, rest: impl AsRef<Path>) -> PathBuf {
        self.path.join(rest)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// The default `tools.store` options from the config schema.
pub(crate) fn options() -> StoreOptions {
    flemma_config::Config::new().options().unwrap().tools.store
}

/// Options with `path_format` replaced.
pub(crate) fn options_with_format(format: &str) -> StoreOptions {
    let mut options = options();
    format.clone_into(&mut options.path_format);
    options
}

/// An environment holding exactly `pairs`.
pub(crate) fn env(pairs: &[(&str, &str)]) -> EnvLookup {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    Arc::new(move |name: &str| map.get(name).cloned())
}

/// A store for `chat` with `options` and exactly the environment `pairs`.
pub(crate) fn store(options: &StoreOptions, chat: Option<&Path>, pairs: &[(&str, &str)]) -> Store {
    Store::new(options, chat, "1").unwrap().with_env(env(pairs))
}

/// Reads a file as UTF-8.
pub(crate) fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Whether `name` has the extension `ext` (exactly: the store writes these names itself).
pub(crate) fn has_ext(name: &str, ext: &str) -> bool {
    Path::new(name).extension().is_some_and(|e| e == ext)
}

/// The names of the entries of `dir`, sorted.
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A tool use id (tests only pass valid ones).
pub(crate) fn tid(id: &str) -> flemma_ids::ToolUseId {
    flemma_ids::ToolUseId::new(id).unwrap()
}

/// A job id.
pub(crate) fn jid(id: &str) -> flemma_ids::JobId {
    flemma_ids::JobId::new(id).unwrap()
}

/// A tool name; the legacy `:` form is read as a transcript would.
pub(crate) fn tn(name: &str) -> flemma_ids::ToolName {
    flemma_ids::ToolName::read(name).unwrap()
}
