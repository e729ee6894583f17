//! The HTTP transport: endpoints and keys per provider, a streaming POST with timeouts and
//! retries, and the pipe from response bytes to [`StreamEvent`]s.
//!
//! Cancellation: every call here is a future; dropping it (or the [`ResponseStream`] it
//! returned) closes the connection and stops the work. [`with_cancel`] races a call against a
//! cancellation signal and reports [`TransportError::Cancelled`].
//!
//! Keys never leave an [`ApiKey`] except as a (sensitive) request header: its `Debug` and
//! `Display` print `ApiKey(***)`, and no error carries one.

mod config;
mod endpoint;
mod error;
mod stream;

use std::pin::Pin;
use std::time::{Duration, SystemTime};

use futures_util::{Stream, StreamExt};
use reqwest::header::HeaderMap;

use crate::error::error_from_body;

pub use config::{Retry, RetryReason, Timeout, TransportConfig};
pub use endpoint::{ApiKey, Endpoint, TokenError, TokenFuture, TokenSource};
pub use error::{HttpError, TransportError};
pub use stream::{ResponseStream, stream_events, stream_events_with, with_cancel};

/// The longest wait between attempts, whatever `retry-after` or the backoff say.
const MAX_DELAY: Duration = Duration::from_secs(60);

/// A streaming HTTP client with timeouts and retries.
#[derive(Debug, Clone)]
pub struct HttpTransport {
    client: reqwest::Client,
    config: TransportConfig,
}

/// How one attempt failed.
enum Failure {
    /// An error status.
    Status(reqwest::Response),
    /// No response: the connection, or the request.
    Send(reqwest::Error),
    /// The body failed before its first byte.
    Body(reqwest::Error),
    /// `first_byte_timeout` ran out.
    NoFirstByte,
}

