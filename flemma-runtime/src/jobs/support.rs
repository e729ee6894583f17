//! Helpers of every part of the job machinery: the clock, and the crash points of the crash
//! tests.

/// Seconds since the Unix epoch.
pub(crate) fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Dies by `SIGKILL` when `FLEMMA_CRASH_POINT` names `point`: the crash tests kill the host at
/// each step of a job's life (feature `crash-points`, for tests only).
#[cfg(feature = "crash-points")]
pub(crate) fn crash_point(point: &str) {
    if std::env::var("FLEMMA_CRASH_POINT").is_ok_and(|p| p == point) {
        #[cfg(unix)]
        {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
        }
        std::process::abort();
    }
}

/// Without the feature `crash-points`, nothing.
#[cfg(not(feature = "crash-points"))]
#[inline]
pub(crate) fn crash_point(_point: &str) {}
