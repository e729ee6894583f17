//! [`ProcessRef`]: a process named so that a reused pid is never taken for it.

use serde::{Deserialize, Serialize};

/// A process named by its pid and its start time (clock ticks after boot, from
/// `/proc/<pid>/stat`), so a pid the kernel gave to another process is never taken for it:
/// what a job's journal entry ([`JobRecord`](crate::jobs::JobRecord)) and a call's claim record
/// of the host that runs it and of a job's own process.
///
/// This crate holds the name alone; looking a process up (`ProcessRef::current()`,
/// `ProcessRef::of(pid)`, `is_alive()`) is flemma-builtins' `process::ProcessRefExt`.
///
/// ```
/// use flemma_core::process::ProcessRef;
///
/// let host = ProcessRef { pid: 4242, start_time: 99 };
/// assert_eq!(serde_json::to_string(&host)?, r#"{"pid":4242,"start_time":99}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessRef {
    /// The process id.
    pub pid: i32,
    /// Its start time; 0 where the platform does not tell.
    pub start_time: u64,
}