/// rustls on the process's default provider (ring, installed by [`HttpTransport::new`]
/// unless another was installed first) trusting the Mozilla roots of `webpki-roots`: no
/// system certificate store is read, as with reqwest 0.12's `webpki-roots` feature.
fn tls_config() -> rustls::ClientConfig {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

impl HttpTransport {
    /// A transport with `config`; TLS is rustls with the ring provider.
    ///
    /// # Errors
    ///
    /// [`TransportError::Client`] when the client cannot be built.
    pub fn new(config: TransportConfig) -> Result<Self, TransportError> {
        // reqwest is built without a default provider; another provider installed first wins.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config())
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| TransportError::Client(HttpError(e)))?;
        Ok(Self { client, config })
    }

    /// The configuration.
    pub fn config(&self) -> &TransportConfig {
        &self.config
    }

    /// POSTs `body` (JSON) and returns the response body as a stream of chunks, once its
    /// first byte arrived. 429, 5xx, connection errors, connect and first-byte timeouts and a
    /// connection closed before the response are retried up to `max_retries` times with
    /// exponential backoff, honouring `retry-after` (seconds or an HTTP date, at most 60 s).
    ///
    /// # Errors
    ///
    /// [`TransportError::Provider`] for an error status (read from the body with
    /// [`error_from_body`]), [`TransportError::Connect`], [`TransportError::Timeout`] or
    /// [`TransportError::Request`] when no response came.
    pub async fn post_stream(
        &self,
        endpoint: &Endpoint,
        body: String,
    ) -> Result<ResponseStream, TransportError> {
        self.post_stream_observed(endpoint, body, &|_| {}).await
    }

    /// [`HttpTransport::post_stream`], telling `on_retry` about each retry when it is
    /// scheduled, before its wait.
    ///
    /// # Errors
    ///
    /// As [`HttpTransport::post_stream`].
    pub async fn post_stream_observed(
        &self,
        endpoint: &Endpoint,
        body: String,
        on_retry: &(dyn Fn(&Retry) + Send + Sync),
    ) -> Result<ResponseStream, TransportError> {
        let url = endpoint.url();
        let mut headers = endpoint.headers(&endpoint.key(false).await?)?;
        let mut refreshed = false;
        // Shared bytes: a retry re-sends the body without copying it.
        let body = bytes::Bytes::from(body);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let retry_left = attempts <= self.config.max_retries;
            let failure = match self.attempt(&url, headers.clone(), body.clone()).await {
                Ok(stream) => return Ok(stream),
                Err(failure) => failure,
            };
            let Some((reason, delay)) = self
                .after_failure(
                    endpoint,
                    failure,
                    attempts,
                    retry_left,
                    &mut refreshed,
                    &mut headers,
                )
                .await?
            else {
                continue;
            };
            on_retry(&Retry {
                attempt: attempts + 1,
                max_attempts: self.config.max_retries.saturating_add(1),
                delay,
                reason,
            });
            tokio::time::sleep(delay).await;
        }
    }

    /// What follows a failed attempt: `Some` reason and wait of a retry, `None` for a retry
    /// at once with a refreshed token (`refreshed`, `headers` updated), or the error when the
    /// failure is not retried.
    async fn after_failure(
        &self,
        endpoint: &Endpoint,
        failure: Failure,
        attempts: u32,
        retry_left: bool,
        refreshed: &mut bool,
        headers: &mut HeaderMap,
    ) -> Result<Option<(RetryReason, Duration)>, TransportError> {
        let (reason, delay) = match failure {
            Failure::Status(response) => {
                let status = response.status().as_u16();
                if status == 401 && !*refreshed && endpoint.refreshes() {
                    // The token expired: one retry with a fresh one.
                    *refreshed = true;
                    drop(response);
                    *headers = endpoint.headers(&endpoint.key(true).await?)?;
                    return Ok(None);
                }
                if !(retry_left && (status == 429 || status >= 500)) {
                    let text = response.text().await.unwrap_or_default();
                    return Err(TransportError::Provider {
                        attempts,
                        source: error_from_body(status, &text),
                    });
                }
                let delay = retry_after(&response).unwrap_or_else(|| self.backoff(attempts));
                (RetryReason::Status(status), delay)
            }
            Failure::Send(e) if e.is_connect() => {
                let timeout = Timeout::Connect(self.config.connect_timeout);
                if !retry_left {
                    return Err(if e.is_timeout() {
                        TransportError::Timeout { timeout, attempts }
                    } else {
                        TransportError::Connect {
                            attempts,
                            source: HttpError(e),
                        }
                    });
                }
                let reason = if e.is_timeout() {
                    RetryReason::Timeout(timeout)
                } else {
                    RetryReason::Connect
                };
                (reason, self.backoff(attempts))
            }
            Failure::Send(e) | Failure::Body(e) => {
                // A request error that is not a closed connection is not worth a retry.
                let closed = e.is_request() || e.is_body() || e.is_decode();
                if !(retry_left && closed) {
                    return Err(TransportError::Request {
                        attempts,
                        source: HttpError(e),
                    });
                }
                (RetryReason::Closed, self.backoff(attempts))
            }
            Failure::NoFirstByte => {
                let timeout = Timeout::FirstByte(self.config.first_byte_timeout);
                if !retry_left {
                    return Err(TransportError::Timeout { timeout, attempts });
                }
                (RetryReason::Timeout(timeout), self.backoff(attempts))
            }
        };
        Ok(Some((reason, delay)))
    }

    /// One attempt: the request, its headers and the first chunk of its body, within
    /// `first_byte_timeout`.
    async fn attempt(
        &self,
        url: &str,
        headers: HeaderMap,
        body: bytes::Bytes,
    ) -> Result<ResponseStream, Failure> {
        let deadline = tokio::time::Instant::now() + self.config.first_byte_timeout;
        let send = self.client.post(url).headers(headers).body(body).send();
        let response = match tokio::time::timeout_at(deadline, send).await {
            Err(_) => return Err(Failure::NoFirstByte),
            Ok(Err(e)) => return Err(Failure::Send(e)),
            Ok(Ok(response)) if !response.status().is_success() => {
                return Err(Failure::Status(response));
            }
            Ok(Ok(response)) => response,
        };
        let mut chunks: ChunkStream =
            Box::pin(response.bytes_stream().map(|r| r.map(|b| b.to_vec())));
        let first = match tokio::time::timeout_at(deadline, chunks.next()).await {
            Err(_) => return Err(Failure::NoFirstByte),
            Ok(Some(Err(e))) => return Err(Failure::Body(e)),
            Ok(Some(Ok(first))) => Some(first),
            Ok(None) => None,
        };
        let idle = self.config.idle_timeout;
        Ok(ResponseStream {
            // An empty body has ended already.
            done: first.is_none(),
            first,
            inner: chunks,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
        })
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.config
            .base_backoff
            .saturating_mul(factor)
            .min(MAX_DELAY)
    }
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let value = response.headers().get(reqwest::header::RETRY_AFTER)?;
    retry_delay(value.to_str().ok()?, SystemTime::now())
}

/// The wait a `retry-after` value asks for: seconds, or an HTTP date (past dates mean no wait).
fn retry_delay(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = match value.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            Duration::from_secs_f64(seconds.min(MAX_DELAY.as_secs_f64()))
        }
        Ok(_) => return None,
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    };
    Some(delay.min(MAX_DELAY))
}

type ChunkStream = Pin<Box<dyn Stream<Item = reqwest::Result<Vec<u8>>> + Send>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Mon, 30 Nov 2026 10:00:00 GMT").unwrap();
        assert_eq!(retry_delay("2", now), Some(Duration::from_secs(2)));
        assert_eq!(retry_delay(" 0.5 ", now), Some(Duration::from_millis(500)));
        assert_eq!(
            retry_delay("Mon, 30 Nov 2026 10:00:07 GMT", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_delay("Mon, 30 Nov 2026 09:59:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_delay("1000000", now), Some(MAX_DELAY));
        for bad in ["-1", "NaN", "inf", "soon", ""] {
            assert_eq!(retry_delay(bad, now), None, "{bad:?}");
        }
    }
}
