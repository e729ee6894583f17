//! What `grep` and `find` share: where a search starts and how its
//! paths are shown, the parallel walk (ripgrep's `ignore` crate, on blocking threads), the
//! limit, and stopping on the limit, a timeout or a cancellation.
//!
//! The spec runs `rg` and `fd` processes; these tools run the same crates in process and print
//! what those backends print. Their model-facing strings live here, beside the code that uses
//! them, rather than in `messages.rs`, which the other built-ins edit in parallel.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ignore::overrides::{Override, OverrideBuilder};
use ignore::{WalkBuilder, WalkParallel};
use tokio_util::sync::CancellationToken;

use flemma_core::ExecutionContext;
use flemma_core::resolve_path;

/// `tool.error.no_pattern`
pub(crate) const NO_PATTERN: &str = "No pattern provided";

/// `tool.grep.timeout` / `tool.find.timeout`: `<what> timed out after <n> second.` (`seconds.`
/// unless n = 1).
pub(crate) fn timed_out(what: &str, timeout: Duration) -> String {
    let count = timeout.as_secs();
    let unit = if count == 1 { "second" } else { "seconds" };
    format!("{what} timed out after {count} {unit}.")
}

/// The result of a search that ran out of time: what it found so far, a blank line, then the
/// timeout message (the message alone when it found nothing).
pub(crate) fn timed_out_output(
    what: &str,
    timeout: Duration,
    found: &str,
) -> flemma_core::ToolOutput {
    let message = timed_out(what, timeout);
    if found.is_empty() {
        flemma_core::ToolOutput::error(message)
    } else {
        flemma_core::ToolOutput::error(format!("{found}\n\n{message}"))
    }
}

/// An invalid `glob`, find `pattern` or `exclude` entry (not one of the plugin's strings: the plugin's
/// processes would exit with an error code).
pub(crate) fn invalid_glob(glob: &str, error: &dyn std::fmt::Display) -> String {
    format!("Invalid glob pattern '{glob}': {error}")
}

/// Where a search starts: the directory walked and how its paths are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Root {
    /// The absolute, normalised directory (or file) to walk.
    pub(crate) path: PathBuf,
    /// The path as the `rg`/`fd` backend was given it: `.` for the working directory,
    /// `./x` for an absolute path inside it, relative input as written, other absolute paths
    /// as they are.
    pub(crate) display: String,
}

impl Root {
    /// The search path of a call (`.` when empty, otherwise made relative to the
    /// working directory), resolved by the context's resolver
    /// ([`ExecutionContext::resolve_in_cwd`]).
    pub(crate) fn new(input: Option<&str>, ctx: &ExecutionContext) -> Self {
        Self::at(input, ctx.cwd())
    }

    /// [`Root::new`] from a working directory.
    pub(crate) fn at(input: Option<&str>, cwd: &Path) -> Self {
        let input = input.map(str::trim).filter(|p| !p.is_empty());
        let Some(input) = input else {
            return Self {
                path: cwd.to_owned(),
                display: ".".to_owned(),
            };
        };
        let path = resolve_path(cwd, input);
        let written_absolute =
            Path::new(input).is_absolute() || input == "~" || input.starts_with("~/");
        if written_absolute {
            let display = match path.strip_prefix(cwd) {
                Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
                Ok(rel) => format!("./{}", rel.display()),
                Err(_) => path.display().to_string(),
            };
            return Self { path, display };
        }
        let trimmed = input.trim_end_matches('/');
        Self {
            path,
            display: if trimmed.is_empty() { "/" } else { trimmed }.to_owned(),
        }
    }

    /// How a walked path is shown: the display root joined with its path below the root.
    pub(crate) fn show(&self, path: &Path) -> String {
        match path.strip_prefix(&self.path) {
            Ok(rel) if rel.as_os_str().is_empty() => self.display.clone(),
            Ok(rel) if self.display == "/" => format!("/{}", rel.display()),
            Ok(rel) => format!("{}/{}", self.display, rel.display()),
            Err(_) => path.display().to_string(),
        }
    }
}

/// The `limit` input: none given is `default`; otherwise rounded by `round` and at
/// least 1.
#[expect(
    clippy::cast_sign_loss,
    reason = "clamped to at least 1 first; `as` saturates at usize::MAX"
)]
pub(crate) fn limit(limit: Option<f64>, default: usize, round: fn(f64) -> f64) -> usize {
    match limit {
        Some(limit) => round(limit).max(1.0) as usize,
        None => default,
    }
}

