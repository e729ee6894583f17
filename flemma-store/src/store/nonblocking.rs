//! The store's writes for async callers (feature `tokio`): each runs on Tokio's blocking
//! pool, so the two fsyncs of a write never stall a runtime thread.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma_ids::ToolName;

use super::{SaveOutcome, Store, WritablePaths, not_saved};
use crate::body::ResultBody;
use crate::error::StoreError;
use crate::path::ResultId;

impl Store {
    /// [`Store::write_result`] without blocking the caller: the write runs on Tokio's
    /// blocking pool (`spawn_blocking`), which is why it takes the content by value.
    ///
    /// Only rendering the path happens on the calling task.
    ///
    /// # Errors
    ///
    /// As [`Store::write_result`]; [`StoreError::Write`] with an
    /// [`Interrupted`](std::io::ErrorKind::Interrupted) cause when the runtime shut down
    /// before the write ran (the old file is intact).
    ///
    /// # Panics
    ///
    /// When polled outside a Tokio runtime; a panic of the backup strategy is resumed here.
    ///
    /// ```
    /// use flemma_store::Store;
    /// use flemma_ids::{ToolName, ToolUseId};
    ///
    /// let dir = std::env::temp_dir().join(format!("flemma-store-async-{}", std::process::id()));
    /// let options = flemma_config::Config::new().options()?.tools.store;
    /// let store = Store::new(&options, Some(&dir.join("notes.chat")), "1")?;
    /// let (id, name) = (ToolUseId::new("toolu_01")?, ToolName::new("bash")?);
    ///
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let path = runtime.block_on(store.write_result_async(&id, Some(&name), "out".to_owned()))?;
    /// assert_eq!(std::fs::read_to_string(&path)?, "out");
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn write_result_async<'a>(
        &self,
        id: impl Into<ResultId<'a>>,
        name: Option<&ToolName>,
        content: String,
    ) -> Result<PathBuf, StoreError> {
        let path = self.path_for(id, name)?;
        let (backup, writes) = (Arc::clone(&self.backup), Arc::clone(&self.writes));
        let target = path.clone();
        blocking(&path, move || {
            writes.write(&target, content.as_bytes(), &*backup)
        })
        .await
    }

    /// [`Store::materialize`] without blocking the caller, as [`Store::write_result_async`]
    /// (the rendered text is copied for the blocking pool).
    ///
    /// # Errors
    ///
    /// As [`Store::write_result_async`].
    ///
    /// # Panics
    ///
    /// As [`Store::write_result_async`].
    pub async fn materialize_async<'a>(
        &self,
        id: impl Into<ResultId<'a>>,
        name: Option<&ToolName>,
        result: &ResultBody<'_>,
    ) -> Result<Option<PathBuf>, StoreError> {
        if !self.materialize {
            return Ok(None);
        }
        let content = result.render().into_owned();
        self.write_result_async(id, name, content).await.map(Some)
    }

    /// [`Store::save_to`] without blocking the caller: the write runs on Tokio's blocking
    /// pool. The destination checks (a few `stat`s) and the stub run on the calling task.
    /// Never loses the content, as [`Store::save_to`]; the sandbox must be `Sync` so that the
    /// future is `Send`.
    ///
    /// # Panics
    ///
    /// As [`Store::write_result_async`].
    pub async fn save_to_async(
        &self,
        save_to: &str,
        content: String,
        sandbox: Option<&(dyn WritablePaths + Sync)>,
    ) -> SaveOutcome {
        let dest = match self.save_to_target(save_to, sandbox.map(|s| s as &dyn WritablePaths)) {
            Ok(dest) => dest,
            Err(error) => return not_saved(&content, error),
        };
        // Shared with the blocking task, so that it comes back even if the task never ran.
        let content = Arc::new(content);
        let (backup, writes, shared, target) = (
            Arc::clone(&self.backup),
            Arc::clone(&self.writes),
            Arc::clone(&content),
            dest.clone(),
        );
        let written = blocking(&dest, move || {
            writes.write(&target, shared.as_bytes(), &*backup)
        })
        .await;
        match written {
            Ok(path) => {
                let stub = self.saved_stub(&path, &content);
                SaveOutcome::Saved { path, stub }
            }
            Err(error) => not_saved(&content, error),
        }
    }
}

/// Runs `write` (a write of `path`) on Tokio's blocking pool.
async fn blocking(
    path: &Path,
    write: impl FnOnce() -> Result<PathBuf, StoreError> + Send + 'static,
) -> Result<PathBuf, StoreError> {
    match tokio::task::spawn_blocking(write).await {
        Ok(written) => written,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => Err(StoreError::Write {
                path: path.to_owned(),
                source: io::Error::new(
                    io::ErrorKind::Interrupted,
                    "the runtime shut down before the write ran",
                ),
            }),
        },
    }
}
