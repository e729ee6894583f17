//! Finding and stopping every process a call started (Linux: through `/proc`).
//!
//! A call's command runs in its own session (so its own process group), with a marker in its
//! environment (`FLEMMA_TOOL_CALL=<unique value>`) that every descendant inherits. A process
//! belongs to the call when it is alive and either still in the call's session or carries the
//! marker: the second catches the escapees that left the session (`setsid`, `nohup … &` under
//! job control, double forks). Only a process that leaves the session *and* clears its
//! environment (`setsid env -i …`) is not found this way; under the sandbox the pid
//! namespace catches it too, since bubblewrap's `--die-with-parent` takes the whole namespace
//! down with the command.
//!
//! Each matching process is signalled through a pidfd opened before it is checked, so a pid
//! reused between the check and the signal is never hit.

use std::time::Duration;

use rustix::process::{Pid, Signal};

#[cfg(target_os = "linux")]
use super::procfs::Stat;

/// How long processes get between `SIGTERM` and `SIGKILL`.
pub(crate) const GRACE: Duration = Duration::from_secs(1);

/// The environment variable that marks a call's processes.
pub(crate) const MARKER_VAR: &str = "FLEMMA_TOOL_CALL";

/// A call's processes: its session (the command's pid) and its marker.
#[derive(Debug, Clone)]
pub(crate) struct Members {
    session: i32,
    marker: String,
    /// The command's start time (clock ticks after boot): processes started earlier are not
    /// descendants, so their environment is not read.
    since: u64,
}

impl Members {
    /// The members of the call whose command is `pid`, marked with `marker`.
    pub(crate) fn new(session: i32, marker: String) -> Self {
        #[cfg(target_os = "linux")]
        let since = std::fs::read(format!("/proc/{session}/stat"))
            .ok()
            .and_then(|stat| Stat::parse(&stat))
            .map_or(0, |stat| stat.start_time);
        #[cfg(not(target_os = "linux"))]
        let since = 0;
        Self {
            session,
            marker,
            since,
        }
    }

    /// Sends `signal` to the process group and to every other member; returns how many
    /// members there were besides the group leader's group (0 when none is left).
    pub(crate) fn signal(&self, signal: Signal) -> usize {
        if self.session_is_ours()
            && let Some(pid) = Pid::from_raw(self.session)
        {
            let _ = rustix::process::kill_process_group(pid, signal);
        }
        self.signal_scanned(signal)
    }

    /// Whether the session (and process group) id still names the call's: the kernel does
    /// not give a pid to a new process while it is some process's session or group id, so the
    /// id is ours unless a process with that pid exists that is not the command (the call's
    /// session emptied and the pid went to someone else).
    fn session_is_ours(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            Stat::of(self.session).is_none_or(|leader| leader.start_time == self.since)
        }
        #[cfg(not(target_os = "linux"))]
        {
            true
        }
    }

    /// Whether a member is still alive.
    pub(crate) fn any_alive(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.scan().next().is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Pid::from_raw(self.session)
                .is_some_and(|pid| rustix::process::test_kill_process_group(pid).is_ok())
        }
    }

    #[cfg(target_os = "linux")]
    fn signal_scanned(&self, signal: Signal) -> usize {
        let mut count = 0;
        for pid in self.scan() {
            let Some(raw) = Pid::from_raw(pid) else {
                continue;
            };
            // Open first, check again, then signal: the pidfd pins the process.
            let Ok(fd) = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
            else {
                continue;
            };
            if self.is_member(pid, self.session_is_ours()) {
                let _ = rustix::process::pidfd_send_signal(&fd, signal);
                count += 1;
            }
        }
        count
    }

    #[cfg(not(target_os = "linux"))]
    fn signal_scanned(&self, _signal: Signal) -> usize {
        0
    }

    /// The pids of the living members.
    #[cfg(target_os = "linux")]
    fn scan(&self) -> impl Iterator<Item = i32> + '_ {
        let own = std::process::id();
        let session = self.session_is_ours();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(move |&pid| u32::try_from(pid).ok() != Some(own))
            .filter(move |&pid| self.is_member(pid, session))
    }

    /// Alive (not a zombie) and in the session (when the session id is still the call's) or
    /// marked.
    #[cfg(target_os = "linux")]
    fn is_member(&self, pid: i32, session: bool) -> bool {
        let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
            return false;
        };
        let Some(stat) = Stat::parse(&stat) else {
            return false;
        };
        if stat.state == b'Z' || stat.state == b'X' {
            return false;
        }
        if session && stat.session == self.session {
            return true;
        }
        if stat.start_time < self.since {
            return false;
        }
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            return false;
        };
        let wanted = format!("{MARKER_VAR}={}", self.marker);
        environ
            .split(|&b| b == 0)
            .any(|entry| entry == wanted.as_bytes())
    }
}

/// `SIGTERM` to every member, up to [`GRACE`] for them to go, then `SIGKILL`.
pub(crate) async fn stop_all(members: &Members) {
    members.signal(Signal::TERM);
    let deadline = tokio::time::Instant::now() + GRACE;
    // Most processes go at once: look again soon, then less often.
    let mut pause = Duration::from_millis(1);
    while members.any_alive() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    if members.any_alive() {
        members.signal(Signal::KILL);
        // Let the kernel finish them so callers see them gone.
        for _ in 0..50 {
            if !members.any_alive() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_reused_session_id_is_not_the_calls() {
        use std::os::unix::process::CommandExt as _;
        // A process whose pid (and group id) equals a finished call's session id: the pid
        // went to someone else, whose start time differs from the call's command.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let pid = i32::try_from(other.id()).unwrap_or_else(|e| panic!("{e}"));
        let started = Stat::of(pid).map_or(0, |s| s.start_time);
        let stale = Members {
            session: pid,
            marker: "not-this-one".into(),
            since: started.saturating_sub(1),
        };
        assert!(!stale.session_is_ours());
        stale.signal(Signal::KILL);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            matches!(other.try_wait(), Ok(None)),
            "the other process was killed"
        );
        // The call's own command is still found.
        let own = Members::new(pid, "not-this-one".into());
        assert!(own.session_is_ours());
        let _ = other.kill();
        let _ = other.wait();
    }

    #[test]
    fn this_process_is_never_a_member() {
        // Read from /proc, not getsid(2): in a pid namespace whose session leader lives
        // outside, the session is 0, which rustix's `Pid` cannot hold (it asserts).
        let stat = std::fs::read("/proc/self/stat").unwrap_or_default();
        let session = Stat::parse(&stat).map_or(0, |stat| stat.session);
        let members = Members::new(session, "x".into());
        assert!(
            !members
                .scan()
                .any(|p| u32::try_from(p).ok() == Some(std::process::id()))
        );
    }
}
