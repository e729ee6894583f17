//! Starting a command on a pseudo-terminal without copying the host (Linux).
//!
//! `std::process::Command` can start a process with `posix_spawn` (the kernel's
//! `clone(CLONE_VM | CLONE_VFORK)`: nothing of the host is copied), but not in a session of its
//! own: that needs a `pre_exec` hook, and with one std forks, copying the host's page tables,
//! and the host then takes a copy-on-write fault for each page it writes until the child has
//! called `exec`. For a host with a runtime, a Lua state and a parsed conversation that was
//! the largest cost of a `bash` call after the shell's own start.
//!
//! Here glibc's `posix_spawn` does it all: `POSIX_SPAWN_SETSID` makes the child a session
//! leader, and the terminal's slave, opened by its path after that (without `O_NOCTTY`),
//! becomes its controlling terminal, as `TIOCSCTTY` made it before. What `posix_spawn` cannot
//! set is the working directory (glibc's `posix_spawn_file_actions_addchdir_np` has no safe
//! binding), so the spawns run on one thread of their own whose working directory is its own
//! (`unshare(CLONE_FS)`): it changes to the command's directory, and the child starts there.
//!
//! A child is reaped by the task that waits for it: its pidfd is registered with that task's
//! runtime, and [`Child::wait`] reaps it when the pidfd turns readable. A child whose
//! [`Child`] is dropped first, or started where no runtime does I/O, is reaped by one thread
//! that waits on such pidfds (epoll).

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};

use nix::fcntl::OFlag;
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags};
use nix::sys::signal::SigSet;
use nix::sys::stat::Mode;
use rustix::event::{EventfdFlags, epoll};
use rustix::process::{WaitId, WaitIdOptions};

/// What to start.
#[derive(Debug)]
pub(crate) struct Spec<'a> {
    /// The program and its arguments; a program without a `/` is looked up in the `PATH` of
    /// `env` (`/bin:/usr/bin` without one), as `std::process::Command` does.
    pub(crate) argv: &'a [String],
    /// The working directory.
    pub(crate) cwd: &'a Path,
    /// The whole environment, later entries winning.
    pub(crate) env: Vec<(&'a str, &'a str)>,
    /// The terminal's slave side (`/dev/pts/N`): stdout, stderr and the controlling
    /// terminal. Stdin is `/dev/null`.
    pub(crate) terminal: &'a Path,
}

/// A started child.
#[derive(Debug)]
pub(crate) struct Child {
    pid: i32,
    exit: Exit,
}

/// How a [`Child`]'s exit is waited for.
#[derive(Debug)]
enum Exit {
    /// Its pidfd, registered with the runtime of the task that started it: the task reaps it
    /// itself when the pidfd turns readable (no thread hand-off). Handed to the waiting thread
    /// when the child is dropped before that.
    Fd(tokio::io::unix::AsyncFd<OwnedFd>),
    /// The waiting thread reaps it (a runtime without I/O, or no runtime).
    Thread(tokio::sync::oneshot::Receiver<i32>),
    /// Reaped, its status given out.
    Reaped,
}

impl Child {
    /// The child's process id.
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits for the child to exit and reaps it: its exit code, or `128 + n` when signal `n`
    /// ended it. Cancel-safe: a wait dropped before the exit leaves the child to the next one
    /// (or, should the child be dropped, to the waiting thread).
    ///
    /// # Errors
    ///
    /// When it was already waited for, or it could not be waited for.
    pub(crate) async fn wait(&mut self) -> std::io::Result<i32> {
        let code = match &mut self.exit {
            Exit::Reaped => return Err(std::io::Error::other("the child was already waited for")),
            Exit::Thread(exited) => exited.await.map_err(|_| {
                std::io::Error::other("the waiting thread could not wait for the child")
            })?,
            Exit::Fd(pidfd) => loop {
                let mut ready = pidfd.readable().await?;
                match reap(pidfd.get_ref())? {
                    Some(code) => break code,
                    None => ready.clear_ready(),
                }
            },
        };
        self.exit = Exit::Reaped;
        Ok(code)
    }
}

impl Drop for Child {
    /// A child not reaped yet is handed to the waiting thread, which reaps it when it exits.
    fn drop(&mut self) {
        if let Exit::Fd(pidfd) = std::mem::replace(&mut self.exit, Exit::Reaped) {
            let _ = wait_for(pidfd.into_inner());
        }
    }
}

