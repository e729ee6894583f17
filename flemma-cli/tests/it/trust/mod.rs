//! Issue 34's attacks, each with a canary file: text the user did not write (a model's reply,
//! a transcript or frontmatter from elsewhere, a server's words) never widens what runs.

mod approved;
mod command_rules;
#[cfg(feature = "lua")]
mod deny_wins;
#[cfg(feature = "lua")]
mod lua_bounded;
#[cfg(feature = "mcp")]
mod mcp;
mod model_text;
mod protected;
mod sandbox;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

/// A project (`proj/`, a repository) with a conversation and a fake `HOME`, outside `/tmp`,
/// removed on drop.
pub(crate) struct Project {
    base: PathBuf,
}

impl Project {
    pub(crate) fn new(name: &str) -> Self {
        let root = crate::paths::outside_the_temporary_directories();
        let base = root.join(format!("flemma-cli-trust-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("proj/.git")).unwrap();
        std::fs::create_dir_all(base.join("home")).unwrap();
        Self {
            base: base.canonicalize().unwrap(),
        }
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    pub(crate) fn write(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        path
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }

    /// `flemma ARGS` run in `proj/` with the fake `HOME`.
    pub(crate) fn flemma(&self, args: &[&str]) -> Output {
        self.flemma_with(args, &[])
    }

    /// [`flemma`](Self::flemma) with variables `env` set.
    pub(crate) fn flemma_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        crate::flemma_command()
            .envs(env.iter().copied())
            .args(args)
            .current_dir(self.path("proj"))
            .env("HOME", self.path("home"))
            .env_remove("TMPDIR")
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Asserts that the canary was not written, with the command's output for the failure.
pub(crate) fn assert_no_canary(canary: &Path, out: &Output) {
    assert!(
        !canary.exists(),
        "the canary {} was written\nstdout: {}\nstderr: {}",
        canary.display(),
        crate::text(&out.stdout),
        crate::text(&out.stderr)
    );
}
