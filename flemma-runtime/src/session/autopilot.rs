//! The autopilot state machine, as a pure function of its triggers, so every
//! transition is tested on its own.

use crate::Next;

/// Where the autopilot loop is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AutopilotState {
    /// Nothing is happening; the conversation waits for the user.
    Idle,
    /// The tool cycle runs (or is about to) and the loop continues when it ends.
    Armed,
    /// A request is being sent and its response streamed.
    Sending,
    /// An empty `(pending)` block waits for a decision; running again resumes.
    Paused,
}

/// Why a [`Session::run`](crate::Session::run) returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stop {
    /// The model answered without asking for tools.
    Finished,
    /// Nothing to send or run: the conversation waits for the user.
    Idle,
    /// A call waits for approval (an empty `(pending)` block, or an `(approved)` block with
    /// edited content).
    AwaitingApproval,
    /// The model asked for tools more than `max_turns` times in a row (the warning
    /// `Autopilot stopped – exceeded <n> consecutive turns.` was emitted).
    MaxTurns,
    /// Autopilot is off (`tools.autopilot.enabled = false`): the response's tool calls wait
    /// for the next run.
    AutopilotOff,
    /// Calls still run (background jobs); run again once they are delivered.
    Running,
    /// The user cancelled the request or the tools.
    Cancelled,
    /// A `UserPromptSubmit` hook blocked the send (a
    /// [`SessionEvent::PromptBlocked`](crate::SessionEvent::PromptBlocked) said why).
    PromptBlocked,
    /// The next request would cross a budget (`budget.run.*`, `budget.conversation.*`); a
    /// [`SessionEvent::BudgetReached`](crate::SessionEvent::BudgetReached) said which and
    /// what was spent. Nothing was sent; a run with a larger budget sends it.
    BudgetReached,
    /// Every call has its result and the conversation would be sent next, but the session
    /// has no provider ([`Session::tools_only`](crate::Session::tools_only)).
    NoProvider,
}

/// What happened, as the state machine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// The host asked to send or execute (a keypress, `flemma run`).
    Run,
    /// The tool cycle ended with `next`.
    ToolsComplete(Next),
    /// A response completed.
    ResponseComplete {
        /// Whether the response asked for tools.
        tool_uses: bool,
        /// `tools.autopilot.enabled`.
        enabled: bool,
        /// `tools.autopilot.max_turns`.
        max_turns: u64,
    },
    /// Background jobs were delivered while the loop was idle, and the resume delay passed
    /// (deliveries at idle resume the loop).
    JobsDelivered,
    /// The loop would send, and the session has no provider.
    NoProvider,
    /// A `Stop` hook kept a finished run going ([`Rest::AskStopHooks`] answered yes).
    KeptGoing,
    /// The user cancelled.
    Cancel,
    /// The request or the cycle failed.
    Error,
}

/// What the loop does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Run the tool cycle (Phase 1 and 2).
    Cycle,
    /// Send the conversation (Phase 3).
    Send,
    /// Return from the run.
    Stop(Stop),
}

/// The state, the consecutive turns, whether the user disarmed the loop, and how many times
/// `Stop` hooks kept this run going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Autopilot {
    pub(crate) state: AutopilotState,
    pub(crate) turns: u64,
    pub(crate) disarmed: bool,
    pub(crate) kept_going: u64,
}

impl Default for Autopilot {
    fn default() -> Self {
        Self {
            state: AutopilotState::Idle,
            turns: 0,
            disarmed: false,
            kept_going: 0,
        }
    }
}

/// What a run knows when the machine stops it `Finished` or `Idle`: the facts
/// [`Autopilot::at_rest`] decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AtRest {
    /// Background jobs still run.
    pub(crate) jobs_running: bool,
    /// The session waits for them (`SessionBuilder::wait_for_jobs`).
    pub(crate) wait_for_jobs: bool,
    /// `tools.autopilot.enabled`.
    pub(crate) enabled: bool,
    /// `max_turns` (the session's or the options'): also how many times `Stop` hooks may keep
    /// one run going.
    pub(crate) max_turns: u64,
}

/// What a run does at rest (see [`Autopilot::at_rest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rest {
    /// Return this stop.
    Return(Stop),
    /// Wait for the running jobs, deliver each, and resume after the last delivery:
    /// then [`Trigger::JobsDelivered`] (or [`Trigger::Cancel`]).
    AwaitJobs,
    /// Ask the `Stop` hooks whether the run goes on (`again`: one kept it going before); yes
    /// is [`Trigger::KeptGoing`], no returns [`Stop::Finished`].
    AskStopHooks {
        /// A hook kept this run going before.
        again: bool,
    },
}