/// The exit code of the child behind `pidfd` when it has exited (reaping it), `None` while
/// it runs.
fn reap(pidfd: &OwnedFd) -> std::io::Result<Option<i32>> {
    let status = rustix::process::waitid(
        WaitId::PidFd(pidfd.as_fd()),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
    )?;
    Ok(status.map(|status| {
        status
            .exit_status()
            .or_else(|| status.terminating_signal().map(|s| 128 + s))
            .unwrap_or(-1)
    }))
}

/// The thread that reaps the spawned children: one epoll set of their pidfds, and an
/// eventfd that tells it of new ones. A child whose [`Child`] was dropped is still reaped.
struct Waiter {
    wake: OwnedFd,
    queue: Mutex<Vec<(OwnedFd, tokio::sync::oneshot::Sender<i32>)>>,
}

/// The key of the eventfd in the epoll set (pidfds get 1, 2, …).
const WAKE: u64 = 0;

fn waiter() -> std::io::Result<Arc<Waiter>> {
    static WAITER: Mutex<Option<Arc<Waiter>>> = Mutex::new(None);
    let mut slot = WAITER
        .lock()
        .map_err(|_| std::io::Error::other("the waiting thread's start is poisoned"))?;
    if let Some(waiter) = slot.as_ref() {
        return Ok(Arc::clone(waiter));
    }
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    let wake = rustix::event::eventfd(0, EventfdFlags::CLOEXEC)?;
    epoll::add(
        &epoll,
        &wake,
        epoll::EventData::new_u64(WAKE),
        epoll::EventFlags::IN,
    )?;
    let waiter = Arc::new(Waiter {
        wake,
        queue: Mutex::new(Vec::new()),
    });
    let theirs = Arc::clone(&waiter);
    std::thread::Builder::new()
        .name("flemma-wait".to_owned())
        .spawn(move || reap_loop(&epoll, &theirs))?;
    *slot = Some(Arc::clone(&waiter));
    Ok(waiter)
}

fn reap_loop(epoll: &OwnedFd, waiter: &Waiter) {
    let mut waiting: std::collections::HashMap<u64, (OwnedFd, tokio::sync::oneshot::Sender<i32>)> =
        std::collections::HashMap::new();
    let mut next = WAKE + 1;
    let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
    loop {
        events.clear();
        match epoll::wait(epoll, rustix::buffer::spare_capacity(&mut events), None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(error) => {
                tracing::error!(%error, "the waiting thread stops: epoll_wait failed");
                return;
            }
        }
        for event in &events {
            let key = event.data.u64();
            if key == WAKE {
                let mut count = [0_u8; 8];
                let _ = rustix::io::read(&waiter.wake, &mut count);
                let new = waiter
                    .queue
                    .lock()
                    .map(|mut queue| std::mem::take(&mut *queue))
                    .unwrap_or_default();
                for (pidfd, sender) in new {
                    let key = next;
                    next += 1;
                    // A pidfd added after its process exited is readable at once.
                    if let Err(error) = epoll::add(
                        epoll,
                        &pidfd,
                        epoll::EventData::new_u64(key),
                        epoll::EventFlags::IN,
                    ) {
                        tracing::error!(%error, "a child cannot be waited for");
                        continue;
                    }
                    waiting.insert(key, (pidfd, sender));
                }
            } else if let Some((pidfd, _)) = waiting.get(&key) {
                let code = match reap(pidfd) {
                    Ok(None) => continue,
                    Ok(Some(code)) => code,
                    Err(_) => -1,
                };
                if let Some((pidfd, sender)) = waiting.remove(&key) {
                    let _ = epoll::delete(epoll, &pidfd);
                    let _ = sender.send(code);
                }
            }
        }
    }
}

/// Hands `pidfd` to the waiting thread: the receiver gets the exit code.
fn wait_for(pidfd: OwnedFd) -> std::io::Result<tokio::sync::oneshot::Receiver<i32>> {
    let waiter = waiter()?;
    let (sender, receiver) = tokio::sync::oneshot::channel();
    waiter
        .queue
        .lock()
        .map_err(|_| std::io::Error::other("the waiting thread's queue is poisoned"))?
        .push((pidfd, sender));
    rustix::io::write(&waiter.wake, &1_u64.to_ne_bytes())?;
    Ok(receiver)
}

