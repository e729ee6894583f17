//! What the executor tells the user while a command runs a cycle, shown the same way by every
//! command: its warnings (the content-overwrite protection, a result that could
//! not be stored, a resolver that failed) as `warning: <text>`, and what opening the
//! conversation found of its background jobs (counted, as the Flemma plugin's notification does)
//! as `jobs: <n> re-adopted, <n> finished while away, <n> lost, <n> run elsewhere`.
//!
//! `flemma run` shows each as it comes ([`Notice::of`] on its events); `flemma cycle`,
//! `approve`, `reject` and `approve-all` collect them while they work ([`collect`]) and print
//! them on stderr afterwards; `flemma cycle --json` also reports them as `warnings` and
//! `recovered`.

use std::future::Future;
use std::io::Write as _;

use flemma::runtime::jobs::Recovery;
use flemma::runtime::{Event, Executor};
use serde_json::json;

/// One thing the user should be told.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Notice {
    /// An executor warning, its text as the executor wrote it.
    Warning(String),
    /// Orphan recovery and re-adoption found jobs.
    Recovered(Recovery),
    /// A call ended without a result and waits (a subagent's call waiting for approval):
    /// `waiting: TOOL ID: what it waits for`.
    Waiting(String),
}

impl Notice {
    /// The notice an executor event carries, if any.
    pub(crate) fn of(event: &Event) -> Option<Self> {
        match event {
            Event::Warning(text) => Some(Self::Warning(text.clone())),
            Event::JobsRecovered(found) => Some(Self::Recovered(found.clone())),
            Event::Missed { count } => Some(Self::Warning(missed(*count))),
            Event::CallDeferred { id, tool, reason } => {
                Some(Self::Waiting(format!("waiting: {tool} {id}: {reason}")))
            }
            _ => None,
        }
    }

    /// The line shown on stderr.
    pub(crate) fn line(&self) -> String {
        match self {
            Self::Warning(text) => warning_line(text),
            Self::Waiting(line) => line.clone(),
            Self::Recovered(found) => format!(
                "jobs: {} re-adopted, {} finished while away, {} lost, {} run elsewhere",
                found.adopted.len(),
                found.finished.len(),
                found.lost.len(),
                found.elsewhere.len()
            ),
        }
    }
}

/// The warning for events a subscriber missed (its queue of
/// [`DEFAULT_CAPACITY`](flemma::runtime::fanout::DEFAULT_CAPACITY) events was full).
pub(crate) fn missed(count: u64) -> String {
    format!("{count} events were missed")
}

/// A warning as stderr shows it (executor and session warnings alike).
pub(crate) fn warning_line(text: &str) -> String {
    format!("warning: {text}")
}

/// The notices of one command, in the order they came.
#[derive(Debug, Default)]
pub(crate) struct Notices(Vec<Notice>);

impl Notices {
    fn push(&mut self, event: &Event) {
        self.0.extend(Notice::of(event));
    }

    /// Writes one line per notice to stderr.
    pub(crate) fn print(&self) {
        let mut err = std::io::stderr().lock();
        for notice in &self.0 {
            let _ = writeln!(err, "{}", crate::visible::text(&notice.line()));
        }
    }

    /// The warnings' texts (`--json`'s `warnings`).
    pub(crate) fn warnings(&self) -> serde_json::Value {
        self.0
            .iter()
            .filter_map(|n| match n {
                Notice::Warning(text) => Some(json!(text)),
                Notice::Recovered(_) | Notice::Waiting(_) => None,
            })
            .collect()
    }

    /// The jobs recovery found, by outcome (`--json`'s `recovered`; empty lists when it found
    /// none).
    pub(crate) fn recovered(&self) -> serde_json::Value {
        let mut all = Recovery::default();
        for notice in &self.0 {
            if let Notice::Recovered(found) = notice {
                all.adopted.extend(found.adopted.iter().cloned());
                all.finished.extend(found.finished.iter().cloned());
                all.lost.extend(found.lost.iter().cloned());
                all.elsewhere.extend(found.elsewhere.iter().cloned());
            }
        }
        json!({
            "adopted": all.adopted,
            "finished": all.finished,
            "lost": all.lost,
            "elsewhere": all.elsewhere,
        })
    }
}

/// Runs `work` and collects the notices `executor` emits meanwhile. Events are read while the
/// work runs, and the subscription has a queue of its own of
/// [`DEFAULT_CAPACITY`](flemma::runtime::fanout::DEFAULT_CAPACITY) events, so a long cycle
/// cannot make it miss any; should it fall that far behind anyway, a notice says how many
/// events were missed (`Event::Missed`).
pub(crate) async fn collect<T>(executor: &Executor, work: impl Future<Output = T>) -> (T, Notices) {
    let mut events = executor.subscribe();
    let mut notices = Notices::default();
    tokio::pin!(work);
    let result = loop {
        tokio::select! {
            biased;
            received = events.recv() => match received {
                Some(event) => notices.push(&event),
                // The executor outlives this function: the stream cannot end here.
                None => break work.await,
            },
            result = &mut work => break result,
        }
    };
    while let Some(event) = events.try_recv() {
        notices.push(&event);
    }
    (result, notices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_and_recovery_are_lines_of_their_own() {
        let recovery = Recovery {
            lost: vec![flemma::ids::JobId::sanitized("job_gone1234")],
            ..Recovery::default()
        };
        let notices = Notices(vec![
            Notice::Warning("1 tool result(s) have edited content".into()),
            Notice::Recovered(recovery),
        ]);
        let lines: Vec<String> = notices.0.iter().map(Notice::line).collect();
        assert_eq!(
            lines,
            [
                "warning: 1 tool result(s) have edited content",
                "jobs: 0 re-adopted, 0 finished while away, 1 lost, 0 run elsewhere",
            ]
        );
        assert_eq!(
            notices.warnings(),
            json!(["1 tool result(s) have edited content"])
        );
        assert_eq!(
            notices.recovered(),
            json!({"adopted": [], "finished": [], "lost": ["job_gone1234"], "elsewhere": []})
        );
        assert_eq!(Notice::of(&Event::ConversationIdle), None);
        assert_eq!(
            Notice::of(&Event::Missed { count: 3 }).map(|n| n.line()),
            Some("warning: 3 events were missed".to_owned())
        );
    }
}
