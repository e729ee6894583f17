//! Keeping the host's own environment from the processes its tools start.

/// Makes the host process non-dumpable (Linux `prctl(PR_SET_DUMPABLE, 0)`), so that processes
/// of the same user, the tools' processes among them, can no longer read its
/// `/proc/<pid>/environ` (nor its memory): without this, a `bash` call outside the sandbox
/// that runs `cat /proc/$PPID/environ` reads the provider keys that `tools.env` keeps out of
/// its own environment. (Under bubblewrap the host is not visible: the sandbox has its own
/// process namespace.)
///
/// The processes the host starts are not affected (an `exec` makes a process dumpable
/// again). The cost: no core dumps of the host, and a debugger must run as root to attach.
/// The `flemma` CLI calls this at start; an embedding host decides for itself. Elsewhere
/// than on Linux it does nothing.
///
/// # Errors
///
/// When the kernel refuses the change.
pub fn protect_host_process() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}
