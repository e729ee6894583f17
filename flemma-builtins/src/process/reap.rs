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
//!
//! Every member started after the call's command, and the kernel gives pids out in turn
//! (the next free one after the last it gave, wrapping at `pid_max`). So a call whose
//! command was just started (`Members::spawned`) only looks at the pids given out since:
//! those between its command's pid and the last pid given out (`/proc/loadavg`), probed one
//! by one when they are few, else picked from the listing of `/proc`. That holds while the
//! pid counter has not gone all the way round since, which the forks counted since
//! (`/proc/stat`) rule out; when they cannot, every process is looked at, as for
//! [`Members::new`].

use std::time::Duration;

use rustix::process::{Pid, Signal};

#[cfg(target_os = "linux")]
use super::procfs::{Allocation, Stat, pid_max};

/// How long processes get between `SIGTERM` and `SIGKILL`.
pub const GRACE: Duration = Duration::from_secs(1);

/// The environment variable that marks a call's processes.
pub const MARKER_VAR: &str = "FLEMMA_TOOL_CALL";

/// A call's processes: its session (the command's pid) and its marker.
#[derive(Debug, Clone)]
pub struct Members {
    session: i32,
    marker: String,
    /// The command's start time (clock ticks after boot): processes started earlier are not
    /// descendants, so their environment is not read.
    since: u64,
    /// The forks counted when the command had just started ([`Members::spawned`]): the
    /// members are among the pids given out since.
    forks: Option<u64>,
}

/// The pids after `after` up to `last`, wrapping at `max`: those given out in turn after
/// `after` was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    after: i32,
    last: i32,
    max: i32,
}

/// At most this many pids given out since the command are probed one by one; more are
/// picked from the listing of `/proc`.
const PROBED: i32 = 64;

/// Tasks that hold a pid besides those `/proc/loadavg` counts (exited group and session
/// leaders whose ids are in use), and the forks between the command's start and the count:
/// a margin against the pid counter's full turn.
const TURN_MARGIN: u64 = 4096;

impl Window {
    fn contains(self, pid: i32) -> bool {
        if self.last >= self.after {
            pid > self.after && pid <= self.last
        } else {
            pid > self.after || pid <= self.last
        }
    }

    fn len(self) -> i32 {
        if self.last >= self.after {
            self.last - self.after
        } else {
            (self.max - 1 - self.after).saturating_add(self.last)
        }
    }

    fn pids(self) -> impl Iterator<Item = i32> {
        let wrapped = self.last < self.after;
        let high =
            (self.after.saturating_add(1))..=(if wrapped { self.max - 1 } else { self.last });
        let low = 1..=(if wrapped { self.last } else { 0 });
        high.chain(low)
    }
}

impl Members {
    /// The members of the call whose command `pid` was just spawned, marked with `marker`:
    /// only the pids given out from now on are looked at (see the [module docs](self)).
    pub(crate) fn spawned(session: i32, marker: String) -> Self {
        #[cfg(target_os = "linux")]
        let forks = super::procfs::forks();
        #[cfg(not(target_os = "linux"))]
        let forks = None;
        Self {
            forks,
            ..Self::new(session, marker)
        }
    }

    /// The members of the call whose command is `pid`, marked with `marker`, whenever it
    /// started: every process is looked at.
    pub fn new(session: i32, marker: String) -> Self {
        #[cfg(target_os = "linux")]
        let since = Stat::of(session).map_or(0, |stat| stat.start_time);
        #[cfg(not(target_os = "linux"))]
        let since = 0;
        Self {
            session,
            marker,
            since,
            forks: None,
        }
    }

