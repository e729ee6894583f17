//! Timeouts and retries: the transport's configuration and what it reports of a retry.

use std::fmt;
use std::time::Duration;

/// Timeouts and retries of an [`HttpTransport`](super::HttpTransport).
///
/// Three timeouts, each for one way a request can stall:
///
/// * `connect_timeout`: opening the connection (TCP and TLS). Retried.
/// * `first_byte_timeout`: from sending the request until the first byte of the response
///   body (so it covers the headers too). Nothing has arrived yet, so it is retried.
/// * `idle_timeout`: between two chunks of the body once it began. Not retried: part of
///   the response has reached the caller; the stream ends with a
///   [`TransportError::Timeout`](super::TransportError::Timeout) of [`Timeout::Idle`].
///
/// The defaults (10 s, 60 s, 60 s) are long enough for a slow network and a model that
/// thinks before it speaks (the providers answer a streaming request with headers and a first
/// event at once, and keep an open stream alive with `ping` events well within a minute, as
/// the load balancers in front of them close connections idle for 60 s), and short enough that
/// a dead server is noticed in about a minute instead of minutes. Raise `first_byte_timeout`
/// and `idle_timeout` for a model that stays silent longer while it reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportConfig {
    /// The longest wait to connect.
    pub connect_timeout: Duration,
    /// The longest wait from sending the request to the first byte of the response body.
    pub first_byte_timeout: Duration,
    /// The longest wait between two chunks of the response body.
    pub idle_timeout: Duration,
    /// Retries after the first attempt, on 429, 5xx, connection errors, connect and
    /// first-byte timeouts, and a connection closed before the response began.
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry (a `retry-after` header wins).
    pub base_backoff: Duration,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_retries: 3,
            base_backoff: Duration::from_millis(500),
        }
    }
}

impl TransportConfig {
    /// The defaults with `http.*` of the resolved `options`: `http.connect_timeout`,
    /// `http.first_byte_timeout`, `http.idle_timeout` (seconds, fractions allowed) and
    /// `http.max_retries`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flemma_config::{Config, Layer};
    /// use flemma_providers::TransportConfig;
    ///
    /// let mut config = Config::new();
    /// config.set(Layer::Runtime, "http.idle_timeout", 0.5)?;
    /// config.set(Layer::Runtime, "http.max_retries", 0)?;
    /// let transport = TransportConfig::from_options(&config.options()?);
    /// assert_eq!(transport.idle_timeout, Duration::from_millis(500));
    /// assert_eq!(transport.max_retries, 0);
    /// assert_eq!(transport.connect_timeout, TransportConfig::default().connect_timeout);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_options(options: &flemma_config::Options) -> Self {
        let http = &options.http;
        let seconds = |value: Option<f64>, default: Duration| {
            value
                .filter(|s| s.is_finite() && *s > 0.0)
                .map_or(default, |s| Duration::from_secs_f64(s.min(86_400.0)))
        };
        let defaults = Self::default();
        Self {
            connect_timeout: seconds(http.connect_timeout, defaults.connect_timeout),
            first_byte_timeout: seconds(http.first_byte_timeout, defaults.first_byte_timeout),
            idle_timeout: seconds(http.idle_timeout, defaults.idle_timeout),
            max_retries: http.max_retries.map_or(defaults.max_retries, |n| {
                u32::try_from(n).unwrap_or(u32::MAX)
            }),
            base_backoff: defaults.base_backoff,
        }
    }
}

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timeout {
    /// Connecting took longer than `connect_timeout`.
    Connect(Duration),
    /// No byte of the response within `first_byte_timeout` of sending the request.
    FirstByte(Duration),
    /// The response stopped: nothing for `idle_timeout` after the last chunk.
    Idle(Duration),
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connect(d) => write!(f, "no connection within {}", Seconds(*d)),
            Self::FirstByte(d) => write!(f, "no response within {}", Seconds(*d)),
            Self::Idle(d) => write!(
                f,
                "the stream stalled: nothing received for {}",
                Seconds(*d)
            ),
        }
    }
}

/// A duration for people: `3 s`, `1.5 s`, `200 ms`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seconds(pub(crate) Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d < Duration::from_secs(1) {
            write!(f, "{} ms", d.as_millis())
        } else if d.subsec_millis() == 0 {
            write!(f, "{} s", d.as_secs())
        } else {
            write!(f, "{:.1} s", d.as_secs_f64())
        }
    }
}

/// Why an attempt failed and is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// The provider answered 429 or 5xx.
    Status(u16),
    /// The connection could not be opened.
    Connect,
    /// A connect or first-byte wait ran out.
    Timeout(Timeout),
    /// The connection closed before the response began.
    Closed,
}

impl fmt::Display for RetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(status) => write!(f, "HTTP {status}"),
            Self::Connect => f.write_str("could not connect"),
            Self::Timeout(timeout) => fmt::Display::fmt(timeout, f),
            Self::Closed => f.write_str("the connection closed before the response"),
        }
    }
}

/// A retry, announced when it is scheduled (before its wait). It prints as
/// `retrying in 3 s: HTTP 429 (attempt 2 of 4)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retry {
    /// The attempt that comes next, from 2.
    pub attempt: u32,
    /// The most attempts that will be made (`max_retries` + 1).
    pub max_attempts: u32,
    /// The wait before it.
    pub delay: Duration,
    /// Why the last attempt failed.
    pub reason: RetryReason,
}

impl fmt::Display for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "retrying in {}: {} (attempt {} of {})",
            Seconds(self.delay),
            self.reason,
            self.attempt,
            self.max_attempts
        )
    }
}

/// ` after N attempts` when there was more than one.
pub(super) fn tries(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} attempts")
    } else {
        String::new()
    }
}
