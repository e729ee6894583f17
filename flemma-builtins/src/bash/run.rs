//! Running one command in a pseudo-terminal, with a deadline and a cancellation token, and
//! stopping everything it started.

use std::path::PathBuf;
#[cfg(not(target_os = "linux"))]
use std::process::Stdio;
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::AsyncReadExt as _;
use tokio_util::sync::CancellationToken;

use super::collect::Collector;
use super::terminal::TerminalText;
use crate::process::reap::{MARKER_VAR, Members, stop_all};
/// How long output is still read after the command ended and its processes are gone.
const DRAIN: Duration = Duration::from_millis(500);
/// How many reads of what is already buffered the reader still makes when told to stop.
const LAST_READS: usize = 64;
/// The terminal's size: rows, columns.
const SIZE: (u16, u16) = (50, 200);

/// What to run.
#[derive(Debug)]
pub(crate) struct Command {
    pub(crate) argv: Vec<String>,
    pub(crate) cwd: PathBuf,
    /// The whole environment (nothing is inherited), later entries winning.
    pub(crate) env: Vec<(String, String)>,
    /// This call's marker (see [`crate::process::reap`]).
    pub(crate) marker: String,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It exited with this code (`128 + n` when killed by signal `n`).
    Exited(i32),
    /// The deadline passed.
    TimedOut,
    /// The token was cancelled.
    Cancelled,
}

/// Stops a call's processes with `SIGKILL` if it is dropped before [`Guard::disarm`]: the
/// future of the call was dropped (the runtime shut down, the caller gave up) before the
/// orderly stop.
struct Guard {
    members: Option<Members>,
}

impl Guard {
    fn disarm(&mut self) {
        self.members = None;
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(members) = self.members.take() {
            members.signal(Signal::KILL);
        }
    }
}

/// Runs `command`, feeding its terminal text to `collector`, until it exits, `timeout`
/// passes or `cancel` fires; then makes sure none of its processes is left (`SIGTERM`,
/// [`GRACE`](crate::process::reap::GRACE), `SIGKILL`) and reads what is left of the output.
///
/// # Errors
///
/// When the pseudo-terminal cannot be opened or the command cannot be spawned.
pub(crate) async fn run(
    command: Command,
    timeout: Duration,
    cancel: CancellationToken,
    collector: Collector,
) -> std::io::Result<(Ending, Collector)> {
    let (mut child, pty, pid) = spawn(&command)?;
    let members = Members::spawned(pid, command.marker);
    let mut guard = Guard {
        members: Some(members.clone()),
    };

    // The master side stays open here until the command's status is collected: closing it
    // hangs the terminal up, and the kernel sends `SIGHUP` to the session leader. The reader
    // sees the end of the output (`EIO`) as soon as the last descriptor of the terminal is
    // closed, which a command does before it exits (coreutils close stdout and stderr in an
    // `atexit` handler; `exec >/dev/null 2>&1` does it long before): had the reader's end
    // of the terminal been the only one, the command would often be killed by that `SIGHUP`
    // between its last write and its exit, and reported as exiting with code 129.
    let (pty, hold_open) = pty.into_split();

    // The reader owns the collector until it is told to stop or the terminal closes.
    let stop = CancellationToken::new();
    let mut reader = tokio::spawn(read_output(pty, stop.clone(), collector));

    let ending = tokio::select! {
        code = wait(&mut child) => Ending::Exited(code),
        () = tokio::time::sleep(timeout) => Ending::TimedOut,
        () = cancel.cancelled() => Ending::Cancelled,
    };
    let ending = match ending {
        Ending::Exited(code) => {
            // Whatever the command left running goes too.
            if members.any_alive() {
                stop_all(&members).await;
            }
            Ending::Exited(code)
        }
        other => {
            stop_all(&members).await;
            let _ = wait(&mut child).await;
            other
        }
    };
    guard.disarm();
    // The status is in, and nothing of the call is left: the terminal may hang up now.
    drop(hold_open);

    // The terminal closes once every process holding it is gone; a process outside the
    // call that inherited it would keep it open, so the wait is bounded.
    let collector = if let Ok(done) = tokio::time::timeout(DRAIN, &mut reader).await {
        done
    } else {
        stop.cancel();
        reader.await
    }
    .map_err(std::io::Error::other)?;
    Ok((ending, collector))
}

/// The started command.
#[cfg(target_os = "linux")]
type Child = crate::process::spawn::Child;
#[cfg(not(target_os = "linux"))]
type Child = tokio::process::Child;

