//! Reading `/proc` (Linux): a process's state, session and start time (`/proc/<pid>/stat`),
//! and where the kernel's pid allocation stands (`/proc/loadavg`, `/proc/stat`).

use std::io::Read as _;

/// The fields of `/proc/<pid>/stat` used here.
pub(crate) struct Stat {
    pub(crate) state: u8,
    pub(crate) session: i32,
    pub(crate) start_time: u64,
}

impl Stat {
    /// `pid (comm) state ppid pgrp session …`; `comm` may hold spaces and parentheses, so
    /// the fields start after the last `)`.
    pub(crate) fn parse(stat: &[u8]) -> Option<Self> {
        let close = stat.iter().rposition(|&b| b == b')')?;
        let rest = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
        let mut fields = rest.split(' ');
        let state = *fields.next()?.as_bytes().first()?;
        let _ppid = fields.next()?;
        let _pgrp = fields.next()?;
        let session = fields.next()?.parse().ok()?;
        // Fields 7 to 21, then 22: the start time.
        let start_time = fields.nth(15)?.parse().ok()?;
        Some(Self {
            state,
            session,
            start_time,
        })
    }
}

impl Stat {
    /// The stat of process `pid`; `None` when it is gone or unreadable. One `read` into a
    /// buffer on the stack (`/proc` reports a size of 0, so `std::fs::read` would grow a
    /// buffer from 32 bytes: four or five reads).
    pub(crate) fn of(pid: i32) -> Option<Self> {
        #[cfg(test)]
        tests::READS.with(|reads| reads.borrow_mut().push(pid));
        let mut buf = [0_u8; 1024];
        let len = read_small(&format!("/proc/{pid}/stat"), &mut buf)?;
        Self::parse(buf.get(..len)?)
    }

    /// Whether the process has ended (a zombie or dead).
    pub(crate) fn has_ended(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }
}

/// Reads a small `/proc` file into `buf`; its length. A file longer than `buf` is read to its
/// end, and only its start kept.
fn read_small(path: &str, buf: &mut [u8]) -> Option<usize> {
    let mut file = std::fs::File::open(path).ok()?;
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                // A `/proc` file comes in one read when the buffer holds it.
                if buf[..len].ends_with(b"\n") {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(len)
}

/// The whole of a `/proc` file, read into a buffer of `capacity` bytes first: `/proc` reports
/// a size of 0, so `std::fs::read` would grow a buffer from 32 bytes, one `read` per doubling
/// (eight for a 4 KiB environment). `None` when it cannot be opened or read.
pub(crate) fn read_whole(path: &str, capacity: usize) -> Option<Vec<u8>> {
    let mut bytes = Vec::with_capacity(capacity);
    std::fs::File::open(path)
        .ok()?
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// Where pid allocation stands: the last pid the kernel gave out (in this pid namespace),
/// the number of tasks that exist, and the forks since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allocation {
    pub(crate) last_pid: i32,
    pub(crate) tasks: u64,
    pub(crate) forks: u64,
}

/// A `/proc` file of the whole system, opened once and read from its start each time (the
/// kernel writes such a file anew for a read at offset 0): a spawned command reads
/// `/proc/loadavg` and `/proc/stat` before it starts and after it ends, and an `open` and a
/// `close` each time cost more than the read. Opened close-on-exec, as every file here.
struct Kept {
    path: &'static str,
    file: std::sync::OnceLock<std::fs::File>,
}

impl Kept {
    const fn new(path: &'static str) -> Self {
        Self {
            path,
            file: std::sync::OnceLock::new(),
        }
    }

    /// The whole file, read into a buffer of `capacity` bytes first; `None` when it cannot
    /// be opened or read (opening is tried again next time).
    fn read(&self, capacity: usize) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt as _;
        let file = if let Some(file) = self.file.get() {
            file
        } else {
            let opened = std::fs::File::open(self.path).ok()?;
            self.file.get_or_init(|| opened)
        };
        let mut bytes = vec![0_u8; capacity.max(1)];
        let mut len = 0;
        loop {
            if len == bytes.len() {
                bytes.resize(len * 2, 0);
            }
            match file.read_at(&mut bytes[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        bytes.truncate(len);
        Some(bytes)
    }
}

/// `/proc/loadavg` and `/proc/stat`, kept open.
static LOADAVG: Kept = Kept::new("/proc/loadavg");
static SYSTEM_STAT: Kept = Kept::new("/proc/stat");

impl Allocation {
    /// Now; `None` when `/proc` does not say.
    pub(crate) fn now() -> Option<Self> {
        // `0.00 0.01 0.05 1/123 4567`: the tasks after the slash, the last pid.
        let bytes = LOADAVG.read(256)?;
        let loadavg = std::str::from_utf8(&bytes).ok()?;
        let mut fields = loadavg.split_ascii_whitespace().skip(3);
        let tasks = fields.next()?.split('/').nth(1)?.parse().ok()?;
        let last_pid = fields.next()?.parse().ok()?;
        Some(Self {
            last_pid,
            tasks,
            forks: forks()?,
        })
    }
}

/// The forks since boot (`processes` of `/proc/stat`, every task of every namespace).
pub(crate) fn forks() -> Option<u64> {
    // Read whole (the `processes` line comes after one line per CPU and the interrupt counts),
    // into a buffer that holds it on most machines: `/proc` reports a size of 0, so
    // `std::fs::read` would start from 32 bytes and read seven or eight times.
    let stat = SYSTEM_STAT.read(16 * 1024)?;
    let at = memchr::memmem::find(&stat, b"\nprocesses ")?;
    let rest = stat.get(at + b"\nprocesses ".len()..)?;
    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    std::str::from_utf8(rest.get(..end)?)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The highest pid plus one (`/proc/sys/kernel/pid_max`), read once.
pub(crate) fn pid_max() -> Option<i32> {
    static PID_MAX: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *PID_MAX.get_or_init(|| {
        let mut buf = [0_u8; 32];
        let len = read_small("/proc/sys/kernel/pid_max", &mut buf)?;
        std::str::from_utf8(buf.get(..len)?)
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    std::thread_local! {
        /// The pids whose stat this thread read.
        pub(crate) static READS: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    #[test]
    fn allocation_is_read() {
        let now = Allocation::now().unwrap_or_else(|| panic!("no /proc/loadavg"));
        assert!(now.last_pid > 0 && now.tasks > 0 && now.forks > 0);
        assert!(pid_max().is_some_and(|max| max > now.last_pid));
        let me = Stat::of(i32::try_from(std::process::id()).unwrap_or_default());
        assert!(me.is_some_and(|s| s.state != 0));
    }

    /// The files kept open are read anew each time: the forks counted grow with a fork
    /// between two reads, and the last pid is the one given out.
    #[test]
    fn kept_files_are_read_afresh() {
        let before = Allocation::now().unwrap_or_else(|| panic!("no /proc/loadavg"));
        let child = std::process::Command::new("true")
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(child.success());
        let after = Allocation::now().unwrap_or_else(|| panic!("no /proc/loadavg"));
        assert!(after.forks > before.forks, "{before:?} then {after:?}");
        assert_ne!(after.last_pid, before.last_pid);
        assert_eq!(forks().map(|f| f >= after.forks), Some(true));
    }

    #[test]
    fn stat_parses_odd_names() {
        let stat = Stat::parse(
            b"42 (a) b (c)) S 1 42 40 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 769110 3457024",
        )
        .unwrap_or_else(|| panic!());
        assert_eq!(
            (stat.state, stat.session, stat.start_time),
            (b'S', 40, 769_110)
        );
    }
}