/// One request to the spawning thread.
struct Request {
    path: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: PathBuf,
    terminal: CString,
    reply: mpsc::SyncSender<std::io::Result<i32>>,
}

/// The spawning thread's queue, started on first use.
fn spawner() -> std::io::Result<mpsc::Sender<Request>> {
    static SPAWNER: OnceLock<Mutex<Option<mpsc::Sender<Request>>>> = OnceLock::new();
    let slot = SPAWNER.get_or_init(|| Mutex::new(None));
    let mut slot = slot
        .lock()
        .map_err(|_| std::io::Error::other("the spawning thread's queue is poisoned"))?;
    if let Some(sender) = slot.as_ref() {
        return Ok(sender.clone());
    }
    let (sender, requests) = mpsc::channel::<Request>();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("flemma-spawn".to_owned())
        .spawn(move || serve(&requests, &ready_tx))?;
    ready_rx
        .recv()
        .map_err(|_| std::io::Error::other("the spawning thread did not start"))??;
    *slot = Some(sender.clone());
    Ok(sender)
}

/// The spawning thread: its own working directory, then one spawn per request.
fn serve(requests: &mpsc::Receiver<Request>, ready: &mpsc::SyncSender<std::io::Result<()>>) {
    // Only the filesystem context (working directory, root, umask) is unshared; file
    // descriptors stay shared. rustix deprecated its safe `unshare` because unsharing
    // `FILES` breaks other threads' descriptors; `FS` does not.
    #[allow(deprecated, reason = "unshare(FS) is sound; see above")]
    let unshared = rustix::thread::unshare(rustix::thread::UnshareFlags::FS);
    if ready.send(unshared.map_err(std::io::Error::from)).is_err() {
        return;
    }
    while let Ok(request) = requests.recv() {
        let result = spawn_here(&request);
        let _ = request.reply.send(result);
    }
}

fn spawn_here(request: &Request) -> std::io::Result<i32> {
    rustix::process::chdir(&request.cwd)?;
    let mut actions = PosixSpawnFileActions::init()?;
    actions.add_open(0, c"/dev/null", OFlag::O_RDONLY, Mode::empty())?;
    // Opened by the new session's leader without O_NOCTTY: its controlling terminal.
    actions.add_open(1, request.terminal.as_c_str(), OFlag::O_RDWR, Mode::empty())?;
    actions.add_dup2(1, 2)?;
    let mut attr = PosixSpawnAttr::init()?;
    // Every signal at its default and none blocked, whatever the host ignores: Rust's
    // runtime ignores SIGPIPE, and a host started under `nohup` ignores SIGHUP, which a
    // command would otherwise inherit.
    attr.set_sigdefault(&SigSet::all())?;
    attr.set_sigmask(&SigSet::empty())?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::from_bits_retain(i32::from(nix::libc::POSIX_SPAWN_SETSID)),
    )?;
    let pid = nix::spawn::posix_spawn(
        request.path.as_c_str(),
        &actions,
        &attr,
        &request.argv,
        &request.env,
    )?;
    Ok(pid.as_raw())
}

