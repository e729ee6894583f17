//! What the file tools (`read`, `write`, `edit`, `ls`) share: rounding their number inputs,
//! running blocking file I/O off the async runtime, and writing files.

use std::fs::{File, FileType};
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;

use serde_json::Value;

use crate::messages::{self as msg, UNKNOWN_ERROR};
use flemma_core::ExecutionContext;
use flemma_core::ToolOutput;

/// A number input rounded down and clamped to `min..`; `None` when the call gave none.
#[expect(
    clippy::cast_sign_loss,
    reason = "clamped to a non-negative value first; the cast saturates at usize::MAX"
)]
pub(super) fn whole(number: Option<f64>, min: usize) -> Option<usize> {
    let floored = number?.floor();
    if floored.is_nan() {
        return None;
    }
    Some((floored.max(0.0) as usize).max(min))
}

/// A number input as the previews print it: whole numbers without a fraction (`100`, not
/// `100.0`), others as they are.
pub(super) fn number_text(value: &Value) -> Option<String> {
    let number = value.as_number()?;
    if number.is_i64() || number.is_u64() {
        return Some(number.to_string());
    }
    let float = number.as_f64()?;
    if float.fract() == 0.0 && float.abs() < 1e15 {
        Some(format!("{float:.0}"))
    } else {
        Some(float.to_string())
    }
}

/// Runs blocking file work on Tokio's blocking pool, so other calls keep running, within the
/// call's time limit and until it is cancelled: a stuck file system call (a hung network
/// mount, say) cannot be interrupted, so the call gives up on it and reports
/// `Tool timed out after <n> seconds.` or `User aborted tool execution.`; the stuck thread
/// is left to the pool.
pub(super) async fn blocking<F>(ctx: &ExecutionContext, work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    let limit = ctx.timeout();
    tokio::select! {
        biased;
        () = ctx.cancellation().cancelled() => ToolOutput::error(msg::ABORTED),
        joined = tokio::task::spawn_blocking(work) => match joined {
            Ok(output) => output,
            Err(error) => {
                tracing::warn!(%error, "a file tool's blocking task failed");
                ToolOutput::error(UNKNOWN_ERROR)
            }
        },
        () = tokio::time::sleep(limit) => {
            tracing::warn!(tool_id = %ctx.tool_id(), ?limit, "a file tool did not finish in time");
            ToolOutput::error(msg::tool_timeout(limit.as_secs_f64()))
        }
    }
}

/// Why a file tool does not open a path as a file.
#[derive(Debug)]
pub(super) enum NotAFile {
    /// Nothing there, or it cannot be opened or examined.
    Missing,
    /// Something other than a regular file: what it is (`a directory`, `a named pipe
    /// (FIFO)`, …).
    Special(&'static str),
}

/// What a file type is when it is not a regular file; `None` for a regular file.
pub(super) fn special_kind(file_type: FileType) -> Option<&'static str> {
    if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("a directory")
    } else if file_type.is_fifo() {
        Some("a named pipe (FIFO)")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else {
        Some("something else")
    }
}

/// Opens `path` for reading when it is a regular file (a symbolic link is followed), without
/// ever blocking or touching anything else: the path is examined first (so a device is never
/// opened, and a named pipe is never waited on), then opened with `O_NONBLOCK` (so a named
/// pipe put there in between does not block the open either) and examined again through the
/// open file (so what is read is what was checked).
pub(super) fn open_regular(path: &Path) -> Result<File, NotAFile> {
    use rustix::fs::{Mode, OFlags};
    let before = std::fs::metadata(path).map_err(|_| NotAFile::Missing)?;
    if let Some(kind) = special_kind(before.file_type()) {
        return Err(NotAFile::Special(kind));
    }
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file =
        File::from(rustix::fs::open(path, flags, Mode::empty()).map_err(|_| NotAFile::Missing)?);
    let meta = file.metadata().map_err(|_| NotAFile::Missing)?;
    if let Some(kind) = special_kind(meta.file_type()) {
        return Err(NotAFile::Special(kind));
    }
    Ok(file)
}

/// What is at `path` when it is there and is not a regular file (a symbolic link is
/// followed): a file tool that replaces files refuses to put one in its place.
pub(super) fn special_at(path: &Path) -> Option<&'static str> {
    std::fs::metadata(path)
        .ok()
        .and_then(|meta| special_kind(meta.file_type()))
}

/// Writes `content` to `path` atomically (a temporary file renamed over it), creating the
/// parent directories. A symbolic link is written through: its target gets the content and
/// the link stays. The error is the whole cause chain as one line.
pub(super) fn write_file(path: &Path, content: &[u8]) -> Result<(), String> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    if let Some(kind) = special_at(&target) {
        return Err(msg::not_regular(&path.display().to_string(), kind));
    }
    flemma_store::write_atomic(&target, content, &flemma_store::NoBackup)
        .map(drop)
        .map_err(|error| flemma_ids::error_chain(&error))
}