/// The `rg --glob <glob>` / `--glob !<exclude>` (and `fd --exclude`) overrides, rooted at the
/// search root, so a glob without `/` matches a name at any depth.
pub(crate) fn overrides(
    root: &Path,
    whitelist: Option<&str>,
    excludes: &[String],
) -> Result<Override, String> {
    let mut builder = OverrideBuilder::new(root);
    if let Some(glob) = whitelist {
        builder
            .add(glob)
            .map_err(|error| invalid_glob(glob, &error))?;
    }
    for exclude in excludes.iter().filter(|x| !x.is_empty()) {
        builder
            .add(&format!("!{exclude}"))
            .map_err(|error| invalid_glob(exclude, &error))?;
    }
    builder
        .build()
        .map_err(|error| invalid_glob(whitelist.unwrap_or_default(), &error))
}

/// The parallel walk of `root` with rg's and fd's defaults: `.gitignore` (inside a Git
/// repository), `.ignore`, the global Git excludes and `custom_ignore` (`.rgignore`,
/// `.fdignore`) respected, hidden files skipped, symbolic links not followed.
pub(crate) fn walker(root: &Path, overrides: Override, custom_ignore: &str) -> WalkParallel {
    WalkBuilder::new(root)
        .overrides(overrides)
        .add_custom_ignore_filename(custom_ignore)
        .build_parallel()
}

/// State shared by the walking threads and the task waiting for them: the results so far,
/// the limit, and the reasons to stop.
#[derive(Debug)]
pub(crate) struct Shared<T> {
    results: Mutex<Vec<T>>,
    /// Result slots taken (may pass `limit` by the slots refused).
    taken: AtomicUsize,
    limit: usize,
    limit_reached: AtomicBool,
    /// Set on the limit, a timeout, a cancellation or when the waiting task goes away.
    halt: AtomicBool,
    cancel: CancellationToken,
    deadline: Instant,
    timed_out: AtomicBool,
    /// Files looked at (searched by grep, matched against the pattern by find).
    visited: AtomicUsize,
}

