//! What the file tools (`read`, `write`, `edit`, `ls`) share: reading their inputs, running
//! blocking file I/O off the async runtime, and writing files.

use std::error::Error;
use std::path::Path;

use serde_json::Value;

use crate::messages::UNKNOWN_ERROR;
use crate::output::ToolOutput;

/// The string input `key`, when present and not empty.
pub(super) fn string_arg<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The number input `key` rounded down and clamped to `min..`; `None` when absent, `null` or
/// not a number.
#[expect(
    clippy::cast_sign_loss,
    reason = "clamped to a non-negative value first; the cast saturates at usize::MAX"
)]
pub(super) fn whole_arg(input: &Value, key: &str, min: usize) -> Option<usize> {
    let number = input.get(key)?.as_f64()?;
    let floored = number.floor();
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

/// Runs blocking file work on Tokio's blocking pool, so other calls keep running.
pub(super) async fn blocking<F>(work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    match tokio::task::spawn_blocking(work).await {
        Ok(output) => output,
        Err(error) => {
            tracing::warn!(%error, "a file tool's blocking task failed");
            ToolOutput::error(UNKNOWN_ERROR)
        }
    }
}

/// Writes `content` to `path` atomically (a temporary file renamed over it), creating the
/// parent directories. A symbolic link is written through: its target gets the content and
/// the link stays. The error is the whole cause chain as one line.
pub(super) fn write_file(path: &Path, content: &[u8]) -> Result<(), String> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    flemma_store::write_atomic(&target, content, &flemma_store::NoBackup)
        .map(drop)
        .map_err(|error| chain(&error))
}

/// An error and its sources, joined by `: `.
pub(super) fn chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
