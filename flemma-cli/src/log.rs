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

/// What the command exports of its spans (feature `otel`): nothing unless the `OTEL_*`
/// variables ask for it.
#[must_use = "the export sends its last spans when finished"]
pub(crate) struct Export {
    #[cfg(feature = "otel")]
    otlp: Option<flemma::runtime::telemetry::Otlp>,
}

impl Export {
    /// Sends the spans still queued (a warning on stderr when they cannot be delivered).
    pub(crate) fn finish(self) {
        let Self {
            #[cfg(feature = "otel")]
            otlp,
        } = self;
        #[cfg(feature = "otel")]
        if let Some(otlp) = otlp
            && let Err(error) = otlp.shutdown()
        {
            warn_otlp(error);
        }
    }
}

/// `flemma: OTLP export: ERROR: CAUSE` on stderr, escaped.
#[cfg(feature = "otel")]
fn warn_otlp(error: flemma::runtime::telemetry::OtlpError) {
    let described = crate::failure::describe(&anyhow::Error::new(error));
    let _ = writeln!(
        std::io::stderr(),
        "flemma: OTLP export: {}",
        crate::visible::text(&described)
    );
}

/// Installs the subscriber: the log on stderr, and the OTLP export when the `OTEL_*`
/// variables ask for one (feature `otel`).
pub(crate) fn init(verbose: u8) -> Export {
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
    #[cfg(feature = "otel")]
    {
        use tracing_subscriber::prelude::*;
        let otlp = match flemma::runtime::telemetry::Otlp::from_env("flemma") {
            Ok(otlp) => otlp,
            Err(error) => {
                warn_otlp(error);
                None
            }
        };
        if let Some(otlp) = otlp {
            // Each layer filters for itself: the log's level does not hide the spans.
            let _ = tracing_subscriber::registry()
                .with(log_layer(verbose).with_filter(filter))
                .with(otlp.layer())
                .try_init();
            return Export { otlp: Some(otlp) };
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| Line(Vec::new()))
        .without_time()
        .with_target(verbose > 0)
        .try_init();
    Export {
        #[cfg(feature = "otel")]
        otlp: None,
    }
}

/// The log's layer, as `init` installs it without an export.
#[cfg(feature = "otel")]
fn log_layer<S>(verbose: u8) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    tracing_subscriber::fmt::layer()
        .with_writer(|| Line(Vec::new()))
        .without_time()
        .with_target(verbose > 0)
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