impl Autopilot {
    /// What a run that the machine stopped at `stop` does next, given `facts`: a finished or
    /// idle run waits for its background jobs when the session waits for jobs and the
    /// autopilot is on and armed (without waiting it returns [`Stop::Running`]); a
    /// finished run with no jobs asks the `Stop` hooks, at most `max_turns` times; anything
    /// else returns.
    pub(crate) fn at_rest(&self, stop: Stop, facts: AtRest) -> Rest {
        match stop {
            Stop::Finished | Stop::Idle if facts.jobs_running => {
                if !facts.wait_for_jobs {
                    Rest::Return(Stop::Running)
                } else if !facts.enabled || self.disarmed {
                    Rest::Return(stop)
                } else {
                    Rest::AwaitJobs
                }
            }
            Stop::Finished if self.kept_going < facts.max_turns => Rest::AskStopHooks {
                again: self.kept_going > 0,
            },
            other => Rest::Return(other),
        }
    }
}

/// The warning when `max_turns` is exceeded (with an en dash).
pub(crate) fn max_turns_warning(max_turns: u64) -> String {
    format!("Autopilot stopped – exceeded {max_turns} consecutive turns.")
}

impl Autopilot {
    /// Applies `trigger`; returns the action and, when `max_turns` was exceeded, the warning.
    pub(crate) fn on(&mut self, trigger: Trigger) -> (Action, Option<String>) {
        use AutopilotState::{Armed, Idle, Paused, Sending};
        let (state, action, warning) = match trigger {
            // A run starts with the cycle (send_or_execute); the count of consecutive turns
            // starts again.
            Trigger::Run => {
                self.turns = 0;
                self.disarmed = false;
                self.kept_going = 0;
                (Armed, Action::Cycle, None)
            }
            // A `Stop` hook's reason is a new prompt: the count of consecutive turns starts
            // again, the count of continuations goes on.
            Trigger::KeptGoing => {
                self.turns = 0;
                self.disarmed = false;
                self.kept_going += 1;
                (Armed, Action::Cycle, None)
            }
            Trigger::ToolsComplete(next) => match next {
                Next::Send => (Sending, Action::Send, None),
                Next::AwaitApproval => (Paused, Action::Stop(Stop::AwaitingApproval), None),
                Next::Running => (Armed, Action::Stop(Stop::Running), None),
                Next::Idle => (Idle, Action::Stop(Stop::Idle), None),
            },
            Trigger::ResponseComplete {
                tool_uses: false, ..
            } => (Idle, Action::Stop(Stop::Finished), None),
            Trigger::ResponseComplete { enabled: false, .. } => {
                (Idle, Action::Stop(Stop::AutopilotOff), None)
            }
            Trigger::ResponseComplete { max_turns, .. } => {
                self.turns += 1;
                if self.turns > max_turns {
                    (
                        Idle,
                        Action::Stop(Stop::MaxTurns),
                        Some(max_turns_warning(max_turns)),
                    )
                } else {
                    (Armed, Action::Cycle, None)
                }
            }
            // Deliveries resume an idle loop; the count of consecutive turns goes on.
            Trigger::JobsDelivered => (Armed, Action::Cycle, None),
            Trigger::NoProvider => (Idle, Action::Stop(Stop::NoProvider), None),
            Trigger::Cancel => {
                self.disarmed = true;
                (Idle, Action::Stop(Stop::Cancelled), None)
            }
            Trigger::Error => {
                self.disarmed = true;
                (Idle, Action::Stop(Stop::Idle), None)
            }
        };
        self.state = state;
        (action, warning)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AutopilotState::{Armed, Idle, Paused, Sending};

    fn response(tool_uses: bool, max_turns: u64) -> Trigger {
        Trigger::ResponseComplete {
            tool_uses,
            enabled: true,
            max_turns,
        }
    }

    /// Every transition of spec §7.10: (state before, turns before, trigger) → (state after,
    /// action, turns after, warning).
    #[test]
    fn every_transition_of_the_table() {
        #[rustfmt::skip]
        let table: Vec<(AutopilotState, u64, Trigger, AutopilotState, Action, u64, bool)> = vec![
            // idle → armed: a run starts with the cycle and resets the count
            (Idle, 7, Trigger::Run, Armed, Action::Cycle, 0, false),
            // paused → armed: running again resumes after an approval
            (Paused, 2, Trigger::Run, Armed, Action::Cycle, 0, false),
            // armed → sending: every call has its result
            (Armed, 1, Trigger::ToolsComplete(Next::Send), Sending, Action::Send, 1, false),
            // armed → paused: an empty pending block
            (Armed, 1, Trigger::ToolsComplete(Next::AwaitApproval), Paused, Action::Stop(Stop::AwaitingApproval), 1, false),
            // armed stays armed while calls run (background jobs)
            (Armed, 1, Trigger::ToolsComplete(Next::Running), Armed, Action::Stop(Stop::Running), 1, false),
            // armed → idle: nothing to send
            (Armed, 0, Trigger::ToolsComplete(Next::Idle), Idle, Action::Stop(Stop::Idle), 0, false),
            // sending → armed: the response asked for tools (turn counted)
            (Sending, 0, response(true, 100), Armed, Action::Cycle, 1, false),
            (Sending, 99, response(true, 100), Armed, Action::Cycle, 100, false),
            // sending → idle: one turn too many, with the warning
            (Sending, 100, response(true, 100), Idle, Action::Stop(Stop::MaxTurns), 101, true),
            (Sending, 0, response(true, 0), Idle, Action::Stop(Stop::MaxTurns), 1, true),
            // sending → idle: a final answer
            (Sending, 3, response(false, 100), Idle, Action::Stop(Stop::Finished), 3, false),
            // autopilot off: the tool calls wait for the next run
            (Sending, 0, Trigger::ResponseComplete { tool_uses: true, enabled: false, max_turns: 100 }, Idle, Action::Stop(Stop::AutopilotOff), 0, false),
            // idle → armed: background jobs delivered at idle resume the loop
            (Idle, 2, Trigger::JobsDelivered, Armed, Action::Cycle, 2, false),
            // sending → idle: a session without a provider stops where it would send
            (Sending, 2, Trigger::NoProvider, Idle, Action::Stop(Stop::NoProvider), 2, false),
            // disarm on cancel and on error, from any state
            (Sending, 1, Trigger::Cancel, Idle, Action::Stop(Stop::Cancelled), 1, false),
            (Armed, 1, Trigger::Cancel, Idle, Action::Stop(Stop::Cancelled), 1, false),
            (Sending, 1, Trigger::Error, Idle, Action::Stop(Stop::Idle), 1, false),
            (Armed, 1, Trigger::Error, Idle, Action::Stop(Stop::Idle), 1, false),
        ];
        for (before, turns, trigger, after, action, turns_after, warns) in table {
            let mut pilot = Autopilot {
                state: before,
                turns,
                ..Autopilot::default()
            };
            let (got, warning) = pilot.on(trigger);
            let row = format!("{before:?} {turns} {trigger:?}");
            assert_eq!(pilot.state, after, "{row}");
            assert_eq!(got, action, "{row}");
            assert_eq!(pilot.turns, turns_after, "{row}");
            assert_eq!(warning.is_some(), warns, "{row}");
            assert_eq!(
                pilot.disarmed,
                matches!(trigger, Trigger::Cancel | Trigger::Error),
                "{row}"
            );
        }
    }

    /// Every case of [`Autopilot::at_rest`]: (stop, jobs running, wait for jobs, enabled,
    /// disarmed, kept going so far, max turns) → what the run does.
    #[test]
    fn at_rest_waits_for_jobs_asks_the_stop_hooks_or_returns() {
        use Stop::{AwaitingApproval, Finished, Idle, Running};
        type Row = (Stop, bool, bool, bool, bool, u64, u64, Rest);
        #[rustfmt::skip]
        let table: Vec<Row> = vec![
            // jobs run: wait for them when the session waits and the autopilot is on and armed
            (Finished, true, true, true, false, 0, 100, Rest::AwaitJobs),
            (Idle, true, true, true, false, 0, 100, Rest::AwaitJobs),
            // a session that does not wait returns `Running`
            (Finished, true, false, true, false, 0, 100, Rest::Return(Running)),
            (Idle, true, false, true, false, 0, 100, Rest::Return(Running)),
            // autopilot off or disarmed: the stop as it is (no Stop hooks while jobs run)
            (Finished, true, true, false, false, 0, 100, Rest::Return(Finished)),
            (Idle, true, true, true, true, 0, 100, Rest::Return(Idle)),
            // no jobs: a finished run asks the Stop hooks, at most max_turns times
            (Finished, false, true, true, false, 0, 100, Rest::AskStopHooks { again: false }),
            (Finished, false, true, true, false, 3, 100, Rest::AskStopHooks { again: true }),
            (Finished, false, true, true, false, 100, 100, Rest::Return(Finished)),
            (Finished, false, true, true, false, 0, 0, Rest::Return(Finished)),
            // an idle run without jobs, and every other stop, returns
            (Idle, false, true, true, false, 0, 100, Rest::Return(Idle)),
            (AwaitingApproval, true, true, true, false, 0, 100, Rest::Return(AwaitingApproval)),
        ];
        for (stop, jobs_running, wait_for_jobs, enabled, disarmed, kept_going, max_turns, rest) in
            table
        {
            let pilot = Autopilot {
                disarmed,
                kept_going,
                ..Autopilot::default()
            };
            let facts = AtRest {
                jobs_running,
                wait_for_jobs,
                enabled,
                max_turns,
            };
            assert_eq!(
                pilot.at_rest(stop, facts),
                rest,
                "{stop:?} {facts:?} {pilot:?}"
            );
        }
    }

    #[test]
    fn a_stop_hook_keeps_a_run_going_without_resetting_its_count() {
        let mut pilot = Autopilot::default();
        pilot.on(Trigger::Run);
        pilot.on(Trigger::KeptGoing);
        pilot.on(Trigger::KeptGoing);
        assert_eq!((pilot.kept_going, pilot.state), (2, AutopilotState::Armed));
        pilot.on(Trigger::Run);
        assert_eq!(pilot.kept_going, 0);
    }

    #[test]
    fn the_max_turns_warning_is_the_spec_text() {
        assert_eq!(
            max_turns_warning(100),
            "Autopilot stopped \u{2013} exceeded 100 consecutive turns."
        );
    }
}
