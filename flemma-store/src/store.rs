//! The store of one conversation: paths, writes, `flemma.save_to` and materialisation.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_config::{Backup, StoreOptions};

use crate::body::ResultBody;
use crate::error::StoreError;
use flemma_ids::ToolName;

use crate::path::{
    PathFormat, PathInputs, ResultId, Source, dirname, expand_inline, expand_tilde, normalize,
    resolve_chat,
};
use crate::preview::{format_size, head_preview};
use crate::write::{AtomicWriter, BackupStrategy, NoBackup, VersionBackup};
use crate::writes::{FileWrites, StoreWrites};

#[cfg(feature = "tokio")]
mod nonblocking;

/// `path` with its deepest existing ancestor canonicalized (symlinks resolved), the rest
/// appended: where a write to `path` would really land.
fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_owned();
    let mut rest = Vec::new();
    loop {
        // A relative path's last ancestor is the working directory.
        let probe = if existing.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &existing
        };
        if let Ok(real) = std::fs::canonicalize(probe) {
            return rest
                .iter()
                .rev()
                .fold(real, |p: PathBuf, c: &std::ffi::OsString| p.join(c));
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_owned();
            }
            _ => return path.to_owned(),
        }
    }
}

/// The inline variable holding the conversation's store directory.
pub const STORE_PATH_VAR: &str = "FLEMMA_TOOLS_STORE_PATH";

/// Whether the sandbox lets tools write a path (the tools crate implements it from the policy).
pub trait WritablePaths {
    /// `true` when `path` may be written.
    fn is_writable(&self, path: &Path) -> bool;

    /// `true` when `path` is a file tools may never write (the conversation's file, an
    /// options file): `save_to` then fails with [`StoreError::ReadOnly`]. Default: none.
    fn is_read_only(&self, _path: &Path) -> bool {
        false
    }
}

impl<F: Fn(&Path) -> bool> WritablePaths for F {
    fn is_writable(&self, path: &Path) -> bool {
        self(path)
    }
}

/// Looks up environment variables; tests and hosts substitute their own.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The tool result store of one conversation.
///
/// ```
/// use flemma_store::Store;
/// use flemma_ids::{ToolName, ToolUseId};
///
/// let options = flemma_config::Config::new().options()?.tools.store;
/// let env = std::sync::Arc::new(|name: &str| (name == "HOME").then(|| "/home/ada".to_owned()));
/// let store = Store::new(&options, Some("~/notes/example.chat".as_ref()), "1")?.with_env(env);
/// assert_eq!(
///     store.path_for(&ToolUseId::new("toolu_01")?, Some(&ToolName::new("bash")?))?,
///     std::path::Path::new("/home/ada/notes/.flemma/example.chat/tool_bash_toolu_01.txt")
/// );
/// assert_eq!(store.directory()?, std::path::Path::new("/home/ada/notes/.flemma/example.chat"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Store {
    format: PathFormat,
    chat: Option<PathBuf>,
    conversation: String,
    backup: Arc<dyn BackupStrategy>,
    preview_lines: usize,
    preview_bytes: usize,
    materialize: bool,
    env: EnvLookup,
    writes: Arc<dyn StoreWrites>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("format", &self.format.as_str())
            .field("chat", &self.chat)
            .field("conversation", &self.conversation)
            .field("backup", &self.backup)
            .field("materialize", &self.materialize)
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

/// The outcome of a `flemma.save_to` redirect.
#[derive(Debug)]
pub enum SaveOutcome {
    /// Saved: the result becomes the stub.
    Saved {
        /// Where the content went.
        path: PathBuf,
        /// What the model sees instead of the content.
        stub: String,
    },
    /// Not saved: the full content is kept, with a notice appended.
    NotSaved {
        /// The content and the notice.
        content: String,
        /// Why.
        error: StoreError,
    },
}