/// Opens the pseudo-terminal and starts `command` on it: the child, the master side and the
/// child's process id. On Linux through `posix_spawn` ([`crate::process::spawn`]), elsewhere
/// through `pty-process` (a fork with a `pre_exec` hook).
fn spawn(command: &Command) -> std::io::Result<(Child, pty_process::Pty, i32)> {
    let (pty, pts) = pty_process::open().map_err(to_io)?;
    pty.resize(pty_process::Size::new(SIZE.0, SIZE.1))
        .map_err(to_io)?;
    raw_output(&pty)?;
    if command.argv.is_empty() {
        return Err(std::io::Error::other("empty command line"));
    }
    #[cfg(target_os = "linux")]
    {
        let terminal = rustix::pty::ptsname(&pty, Vec::new())?;
        let terminal = std::path::Path::new(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(terminal.as_bytes()),
        );
        let mut env: Vec<(&str, &str)> = command
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        env.push((MARKER_VAR, command.marker.as_str()));
        let child = crate::process::spawn::spawn(&crate::process::spawn::Spec {
            argv: &command.argv,
            cwd: &command.cwd,
            env,
            terminal,
        })?;
        // The child opened the slave by its name; this end must not stay open here, or the
        // reader would never see the terminal close. It is closed only now: closed before the
        // child had opened it, the master would report a hang-up, and tokio keeps a hang-up
        // as a final state, so the reader would spin on `EAGAIN` until the first output.
        drop(pts);
        let pid = child.pid();
        Ok((child, pty, pid))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let Some((program, args)) = command.argv.split_first() else {
            return Err(std::io::Error::other("empty command line"));
        };
        let child = pty_process::Command::new(program)
            .args(args)
            .current_dir(&command.cwd)
            .env_clear()
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .env(MARKER_VAR, &command.marker)
            .stdin(Stdio::null())
            .spawn(pts)
            .map_err(to_io)?;
        let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) else {
            return Err(std::io::Error::other("the command has no process id"));
        };
        Ok((child, pty, pid))
    }
}

/// Waits for the command to exit: its code (`128 + n` when killed by signal `n`; -1 when
/// the wait failed).
async fn wait(child: &mut Child) -> i32 {
    #[cfg(target_os = "linux")]
    {
        child.wait().await.unwrap_or(-1)
    }
    #[cfg(not(target_os = "linux"))]
    {
        child.wait().await.map_or(-1, exit_code)
    }
}

/// Feeds the terminal's text to `collector` until the terminal closes or `stop` fires, and
/// hands the collector back.
async fn read_output(
    mut pty: pty_process::OwnedReadPty,
    stop: CancellationToken,
    mut collector: Collector,
) -> Collector {
    let mut filter = TerminalText::new();
    let mut buf = vec![0_u8; 16 * 1024];
    let mut text = Vec::with_capacity(16 * 1024);
    let mut feed = |bytes: &[u8]| {
        filter.feed(bytes, &mut text);
        collector.push(&text);
        text.clear();
    };
    loop {
        let read = tokio::select! {
            biased;
            read = pty.read(&mut buf) => read,
            () = stop.cancelled() => {
                // What the command wrote is all in the terminal's buffer by now: take it
                // without waiting for more (a reader that was slow to run, on a loaded
                // machine, must not lose it), up to a bound for a writer that goes on.
                for _ in 0..LAST_READS {
                    match tokio::time::timeout(Duration::ZERO, pty.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => feed(&buf[..n]),
                        _ => break,
                    }
                }
                break;
            }
        };
        match read {
            // EIO: every process holding the terminal is gone.
            Ok(0) | Err(_) => break,
            Ok(n) => feed(&buf[..n]),
        }
    }
    filter.finish(&mut text);
    collector.push(&text);
    collector
}

/// Turns the terminal's output processing off (`stty -opost`): `\n` stays `\n` instead of
/// `\r\n`, which the terminal text reads the same, and the kernel passes output on some
/// twenty times faster (4 MB/s against 100 MB/s for `yes` on the development machine).
fn raw_output(pty: &pty_process::Pty) -> std::io::Result<()> {
    use rustix::termios::{OptionalActions, OutputModes, tcgetattr, tcsetattr};
    let mut termios = tcgetattr(pty)?;
    termios.output_modes.remove(OutputModes::OPOST);
    tcsetattr(pty, OptionalActions::Now, &termios)?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

fn to_io(error: pty_process::Error) -> std::io::Error {
    match error {
        pty_process::Error::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}
