//! Processes: looking up the process a [`ProcessRef`] names ([`ProcessRefExt`]), and
//! finding and stopping every process a command started ([`reap`]). `bash` and the detached
//! commands of the runtime's background jobs both use it.

#[cfg(target_os = "linux")]
pub(crate) mod procfs;
#[cfg(unix)]
pub mod reap;
#[cfg(target_os = "linux")]
pub(crate) mod spawn;

use flemma_core::process::ProcessRef;

/// Looking up the process a [`ProcessRef`] names (the name itself is flemma-core's, so the
/// contracts that record processes hold no process code): `ProcessRef::current()`,
/// `ProcessRef::of(pid)` and `process.is_alive()`, with this trait in scope.
///
/// ```
/// use flemma_builtins::process::ProcessRefExt as _;
/// use flemma_core::process::ProcessRef;
///
/// let me = ProcessRef::current();
/// assert!(me.is_none_or(|me| me.is_alive()));
/// ```
pub trait ProcessRefExt: Sized {
    /// This process. Its start time is read once (every claim of a call names its owner);
    /// a child made by `fork` has another pid, and reads its own.
    fn current() -> Option<Self>;

    /// The process `pid` as it is now; `None` when there is none.
    fn of(pid: i32) -> Option<Self>;

    /// Whether this very process still runs (same pid, same start time, not a zombie).
    fn is_alive(&self) -> bool;
}

impl ProcessRefExt for ProcessRef {
    fn current() -> Option<Self> {
        static CURRENT: std::sync::Mutex<Option<ProcessRef>> = std::sync::Mutex::new(None);
        let pid = i32::try_from(std::process::id()).ok()?;
        let mut known = CURRENT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(this) = *known
            && this.pid == pid
        {
            return Some(this);
        }
        let this = Self::of(pid)?;
        *known = Some(this);
        Some(this)
    }

    fn of(pid: i32) -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            let stat = procfs::Stat::of(pid)?;
            Some(Self {
                pid,
                start_time: stat.start_time,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            Some(Self { pid, start_time: 0 })
        }
    }

    fn is_alive(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            procfs::Stat::of(self.pid)
                .is_some_and(|stat| stat.start_time == self.start_time && !stat.has_ended())
        }
        #[cfg(all(unix, not(target_os = "linux")))]
        {
            rustix::process::Pid::from_raw(self.pid)
                .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok())
        }
        #[cfg(not(unix))]
        {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_wrong_start_time_is_not() {
        let Some(me) = ProcessRef::current() else {
            return;
        };
        assert!(me.is_alive());
        if cfg!(target_os = "linux") {
            let other = ProcessRef {
                start_time: me.start_time + 1,
                ..me
            };
            assert!(!other.is_alive());
        }
    }

    #[test]
    fn this_process_read_once_is_this_process_read_now() {
        let first = ProcessRef::current();
        assert_eq!(ProcessRef::current(), first);
        let pid = i32::try_from(std::process::id()).unwrap();
        assert_eq!(first, ProcessRef::of(pid));
    }
}
