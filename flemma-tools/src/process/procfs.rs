//! Reading `/proc/<pid>/stat` (Linux): a process's state, session and start time.

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
    /// The stat of process `pid`; `None` when it is gone or unreadable.
    pub(crate) fn of(pid: i32) -> Option<Self> {
        Self::parse(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Whether the process has ended (a zombie or dead).
    pub(crate) fn has_ended(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