impl Store {
    /// A store for a conversation (`chat` is its file, `conversation` its id) with the
    /// `tools.store` options.
    ///
    /// # Errors
    ///
    /// Path format and backup strategy errors ([`StoreError::UnknownPreset`],
    /// [`StoreError::PresetInUnnamed`], [`StoreError::InvalidFormat`],
    /// [`StoreError::UnknownBackupStrategy`]).
    pub fn new(
        options: &StoreOptions,
        chat: Option<&Path>,
        conversation: &str,
    ) -> Result<Self, StoreError> {
        let format = match chat {
            Some(_) => PathFormat::new(&options.path_format)?,
            None => PathFormat::unnamed(&options.unnamed_path_format)?,
        };
        let backup: Arc<dyn BackupStrategy> = match &options.backup {
            Backup::Enabled(false) => Arc::new(NoBackup),
            Backup::Enabled(true) => Arc::new(VersionBackup),
            Backup::Strategy(name) if name == "version" => Arc::new(VersionBackup),
            Backup::Strategy(name) => {
                return Err(StoreError::UnknownBackupStrategy { name: name.clone() });
            }
        };
        Ok(Self {
            format,
            chat: chat.map(Path::to_owned),
            conversation: conversation.to_owned(),
            backup,
            preview_lines: usize::try_from(options.preview.lines).unwrap_or(usize::MAX),
            preview_bytes: usize::try_from(options.preview.bytes).unwrap_or(usize::MAX),
            materialize: options.materialize,
            env: Arc::new(|name| std::env::var(name).ok()),
            writes: Arc::new(FileWrites),
        })
    }

    /// Uses `env` instead of the process environment.
    #[must_use]
    pub fn with_env(mut self, env: EnvLookup) -> Self {
        self.env = env;
        self
    }

    /// Writes through `writes` instead of to files ([`FileWrites`]).
    #[must_use]
    pub fn with_writes(mut self, writes: Arc<dyn StoreWrites>) -> Self {
        self.writes = writes;
        self
    }

    /// Uses a custom backup strategy.
    #[must_use]
    pub fn with_backup(mut self, backup: Arc<dyn BackupStrategy>) -> Self {
        self.backup = backup;
        self
    }

