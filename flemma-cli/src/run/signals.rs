//! The signals `flemma run` answers: SIGINT (Ctrl-C), SIGTERM and SIGHUP.
//!
//! Each is turned into a message for the run's loop, which cancels what runs and writes the
//! abort text before the command exits; none of them kills the command outright,
//! unless the loop does not end within its grace: then a watchdog does.

use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// How long the command waits, after the second Ctrl-C (or a SIGTERM or SIGHUP), for the
/// cancelled tools and request to write their abort text before it exits regardless.
pub(super) const GRACE: Duration = Duration::from_secs(5);

/// A signal the run was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Signal {
    /// SIGINT: Ctrl-C on the terminal, `kill -INT`.
    Interrupt,
    /// SIGTERM: `kill`, a service manager stopping the command.
    Terminate,
    /// SIGHUP: the terminal went away.
    Hangup,
}

impl Signal {
    /// The exit code of a command that ended because of the signal: 128 + its number, as a
    /// shell reports it.
    pub(super) fn exit_code(self) -> u8 {
        match self {
            Self::Hangup => 129,
            Self::Interrupt => 130,
            Self::Terminate => 143,
        }
    }

    /// How the status line names it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "Ctrl-C",
            Self::Terminate => "SIGTERM",
            Self::Hangup => "SIGHUP",
        }
    }
}

/// When the command must be gone after a signal, whatever its own loop does: a SIGTERM or
/// SIGHUP, or the second Ctrl-C, arms it; the loop normally exits within its grace
/// ([`GRACE`]) and this never fires.
#[derive(Debug, Default)]
struct Watchdog {
    interrupts: u32,
    armed: bool,
}

/// How long after the signal that arms it the watchdog ends the process.
const WATCHDOG: Duration = Duration::from_secs(GRACE.as_secs() + 3);

impl Watchdog {
    /// The exit code to end the process with after [`WATCHDOG`], when `signal` arms it.
    fn on(&mut self, signal: Signal) -> Option<u8> {
        if signal == Signal::Interrupt {
            self.interrupts += 1;
            if self.interrupts < 2 {
                return None;
            }
        }
        if self.armed {
            return None;
        }
        self.armed = true;
        Some(signal.exit_code())
    }
}

/// Starts listening; the handlers are installed when this returns, so a signal sent
/// afterwards is never lost. The signals are received on a thread of their own (with a
/// runtime of its own), so that they reach the command even when its runtime is stuck (a tool
/// that blocks it, a frontmatter that never ends); there a [`Watchdog`] ends the process if
/// the run's loop has not exited in time.
pub(super) fn listen() -> std::io::Result<UnboundedReceiver<Signal>> {
    let (sender, receiver) = unbounded_channel();
    #[cfg(unix)]
    {
        let (ready, installed) = std::sync::mpsc::channel::<std::io::Result<()>>();
        std::thread::Builder::new()
            .name("flemma-signals".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = ready.send(Err(error));
                        return;
                    }
                };
                runtime.block_on(async move {
                    use tokio::signal::unix::{SignalKind, signal};
                    let handlers = (|| {
                        Ok::<_, std::io::Error>((
                            signal(SignalKind::interrupt())?,
                            signal(SignalKind::terminate())?,
                            signal(SignalKind::hangup())?,
                        ))
                    })();
                    let (mut interrupt, mut terminate, mut hangup) = match handlers {
                        Ok(handlers) => {
                            let _ = ready.send(Ok(()));
                            handlers
                        }
                        Err(error) => {
                            let _ = ready.send(Err(error));
                            return;
                        }
                    };
                    let mut watchdog = Watchdog::default();
                    loop {
                        let signal = tokio::select! {
                            Some(()) = interrupt.recv() => Signal::Interrupt,
                            Some(()) = terminate.recv() => Signal::Terminate,
                            Some(()) = hangup.recv() => Signal::Hangup,
                            else => break,
                        };
                        if let Some(code) = watchdog.on(signal) {
                            std::thread::spawn(move || {
                                std::thread::sleep(WATCHDOG);
                                std::process::exit(i32::from(code));
                            });
                        }
                        // The loop may be gone (the run ended): the watchdog still stands.
                        let _ = sender.send(signal);
                    }
                });
            })?;
        installed
            .recv()
            .map_err(|_| std::io::Error::other("the signal thread did not start"))??;
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if sender.send(Signal::Interrupt).is_err() {
                break;
            }
        }
    });
    Ok(receiver)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_termination_or_the_second_ctrl_c_arms_the_watchdog_once() {
        let mut w = Watchdog::default();
        assert_eq!(w.on(Signal::Interrupt), None);
        assert_eq!(w.on(Signal::Interrupt), Some(130));
        assert_eq!(w.on(Signal::Terminate), None);
        let mut w = Watchdog::default();
        assert_eq!(w.on(Signal::Terminate), Some(143));
        assert_eq!(w.on(Signal::Hangup), None);
        let mut w = Watchdog::default();
        assert_eq!(w.on(Signal::Hangup), Some(129));
    }
}
