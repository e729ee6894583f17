//! The signals `flemma run` answers: SIGINT (Ctrl-C), SIGTERM and SIGHUP.
//!
//! Each is turned into a message for the run's loop, which cancels what runs and writes the
//! abort text (spec §7.7) before the command exits; none of them kills the command outright.

use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

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

/// Starts listening (in the current runtime); the handlers are installed when this returns, so
/// a signal sent afterwards is never lost.
pub(super) fn listen() -> std::io::Result<UnboundedReceiver<Signal>> {
    let (sender, receiver) = unbounded_channel();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        tokio::spawn(async move {
            loop {
                let signal = tokio::select! {
                    Some(()) = interrupt.recv() => Signal::Interrupt,
                    Some(()) = terminate.recv() => Signal::Terminate,
                    Some(()) = hangup.recv() => Signal::Hangup,
                    else => break,
                };
                if sender.send(signal).is_err() {
                    break;
                }
            }
        });
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
