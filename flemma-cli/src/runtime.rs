//! The command's one tokio runtime: made on first use ([`runtime`]), ended when the command
//! ends ([`finish`], which first stops the MCP servers the command started).

use std::sync::{Arc, Mutex, PoisonError};

use crate::failure::Failure;

/// The command's one runtime, made on first use: the MCP servers' connections live on it,
/// so every `block_on` of the command uses it.
static RUNTIME: Mutex<Option<Arc<tokio::runtime::Runtime>>> = Mutex::new(None);

/// The command's runtime (current-thread; time for timeouts, I/O for the pseudo-terminals of
/// `bash` and the MCP servers' pipes).
pub(crate) fn runtime() -> Result<Arc<tokio::runtime::Runtime>, Failure> {
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(runtime) = slot.as_ref() {
        return Ok(Arc::clone(runtime));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(anyhow::Error::new(e).context("cannot start the runtime")))?;
    let runtime = Arc::new(runtime);
    *slot = Some(Arc::clone(&runtime));
    Ok(runtime)
}

/// Ends the command's runtime: the MCP servers are stopped (a stdio server's process ended),
/// then the runtime is left behind rather than waited for, so that a tool stuck in a blocking
/// call (a read that never returns) does not keep the command alive.
pub(crate) fn finish() {
    let Some(runtime) = RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    #[cfg(feature = "mcp")]
    runtime.block_on(crate::mcp::servers::stop_servers());
    if let Ok(runtime) = Arc::try_unwrap(runtime) {
        runtime.shutdown_background();
    }
}