/// Starts `spec` in a session of its own with the terminal as its controlling terminal.
///
/// # Errors
///
/// When the program is not found, an argument holds a NUL byte, or `posix_spawn` fails (the
/// directory does not exist, the program cannot be executed).
pub(crate) fn spawn(spec: &Spec<'_>) -> std::io::Result<Child> {
    let Some(program) = spec.argv.first() else {
        return Err(std::io::Error::other("empty command line"));
    };
    let mut env: BTreeMap<&str, &str> = BTreeMap::new();
    for (key, value) in &spec.env {
        env.insert(key, value);
    }
    let path = resolve(program, env.get("PATH").copied(), spec.cwd)?;
    let (reply, answer) = mpsc::sync_channel(1);
    let request = Request {
        path: c_string(path.as_os_str())?,
        argv: spec
            .argv
            .iter()
            .map(|arg| c_string(OsStr::new(arg)))
            .collect::<std::io::Result<_>>()?,
        env: env
            .iter()
            .map(|(key, value)| c_string(OsStr::new(&format!("{key}={value}"))))
            .collect::<std::io::Result<_>>()?,
        cwd: spec.cwd.to_owned(),
        terminal: c_string(spec.terminal.as_os_str())?,
        reply,
    };
    spawner()?
        .send(request)
        .map_err(|_| std::io::Error::other("the spawning thread is gone"))?;
    let pid = answer
        .recv()
        .map_err(|_| std::io::Error::other("the spawning thread is gone"))??;
    let raw = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| std::io::Error::other("posix_spawn gave no process id"))?;
    // Nothing else reaps the child (it is no `std` child), so the pid is its until we do.
    let pidfd = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::NONBLOCK)?;
    // Registered with the caller's runtime when it has one that does I/O (readable once the
    // child exits); else the waiting thread reaps it.
    let exit = if tokio::runtime::Handle::try_current().is_ok() {
        // Deprecated as unsound for a `T` that can close the descriptor while registered; an
        // `OwnedFd` cannot (the descriptor lives exactly as long as the registration), and the
        // safe replacement is `unsafe`, which this workspace forbids.
        #[allow(deprecated, reason = "sound for an OwnedFd; see above")]
        let registered =
            tokio::io::unix::AsyncFd::with_interest(pidfd, tokio::io::Interest::READABLE);
        match registered {
            Ok(registered) => Exit::Fd(registered),
            Err(refused) => {
                tracing::debug!(error = %refused, "pidfd not registered; the waiting thread reaps");
                Exit::Thread(wait_for(rustix::process::pidfd_open(
                    raw,
                    rustix::process::PidfdFlags::empty(),
                )?)?)
            }
        }
    } else {
        Exit::Thread(wait_for(pidfd)?)
    };
    Ok(Child { pid, exit })
}