    /// The pids the members can have, when fewer than all: those given out since the
    /// command, unless the pid counter may have gone all the way round since.
    #[cfg(target_os = "linux")]
    fn window(&self) -> Option<Window> {
        let forks = self.forks?;
        let now = Allocation::now()?;
        let max = pid_max()?;
        let given = now.forks.checked_sub(forks)?;
        // The counter moves by the pids it gives out and the pids in use it skips.
        let moved = given
            .saturating_add(now.tasks.saturating_mul(2))
            .saturating_add(TURN_MARGIN);
        // From the command itself on: a shell may `exec` its last command.
        (moved < u64::try_from(max).ok()? / 2).then_some(Window {
            after: self.session.saturating_sub(1),
            last: now.last_pid,
            max,
        })
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
    pub fn any_alive(&self) -> bool {
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
        let session = self.session_is_ours();
        for pid in self.scan() {
            let Some(raw) = Pid::from_raw(pid) else {
                continue;
            };
            // Open first, check again, then signal: the pidfd pins the process.
            let Ok(fd) = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
            else {
                continue;
            };
            if self.is_member(pid, session) {
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

    /// The pids of the living members: of the pids given out since the command when known
    /// (probed, or picked from the listing of `/proc`), else of every process.
    #[cfg(target_os = "linux")]
    fn scan(&self) -> Box<dyn Iterator<Item = i32> + '_> {
        let own = std::process::id();
        let session = self.session_is_ours();
        let not_own = move |pid: &i32| u32::try_from(*pid).ok() != Some(own);
        let window = self.window();
        if let Some(window) = window.filter(|w| w.len() <= PROBED) {
            // `/proc/<tid>` of a thread answers too: only a thread group's leader counts,
            // as in the listing.
            return Box::new(
                window
                    .pids()
                    .filter(not_own)
                    .filter(move |&pid| self.is_member(pid, session) && is_leader(pid)),
            );
        }
        let listed = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok());
        Box::new(
            listed
                .filter(move |&pid| window.is_none_or(|w| w.contains(pid)))
                .filter(not_own)
                .filter(move |&pid| self.is_member(pid, session)),
        )
    }

    /// Alive (not a zombie) and in the session (when the session id is still the call's) or
    /// marked.
    #[cfg(target_os = "linux")]
    fn is_member(&self, pid: i32, session: bool) -> bool {
        let Some(stat) = Stat::of(pid) else {
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
        // Most environments hold in 16 KiB: one `read`, and one more to see the end.
        let Some(environ) = super::procfs::read_whole(&format!("/proc/{pid}/environ"), 16 * 1024)
        else {
            return false;
        };
        let wanted = format!("{MARKER_VAR}={}", self.marker);
        environ
            .split(|&b| b == 0)
            .any(|entry| entry == wanted.as_bytes())
    }
}

/// Whether `pid` is a thread group's leader (a process, as `/proc` lists them), not one of
/// its other threads: `Tgid` of `/proc/<pid>/status`.
#[cfg(target_os = "linux")]
fn is_leader(pid: i32) -> bool {
    // `Tgid` is the fourth line; the file is 1.5 KiB or so (one `read` into 4 KiB).
    let Some(status) = super::procfs::read_whole(&format!("/proc/{pid}/status"), 4096) else {
        return false;
    };
    status
        .split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(b"Tgid:"))
        .and_then(|tgid| std::str::from_utf8(tgid).ok()?.trim().parse::<i32>().ok())
        == Some(pid)
}

/// `SIGTERM` to every member, up to [`GRACE`] for them to go, then `SIGKILL`.
pub async fn stop_all(members: &Members) {
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
            forks: None,
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

    #[test]
    fn windows_wrap_at_pid_max() {
        let plain = Window {
            after: 100,
            last: 103,
            max: 1000,
        };
        assert_eq!(plain.pids().collect::<Vec<_>>(), [101, 102, 103]);
        assert_eq!(plain.len(), 3);
        assert!(plain.contains(103) && !plain.contains(100) && !plain.contains(104));
        let wrapped = Window {
            after: 997,
            last: 2,
            max: 1000,
        };
        assert_eq!(wrapped.pids().collect::<Vec<_>>(), [998, 999, 1, 2]);
        assert_eq!(wrapped.len(), 4);
        assert!(wrapped.contains(999) && wrapped.contains(1) && !wrapped.contains(3));
        assert!(!wrapped.contains(997) && !wrapped.contains(500));
        let none = Window {
            after: 5,
            last: 5,
            max: 1000,
        };
        assert_eq!(none.pids().count(), 0);
    }

    #[test]
    fn only_processes_started_after_the_command_are_read() {
        use std::os::unix::process::CommandExt as _;
        // Started before the command: never looked at, though it lives on.
        let mut older = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let older_pid = i32::try_from(older.id()).unwrap_or_default();
        let marker = format!("reap-window-{}", std::process::id());
        // The command leaves an escapee in a session of its own, marked.
        let mut command = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 31 >/dev/null 2>&1 &"])
            .env(MARKER_VAR, &marker)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let pid = i32::try_from(command.id()).unwrap_or_default();
        let members = Members::spawned(pid, marker);
        let _ = command.wait();
        crate::process::procfs::tests::READS.with(|r| r.borrow_mut().clear());
        let found = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            members.any_alive()
        });
        assert!(found, "the escapee was not found");
        let read = crate::process::procfs::tests::READS.with(|r| r.borrow().clone());
        assert!(!read.contains(&older_pid), "an older process was read");
        assert!(!read.contains(&1), "pid 1 was read");
        members.signal(Signal::KILL);
        let gone = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            !members.any_alive()
        });
        assert!(gone, "the escapee survived");
        assert!(
            matches!(older.try_wait(), Ok(None)),
            "the older process was stopped"
        );
        let _ = older.kill();
        let _ = older.wait();
    }
}