    fn inputs<'a>(&'a self, id: ResultId<'a>, name: Option<&'a ToolName>) -> PathInputs<'a> {
        PathInputs {
            id,
            name,
            chat: self.chat.as_deref(),
            conversation: &self.conversation,
        }
    }

    /// The store path of a result.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidFormat`] when the template fails.
    pub fn path_for<'a>(
        &self,
        id: impl Into<ResultId<'a>>,
        name: Option<&ToolName>,
    ) -> Result<PathBuf, StoreError> {
        let inputs = self.inputs(id.into(), name);
        self.format.render(&inputs, &|var| self.lookup(var, None))
    }

    /// Inline variables first (`FLEMMA_TOOLS_STORE_PATH`), then the environment.
    fn lookup(&self, var: &str, store_dir: Option<&Path>) -> Option<String> {
        if var == STORE_PATH_VAR
            && let Some(dir) = store_dir
        {
            return Some(dir.to_string_lossy().into_owned());
        }
        (self.env)(var)
    }

    /// The conversation's store directory: the directory of the path rendered with
    /// `source = tool`, `id = _` and no name. Exported as `$FLEMMA_TOOLS_STORE_PATH`.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidFormat`].
    pub fn directory(&self) -> Result<PathBuf, StoreError> {
        let path = self.format.render_raw(
            (Source::Tool, "_"),
            None,
            self.chat.as_deref(),
            &self.conversation,
            &|var| self.lookup(var, None),
        )?;
        Ok(path.parent().map(Path::to_owned).unwrap_or_default())
    }

    /// Creates the store directory if needed and returns it.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidFormat`] and [`StoreError::CreateDir`].
    pub fn ensure_directory(&self) -> Result<PathBuf, StoreError> {
        let dir = self.directory()?;
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::CreateDir {
            dir: dir.clone(),
            source,
        })?;
        Ok(dir)
    }

    /// Writes a result to its store path with the configured backup strategy (truncation
    /// overflow, materialisation).
    ///
    /// This blocks the calling thread for two fsyncs (see [`write_atomic`](crate::write_atomic), with
    /// the default [`FileWrites`]); async callers use
    /// `Store::write_result_async` (feature `tokio`) or their own blocking pool.
    ///
    /// # Errors
    ///
    /// As [`StoreWrites::write`], and path errors.
    pub fn write_result<'a>(
        &self,
        id: impl Into<ResultId<'a>>,
        name: Option<&ToolName>,
        content: &str,
    ) -> Result<PathBuf, StoreError> {
        let path = self.path_for(id, name)?;
        self.writes.write(&path, content.as_bytes(), &*self.backup)
    }

    /// A streaming write of a result to its store path: the content is written in pieces
    /// and installed by [`AtomicWriter::commit`] with the configured backup strategy, as
    /// [`Store::write_result`] would (a command's output too large to hold in memory). The
    /// store's [`StoreWrites`] is told of the file once it is installed
    /// ([`StoreWrites::installed`]).
    ///
    /// # Errors
    ///
    /// As [`AtomicWriter::create`], and path errors.
    pub fn result_writer<'a>(
        &self,
        id: impl Into<ResultId<'a>>,
        name: Option<&ToolName>,
    ) -> Result<AtomicWriter, StoreError> {
        let path = self.path_for(id, name)?;
        Ok(
            AtomicWriter::create(&path, Arc::clone(&self.backup))?
                .telling(Arc::clone(&self.writes)),
        )
    }

    /// Whether [`Store::materialize`] writes: `tools.store.materialize` from the options given
    /// to [`Store::new`].
    pub fn materializes(&self) -> bool {
        self.materialize
    }

    /// Materialises a finished result when `tools.store.materialize` was on in the options given to
    /// [`Store::new`]: writes [`ResultBody::render`] to the result's store path and returns it;
    /// `Ok(None)` when materialisation is off (nothing is rendered or written then). Blocks as
    /// [`Store::write_result`] does; `Store::materialize_async` (feature `tokio`) does not.
    ///
    /// The executor skips it when truncation already wrote the overflow file or when
    /// `flemma.save_to` is set.
    ///
    /// # Errors
    ///
    /// As [`Store::write_result`]; callers log it and inject the result anyway.
    ///
    /// ```
    /// use flemma_store::{ResultBody, Store};
    /// use flemma_ids::{ToolName, ToolUseId};
    ///
    /// let dir = std::env::temp_dir().join(format!("flemma-store-mat-{}", std::process::id()));
    /// let mut options = flemma_config::Config::new().options()?.tools.store;
    /// options.materialize = true;
    /// let store = Store::new(&options, Some(&dir.join("notes.chat")), "1")?;
    ///
    /// let (id, name) = (ToolUseId::new("toolu_01")?, ToolName::new("bash")?);
    /// let failed = ResultBody::Error { error: "exit 1", partial_output: Some("half") };
    /// let path = store.materialize(&id, Some(&name), &failed)?;
    /// assert_eq!(path, Some(dir.join(".flemma/notes.chat/tool_bash_toolu_01.txt")));
    /// assert_eq!(std::fs::read_to_string(dir.join(".flemma/notes.chat/tool_bash_toolu_01.txt"))?,
    ///     "exit 1\n\nPartial output:\nhalf");
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn materialize<'a>(
        &self,
        id: impl Into<ResultId<'a>>,
        name: Option<&ToolName>,
        result: &ResultBody<'_>,
    ) -> Result<Option<PathBuf>, StoreError> {
        if !self.materialize {
            return Ok(None);
        }
        self.write_result(id, name, &result.render()).map(Some)
    }

    /// Where a `flemma.save_to` value points: variables expanded (the store directory as
    /// `$FLEMMA_TOOLS_STORE_PATH`), `~` expanded, relative to the chat file's directory.
    ///
    /// # Errors
    ///
    /// Path errors from computing the store directory.
    pub fn save_to_destination(&self, save_to: &str) -> Result<PathBuf, StoreError> {
        let store_dir = self.directory()?;
        let vars = |var: &str| self.lookup(var, Some(&store_dir));
        let expanded = expand_tilde(&expand_inline(save_to, &vars), &vars);
        let trailing_slash = expanded.ends_with('/');
        let mut path = if Path::new(&expanded).is_absolute() {
            normalize(&expanded)
        } else {
            // The chat file's directory, `~` expanded; none for an unsaved buffer (the
            // process's working directory).
            let base = self
                .chat
                .as_deref()
                .map(|chat| dirname(&resolve_chat(chat, &vars)).to_owned())
                .unwrap_or_default();
            normalize(&base.join(&expanded).to_string_lossy())
        };
        if trailing_slash {
            path.push("");
        }
        Ok(path)
    }

    /// Redirects a successful result to `save_to`. Never loses the content: on
    /// any failure the full content comes back with a notice. Blocks as [`Store::write_result`]
    /// does; `Store::save_to_async` (feature `tokio`) does not.
    pub fn save_to(
        &self,
        save_to: &str,
        content: &str,
        sandbox: Option<&dyn WritablePaths>,
    ) -> SaveOutcome {
        let saved = self.save_to_target(save_to, sandbox).and_then(|dest| {
            let path = self
                .writes
                .write(&dest, content.as_bytes(), &*self.backup)?;
            let stub = self.saved_stub(&path, content);
            Ok((path, stub))
        });
        match saved {
            Ok((path, stub)) => SaveOutcome::Saved { path, stub },
            Err(error) => not_saved(content, error),
        }
    }

    /// Where `save_to` writes, once checked: not a directory, writable under the sandbox.
    fn save_to_target(
        &self,
        save_to: &str,
        sandbox: Option<&dyn WritablePaths>,
    ) -> Result<PathBuf, StoreError> {
        let dest = self.save_to_destination(save_to)?;
        let store_dir = self.directory()?;
        // The store directory is compared both as written and as resolved (symlinks
        // followed), so that another spelling of one of its ancestors is refused too.
        let is_directory = dest.as_os_str().to_string_lossy().ends_with('/')
            || store_dir.starts_with(&dest)
            || real_path(&store_dir).starts_with(real_path(&dest))
            || dest.is_dir();
        if is_directory {
            return Err(StoreError::SaveToDirectory { dest });
        }
        if let Some(sandbox) = sandbox {
            // Judge where the bytes would land (symlinks on the way are followed) and the
            // path as written, made absolute.
            let written = std::path::absolute(&dest).unwrap_or_else(|_| dest.clone());
            if sandbox.is_read_only(&real_path(&dest)) || sandbox.is_read_only(&written) {
                return Err(StoreError::ReadOnly { dest });
            }
            if !sandbox.is_writable(&real_path(&dest)) || !sandbox.is_writable(&written) {
                return Err(StoreError::NotWritable { dest });
            }
        }
        Ok(dest)
    }

    /// What the model sees of `content` once saved to `path`.
    fn saved_stub(&self, path: &Path, content: &str) -> String {
        let lines = content.matches('\n').count() + 1;
        let notice = format!(
            "[Output saved: {} — {}, {lines} lines]",
            path.display(),
            format_size(content.len())
        );
        if self.preview_lines == 0 {
            notice
        } else {
            format!(
                "{}\n\n{notice}",
                head_preview(content, self.preview_lines, self.preview_bytes)
            )
        }
    }
}

/// The full content with the failure notice, whose reason is the error with its cause
/// (`Failed to write '<path>': <err>`, spec §11.4).
fn not_saved(content: &str, error: StoreError) -> SaveOutcome {
    let reason = flemma_ids::error_chain(&error);
    SaveOutcome::NotSaved {
        content: format!(
            "{content}\n\n[Output not saved: {reason}. Showing the full output instead.]"
        ),
        error,
    }
}