fn c_string(text: &OsStr) -> std::io::Result<CString> {
    CString::new(text.as_bytes()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// The program to execute: `program` itself when it names a path (relative to `cwd`), else
/// the first executable file of that name in `path` (`PATH`, `/bin:/usr/bin` without one).
///
/// What a search of an all-absolute `PATH` found is remembered, as a shell's `hash` does: the
/// next call of the same program under the same `PATH` looks only at that file (one `stat`
/// instead of one per directory before it), and searches again once it is no longer an
/// executable file. So a program put into an earlier directory of `PATH` later is not taken
/// for the one found first (a `bash` a command drops into `~/.local/bin` does not replace
/// `/usr/bin/bash` for the calls after it).
fn resolve(program: &str, path: Option<&str>, cwd: &Path) -> std::io::Result<PathBuf> {
    if program.contains('/') {
        return Ok(cwd.join(program));
    }
    let not_found = || std::io::Error::from_raw_os_error(nix::libc::ENOENT);
    if program.is_empty() {
        return Err(not_found());
    }
    let path = path.unwrap_or("/bin:/usr/bin");
    // A relative directory (or an empty one, the working directory) depends on `cwd`.
    let absolute = path.split(':').all(|dir| dir.starts_with('/'));
    if absolute && let Some(found) = found_before(path, program) {
        return Ok(found);
    }
    let found = search(program, path, cwd).ok_or_else(not_found)?;
    if absolute {
        remember(path, program, &found);
    }
    Ok(found)
}

/// The programs found in `PATH` lately, by (`PATH`, program).
static FOUND: std::sync::LazyLock<Mutex<std::collections::HashMap<(String, String), PathBuf>>> =
    std::sync::LazyLock::new(Mutex::default);

/// At most this many programs are remembered (all are forgotten when one more is found).
const FOUND_MAX: usize = 64;

/// What a search of `path` found for `program` before, when it is still an executable file.
fn found_before(path: &str, program: &str) -> Option<PathBuf> {
    let mut found = FOUND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = (path.to_owned(), program.to_owned());
    let before = found.get(&key)?.clone();
    if crate::bwrap::is_executable(&before) {
        Some(before)
    } else {
        found.remove(&key);
        None
    }
}

fn remember(path: &str, program: &str, at: &Path) {
    let mut found = FOUND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if found.len() >= FOUND_MAX {
        found.clear();
    }
    found.insert((path.to_owned(), program.to_owned()), at.to_owned());
}

/// The first executable file named `program` in the directories of `path`.
fn search(program: &str, path: &str, cwd: &Path) -> Option<PathBuf> {
    path.split(':')
        .map(|dir| {
            let dir = if dir.is_empty() {
                Path::new(".")
            } else {
                Path::new(dir)
            };
            cwd.join(dir).join(program)
        })
        .find(|candidate| crate::bwrap::is_executable(candidate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(script: &str) -> Child {
        let argv = ["sh".to_owned(), "-c".to_owned(), script.to_owned()];
        spawn(&Spec {
            argv: &argv,
            cwd: Path::new("/"),
            env: vec![("PATH", "/bin:/usr/bin")],
            terminal: Path::new("/dev/null"),
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Whether the process `pid` is gone (reaped: no `/proc` entry), within two seconds.
    fn reaped(pid: i32) -> bool {
        let entry = PathBuf::from(format!("/proc/{pid}"));
        (0..200).any(|_| {
            let gone = !entry.exists();
            if !gone {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            gone
        })
    }

    /// On a runtime that does I/O the task that waits reaps the child itself; a wait dropped
    /// before the exit (a timeout that won a `select!`) loses nothing: the next one gets the
    /// code.
    #[tokio::test(flavor = "current_thread")]
    async fn the_waiting_task_reaps_its_child_and_a_dropped_wait_loses_nothing() {
        let mut child = start("sleep 0.3; exit 3");
        assert!(matches!(child.exit, Exit::Fd(_)));
        let early = tokio::time::timeout(std::time::Duration::from_millis(20), child.wait()).await;
        assert!(early.is_err(), "{early:?}");
        assert_eq!(child.wait().await.ok(), Some(3));
        assert!(reaped(child.pid()));
        assert!(child.wait().await.is_err());
        let mut killed = start("kill -9 $$");
        assert_eq!(killed.wait().await.ok(), Some(128 + 9));
    }

    /// A child dropped before it exits is reaped by the waiting thread; one started without
    /// a runtime is waited for through it.
    #[test]
    fn a_child_dropped_or_started_without_a_runtime_is_reaped_by_the_waiting_thread() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let dropped = runtime.block_on(async { start("sleep 0.1").pid() });
        assert!(reaped(dropped), "a dropped child was left a zombie");
        let mut outside = start("exit 4");
        assert!(matches!(outside.exit, Exit::Thread(_)));
        assert_eq!(runtime.block_on(outside.wait()).ok(), Some(4));
    }

    #[test]
    fn a_bare_name_is_looked_up_in_the_commands_path_and_a_path_is_taken_as_it_is() {
        let cwd = Path::new("/");
        assert_eq!(
            resolve("sh", Some("/nonexistent:/bin:/usr/bin"), cwd).ok(),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            resolve("./x", None, Path::new("/tmp")).ok(),
            Some(PathBuf::from("/tmp/./x"))
        );
        let missing = resolve("no-such-program-here", Some("/bin"), cwd);
        assert_eq!(
            missing.err().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
    }

    /// A program found once is the one taken after, even when a file of its name turns up
    /// in an earlier directory of `PATH` (what a command could drop there); once it is gone,
    /// `PATH` is searched again. A `PATH` with a relative directory is searched every time.
    #[test]
    fn a_program_found_stays_the_one_taken_until_it_is_gone() {
        use std::os::unix::fs::PermissionsExt as _;
        let base = tempfile::Builder::new()
            .prefix("flemma-found-")
            .tempdir()
            .unwrap_or_else(|e| panic!("{e}"));
        let (early, late) = (base.path().join("early"), base.path().join("late"));
        for dir in [&early, &late] {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        }
        let install = |dir: &Path| {
            let file = dir.join("prog");
            std::fs::write(&file, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("{e}"));
            file
        };
        let path = format!("{}:{}", early.display(), late.display());
        let cwd = Path::new("/");
        let real = install(&late);
        assert_eq!(resolve("prog", Some(&path), cwd).ok(), Some(real.clone()));
        // The canary: a `prog` dropped into the earlier directory is not taken.
        let dropped = install(&early);
        assert_eq!(resolve("prog", Some(&path), cwd).ok(), Some(real.clone()));
        // Without a relative directory remembered nothing: the same PATH with `.` searches.
        let relative = format!("{path}:.");
        assert_eq!(
            resolve("prog", Some(&relative), cwd).ok(),
            Some(dropped.clone())
        );
        // The one found is gone: searched again.
        std::fs::remove_file(&real).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            resolve("prog", Some(&path), cwd).ok(),
            Some(dropped.clone())
        );
        std::fs::remove_file(&dropped).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            resolve("prog", Some(&path), cwd).err().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
    }
}