impl<T> Shared<T> {
    /// The shared state of one call's walk: its limit, cancellation token and timeout.
    pub(crate) fn for_call(
        limit: usize,
        ctx: &flemma_core::ExecutionContext,
    ) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self::new(limit, ctx.cancellation().clone(), ctx.timeout()))
    }

    pub(crate) fn new(limit: usize, cancel: CancellationToken, timeout: Duration) -> Self {
        let now = Instant::now();
        Self {
            results: Mutex::new(Vec::new()),
            taken: AtomicUsize::new(0),
            limit,
            limit_reached: AtomicBool::new(false),
            halt: AtomicBool::new(false),
            cancel,
            deadline: now
                .checked_add(timeout)
                .unwrap_or(now + Duration::from_secs(86_400)),
            timed_out: AtomicBool::new(false),
            visited: AtomicUsize::new(0),
        }
    }

    /// Whether the walk should end now: the limit was reached, the call was cancelled or its
    /// time is up (checked once per entry and per match).
    pub(crate) fn should_stop(&self) -> bool {
        if self.halt.load(Ordering::Relaxed) {
            return true;
        }
        if self.cancel.is_cancelled() {
            self.halt();
            return true;
        }
        if Instant::now() >= self.deadline {
            self.timed_out.store(true, Ordering::Relaxed);
            self.halt();
            return true;
        }
        false
    }

    /// Whether the walk was told to end (cheaper than [`should_stop`](Self::should_stop)).
    pub(crate) fn halted(&self) -> bool {
        self.halt.load(Ordering::Relaxed)
    }

    /// Ends the walk.
    pub(crate) fn halt(&self) {
        self.halt.store(true, Ordering::Relaxed);
    }

    /// Takes a result slot: `false` once `limit` results were taken. Taking the last one
    /// marks the limit reached and ends the walk.
    pub(crate) fn take_slot(&self) -> bool {
        let taken = self.taken.fetch_add(1, Ordering::Relaxed);
        if taken >= self.limit {
            return false;
        }
        if taken + 1 == self.limit {
            self.limit_reached.store(true, Ordering::Relaxed);
            self.halt();
        }
        true
    }

    /// Counts one file looked at.
    pub(crate) fn visit(&self) {
        self.visited.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds results (each needs a slot taken first).
    pub(crate) fn extend(&self, items: impl IntoIterator<Item = T>) {
        self.results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(items);
    }

    /// Adds one result.
    pub(crate) fn push(&self, item: T) {
        self.results
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(item);
    }

    /// The results so far, taken out.
    pub(crate) fn take_results(&self) -> Vec<T> {
        std::mem::take(&mut *self.results.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether `limit` results were collected.
    pub(crate) fn limit_reached(&self) -> bool {
        self.limit_reached.load(Ordering::Relaxed)
    }

    /// Files looked at so far.
    #[cfg(test)]
    pub(crate) fn visited(&self) -> usize {
        self.visited.load(Ordering::Relaxed)
    }
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The walk finished or stopped on the limit.
    Done,
    /// The call's time ran out.
    TimedOut,
    /// The call was cancelled.
    Cancelled,
}

/// Ends the walk when the waiting task is dropped (the executor drops a cancelled call).
struct HaltOnDrop<T>(Arc<Shared<T>>);

impl<T> Drop for HaltOnDrop<T> {
    fn drop(&mut self) {
        self.0.halt();
    }
}

/// Runs `walk` on Tokio's blocking pool and waits for it, the call's timeout or its
/// cancellation, whichever comes first. On a timeout or cancellation the walk is told to stop
/// and the results collected so far stay in `shared`.
pub(crate) async fn run_walk<T: Send + 'static>(
    shared: &Arc<Shared<T>>,
    walk: impl FnOnce() + Send + 'static,
) -> Ended {
    if shared.cancel.is_cancelled() {
        return Ended::Cancelled;
    }
    let guard = HaltOnDrop(Arc::clone(shared));
    let handle = tokio::task::spawn_blocking(walk);
    let deadline = tokio::time::Instant::from_std(shared.deadline);
    let ended = tokio::select! {
        biased;
        () = shared.cancel.cancelled() => Ended::Cancelled,
        () = tokio::time::sleep_until(deadline) => Ended::TimedOut,
        _ = handle => {
            if shared.cancel.is_cancelled() {
                Ended::Cancelled
            } else if shared.timed_out.load(Ordering::Relaxed) && !shared.limit_reached() {
                Ended::TimedOut
            } else {
                Ended::Done
            }
        }
    };
    drop(guard);
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_show_paths_as_rg_was_given_them() {
        let cwd = Path::new("/work/project");
        let root = Root::at(None, cwd);
        assert_eq!((root.path.as_path(), root.display.as_str()), (cwd, "."));
        assert_eq!(root.show(&cwd.join("src/a.rs")), "./src/a.rs");
        let root = Root::at(Some("/work/project/src/"), cwd);
        assert_eq!(root.display, "./src");
        assert_eq!(root.show(&cwd.join("src/a.rs")), "./src/a.rs");
        let root = Root::at(Some("/work/project"), cwd);
        assert_eq!(root.display, ".");
        let root = Root::at(Some("src/"), cwd);
        assert_eq!((root.path, root.display.as_str()), (cwd.join("src"), "src"));
        let root = Root::at(Some("/etc"), cwd);
        assert_eq!(root.show(Path::new("/etc/hosts")), "/etc/hosts");
        let root = Root::at(Some("/"), cwd);
        assert_eq!(root.show(Path::new("/etc/hosts")), "/etc/hosts");
        let file = Root::at(Some("src/a.rs"), cwd);
        assert_eq!(file.show(&cwd.join("src/a.rs")), "src/a.rs");
    }

    #[test]
    fn limits_round_and_stay_positive() {
        use flemma_schema::builtin::inputs::FindInput;
        use serde_json::{Value, json};
        // The limit as `find` reads it from a call.
        let input = |v: Value| {
            FindInput::from_call(&json!({ "pattern": "*", "limit": v }))
                .map(|input| input.limit)
                .unwrap_or_default()
        };
        let absent = FindInput::from_call(&json!({ "pattern": "*" })).map(|input| input.limit);
        assert_eq!(limit(absent.unwrap_or_default(), 100, f64::ceil), 100);
        assert_eq!(limit(input(Value::Null), 100, f64::ceil), 100);
        assert_eq!(limit(input("7".into()), 100, f64::ceil), 100);
        assert_eq!(limit(input(2.5.into()), 100, f64::ceil), 3);
        assert_eq!(limit(input(2.5.into()), 500, f64::floor), 2);
        assert_eq!(limit(input(0.into()), 500, f64::floor), 1);
        assert_eq!(limit(input((-4).into()), 500, f64::floor), 1);
    }

    #[test]
    fn timeouts_pluralise() {
        assert_eq!(
            timed_out("Search", Duration::from_secs(1)),
            "Search timed out after 1 second."
        );
        assert_eq!(
            timed_out("Find", Duration::from_secs(30)),
            "Find timed out after 30 seconds."
        );
    }

    #[test]
    fn slots_stop_at_the_limit() {
        let shared = Shared::<()>::new(2, CancellationToken::new(), Duration::from_secs(5));
        assert!(shared.take_slot());
        assert!(!shared.limit_reached());
        assert!(shared.take_slot());
        assert!(shared.limit_reached() && shared.halted());
        assert!(!shared.take_slot());
    }
}
