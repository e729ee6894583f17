//! Diagnostics on stderr through `tracing`: warnings by default, more with `-v` (info), `-vv`
//! (debug) and `-vvv` (trace); `RUST_LOG` adds directives of its own
//! (`RUST_LOG=flemma_runtime=debug`).
//!
//! On a terminal the lines are written above `flemma run`'s spinners, never through them.

use std::io::Write;
use std::sync::OnceLock;

use indicatif::MultiProgress;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// The spinners of `flemma run`, when there are any.
static PROGRESS: OnceLock<MultiProgress> = OnceLock::new();

/// Lines written while spinners show go above them.
pub(crate) fn attach(progress: &MultiProgress) {
    let _ = PROGRESS.set(progress.clone());
}

/// The level `-v` given `count` times asks for.
fn level(count: u8) -> LevelFilter {
    match count {
        0 => LevelFilter::WARN,
        1 => LevelFilter::INFO,
        2 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    }
}

/// Installs the subscriber.
pub(crate) fn init(verbose: u8) {
    let builder = EnvFilter::builder().with_default_directive(level(verbose).into());
    let directives = std::env::var("RUST_LOG").unwrap_or_default();
    let filter = builder.parse(&directives).unwrap_or_else(|error| {
        let _ = writeln!(
            std::io::stderr(),
            "flemma: RUST_LOG is not understood ({error}); showing {}",
            level(verbose)
        );
        EnvFilter::builder()
            .with_default_directive(level(verbose).into())
            .parse_lossy("")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| Line(Vec::new()))
        .without_time()
        .with_target(verbose > 0)
        .try_init();
}

/// One formatted event, written to stderr in one piece when dropped.
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        // A field may hold a server's or a tool's words: nothing in it steers the terminal.
        let text = String::from_utf8_lossy(&self.0);
        let shown = crate::visible::text(&text);
        let write = || {
            let _ = std::io::stderr().lock().write_all(shown.as_bytes());
        };
        match PROGRESS.get() {
            Some(progress) => progress.suspend(write),
            None => write(),
        }
    }
}
