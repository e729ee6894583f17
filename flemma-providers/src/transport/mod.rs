//! The HTTP transport: endpoints and keys per provider, a streaming POST with timeouts and
//! retries, and the pipe from response bytes to [`StreamEvent`]s.
//!
//! Cancellation: every call here is a future; dropping it (or the [`ResponseStream`] it
//! returned) closes the connection and stops the work. [`with_cancel`] races a call against a
//! cancellation signal and reports [`TransportError::Cancelled`].
//!
//! Keys never leave an [`ApiKey`] except as a (sensitive) request header: its `Debug` and
//! `Display` print `ApiKey(***)`, and no error carries one.

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use futures_util::future::Either;
use futures_util::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::body::RequestBody;
use crate::error::{ProviderError, error_from_body};
use crate::event::{StreamDecoder, StreamEvent};
use crate::prompt::Prompt;
use crate::request::RequestOptions;
use crate::sse::SseDecoder;
use crate::{AnthropicDecoder, ChatCompletionsDecoder, OpenAiResponsesDecoder, VertexDecoder};

/// The longest wait between attempts, whatever `retry-after` or the backoff say.
const MAX_DELAY: Duration = Duration::from_secs(60);

/// A secret: an API key or access token. It prints as `ApiKey(***)`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Responses.
    OpenAiResponses,
    /// OpenAI Chat Completions (and compatible servers).
    OpenAiChat,
    /// Google Vertex AI (Gemini).
    Vertex,
}

impl ProviderKind {
    /// The request body of `prompt` in this provider's format ([`anthropic_request`](crate::anthropic_request),
    /// [`openai_responses_request`](crate::openai_responses_request),
    /// [`chat_completions_request`](crate::chat_completions_request) or
    /// [`vertex_request`](crate::vertex_request)).
    ///
    /// ```
    /// use flemma_providers::{ProviderKind, RequestOptions, build_prompt};
    ///
    /// let doc = flemma_ast::parse("@You:\nHi!\n");
    /// let prompt = build_prompt(&doc);
    /// let body = ProviderKind::OpenAiChat.request(&prompt, &RequestOptions::new("gpt-4.1"));
    /// assert_eq!(body.to_value()["messages"][0]["content"], "Hi!");
    /// ```
    pub fn request<'a>(self, prompt: &'a Prompt<'_>, options: &RequestOptions) -> RequestBody<'a> {
        match self {
            Self::Anthropic => crate::anthropic_request(prompt, options),
            Self::OpenAiResponses => crate::openai_responses_request(prompt, options),
            Self::OpenAiChat => crate::chat_completions_request(prompt, options),
            Self::Vertex => crate::vertex_request(prompt, options),
        }
    }

    /// A fresh stream decoder for this provider.
    pub fn decoder(self) -> Box<dyn StreamDecoder> {
        match self {
            Self::Anthropic => Box::new(AnthropicDecoder::new()),
            Self::OpenAiResponses => Box::new(OpenAiResponsesDecoder::new()),
            Self::OpenAiChat => Box::new(ChatCompletionsDecoder::new()),
            Self::Vertex => Box::new(VertexDecoder::new()),
        }
    }
}

/// The future a [`TokenSource`] returns.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<ApiKey, TokenError>> + Send + 'a>>;

/// Why a [`TokenSource`] could not give a token; the host's own error is kept as the source.
#[derive(Debug, thiserror::Error)]
#[error("could not get an access token: {message}")]
pub struct TokenError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl TokenError {
    /// An error saying `message`, caused by `source` when there is one.
    pub fn new(
        message: impl Into<String>,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            message: message.into(),
            source,
        }
    }
}

/// Supplies the access token of each request, for credentials that expire (a Vertex access
/// token lasts an hour). The transport asks before every request with `refresh = false`, and
/// once more with `refresh = true` when the provider answered 401, then retries.
///
/// ```
/// use flemma_providers::{ApiKey, Endpoint, TokenFuture, TokenSource};
///
/// /// A token from `gcloud auth print-access-token`, cached by the host.
/// #[derive(Debug)]
/// struct Gcloud;
///
/// impl TokenSource for Gcloud {
///     fn token(&self, _refresh: bool) -> TokenFuture<'_> {
///         Box::pin(async { Ok(ApiKey::new("ya29.token")) })
///     }
/// }
///
/// let endpoint = Endpoint::vertex_with(std::sync::Arc::new(Gcloud), "my-project", "us-central1", "gemini-2.5-pro");
/// assert!(endpoint.url().starts_with("https://us-central1-aiplatform.googleapis.com/"));
/// ```
pub trait TokenSource: fmt::Debug + Send + Sync {
    /// The current token; a fresh one when `refresh` is set (the last one was refused).
    fn token(&self, refresh: bool) -> TokenFuture<'_>;
}

/// How an endpoint authenticates.
#[derive(Debug, Clone)]
enum Credentials {
    Key(ApiKey),
    Source(Arc<dyn TokenSource>),
}

/// Where a request goes and how it authenticates. The base URL can be overridden (proxies,
/// tests) with [`Endpoint::with_base_url`].
#[derive(Debug, Clone)]
pub struct Endpoint {
    kind: ProviderKind,
    base_url: String,
    path: String,
    credentials: Credentials,
}

impl Endpoint {
    /// Anthropic Messages: `https://api.anthropic.com/v1/messages`, `x-api-key`.
    pub fn anthropic(key: ApiKey) -> Self {
        Self {
            kind: ProviderKind::Anthropic,
            base_url: "https://api.anthropic.com".to_owned(),
            path: "/v1/messages".to_owned(),
            credentials: Credentials::Key(key),
        }
    }

    /// OpenAI Responses: `https://api.openai.com/v1/responses`, bearer key.
    pub fn openai_responses(key: ApiKey) -> Self {
        Self {
            kind: ProviderKind::OpenAiResponses,
            base_url: "https://api.openai.com".to_owned(),
            path: "/v1/responses".to_owned(),
            credentials: Credentials::Key(key),
        }
    }

    /// OpenAI Chat Completions: `https://api.openai.com/v1/chat/completions`, bearer key.
    pub fn openai_chat(key: ApiKey) -> Self {
        Self {
            kind: ProviderKind::OpenAiChat,
            base_url: "https://api.openai.com".to_owned(),
            path: "/v1/chat/completions".to_owned(),
            credentials: Credentials::Key(key),
        }
    }

    /// Vertex AI streaming (`streamGenerateContent?alt=sse`) for `model`, with a bearer access
    /// token taken as it is (it expires; see [`Endpoint::vertex_with`]).
    pub fn vertex(token: ApiKey, project: &str, location: &str, model: &str) -> Self {
        Self::vertex_endpoint(Credentials::Key(token), project, location, model)
    }

    /// Vertex AI streaming for `model`, with access tokens from `tokens`, refreshed when the
    /// provider refuses one.
    pub fn vertex_with(
        tokens: Arc<dyn TokenSource>,
        project: &str,
        location: &str,
        model: &str,
    ) -> Self {
        Self::vertex_endpoint(Credentials::Source(tokens), project, location, model)
    }

    fn vertex_endpoint(
        credentials: Credentials,
        project: &str,
        location: &str,
        model: &str,
    ) -> Self {
        Self {
            kind: ProviderKind::Vertex,
            base_url: format!("https://{location}-aiplatform.googleapis.com"),
            path: format!(
                "/v1beta1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent?alt=sse"
            ),
            credentials,
        }
    }

    /// The same endpoint authenticating with tokens from `tokens` (any provider: a proxy that
    /// issues short-lived keys, for example).
    #[must_use]
    pub fn with_token_source(mut self, tokens: Arc<dyn TokenSource>) -> Self {
        self.credentials = Credentials::Source(tokens);
        self
    }

    /// The endpoint for `kind` with its key from the environment: `ANTHROPIC_API_KEY`,
    /// `OPENAI_API_KEY`, or `VERTEX_ACCESS_TOKEN`, `VERTEX_PROJECT` and `VERTEX_LOCATION`.
    /// `model` only matters for Vertex (elsewhere it goes in the body).
    ///
    /// # Errors
    ///
    /// [`TransportError::MissingEnv`] naming the first variable unset or empty.
    pub fn from_env(kind: ProviderKind, model: &str) -> Result<Self, TransportError> {
        Self::from_lookup(kind, model, |name| std::env::var(name).ok())
    }

    /// [`Endpoint::from_env`] with variables read through `lookup`.
    ///
    /// # Errors
    ///
    /// [`TransportError::MissingEnv`] naming the first variable `lookup` lacks or has empty.
    pub fn from_lookup(
        kind: ProviderKind,
        model: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, TransportError> {
        let var = |name: &'static str| {
            lookup(name)
                .filter(|v| !v.is_empty())
                .ok_or(TransportError::MissingEnv { name })
        };
        Ok(match kind {
            ProviderKind::Anthropic => Self::anthropic(ApiKey::new(var("ANTHROPIC_API_KEY")?)),
            ProviderKind::OpenAiResponses => {
                Self::openai_responses(ApiKey::new(var("OPENAI_API_KEY")?))
            }
            ProviderKind::OpenAiChat => Self::openai_chat(ApiKey::new(var("OPENAI_API_KEY")?)),
            ProviderKind::Vertex => {
                let token = ApiKey::new(var("VERTEX_ACCESS_TOKEN")?);
                Self::vertex(
                    token,
                    &var("VERTEX_PROJECT")?,
                    &var("VERTEX_LOCATION")?,
                    model,
                )
            }
        })
    }

    /// The same endpoint at another base URL (`http://127.0.0.1:8080`, a proxy).
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// The provider.
    pub fn kind(&self) -> ProviderKind {
        self.kind
    }

    /// The full URL requests go to.
    pub fn url(&self) -> String {
        format!("{}{}", self.base_url.trim_end_matches('/'), self.path)
    }

    /// Whether a 401 is worth one retry with a refreshed token.
    fn refreshes(&self) -> bool {
        matches!(self.credentials, Credentials::Source(_))
    }

    async fn key(&self, refresh: bool) -> Result<ApiKey, TransportError> {
        match &self.credentials {
            Credentials::Key(key) => Ok(key.clone()),
            Credentials::Source(source) => {
                source.token(refresh).await.map_err(TransportError::Token)
            }
        }
    }

    fn headers(&self, key: &ApiKey) -> Result<HeaderMap, TransportError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let (name, value) = match self.kind {
            ProviderKind::Anthropic => {
                headers.insert(
                    HeaderName::from_static("anthropic-version"),
                    HeaderValue::from_static("2023-06-01"),
                );
                (
                    HeaderName::from_static("x-api-key"),
                    key.expose().to_owned(),
                )
            }
            ProviderKind::OpenAiResponses | ProviderKind::OpenAiChat | ProviderKind::Vertex => (
                reqwest::header::AUTHORIZATION,
                format!("Bearer {}", key.expose()),
            ),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| TransportError::InvalidKey)?;
        value.set_sensitive(true);
        headers.insert(name, value);
        Ok(headers)
    }
}

/// Timeouts and retries of an [`HttpTransport`].
///
/// Three timeouts, each for one way a request can stall:
///
/// * `connect_timeout`: opening the connection (TCP and TLS). Retried.
/// * `first_byte_timeout`: from sending the request until the first byte of the response
///   body (so it covers the headers too). Nothing has arrived yet, so it is retried.
/// * `idle_timeout`: between two chunks of the body once it began. Not retried: part of
///   the response has reached the caller; the stream ends with a
///   [`TransportError::Timeout`] of [`Timeout::Idle`].
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
fn tries(attempts: u32) -> String {
    if attempts > 1 {
        format!(" after {attempts} attempts")
    } else {
        String::new()
    }
}

/// An error of the HTTP library, kept opaque.
#[derive(Debug)]
pub struct HttpError(reqwest::Error);

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.0)
    }
}

impl HttpError {
    /// The request timed out (connect or read).
    pub fn is_timeout(&self) -> bool {
        self.0.is_timeout()
    }

    /// Connecting failed.
    pub fn is_connect(&self) -> bool {
        self.0.is_connect()
    }
}

/// What went wrong talking to a provider.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A required environment variable is unset or empty.
    #[error("environment variable {name} is not set")]
    MissingEnv {
        /// The variable.
        name: &'static str,
    },
    /// The key cannot be sent as an HTTP header (control characters).
    #[error("the API key contains characters not allowed in an HTTP header")]
    InvalidKey,
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client")]
    Client(#[source] HttpError),
    /// The connection could not be opened, after retries.
    #[error("could not connect{}", tries(*attempts))]
    Connect {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        source: HttpError,
    },
    /// A wait ran out: connecting or the first byte (after retries), or the next chunk of a
    /// stream that began ([`Timeout::Idle`], not retried).
    #[error("{timeout}{}", tries(*attempts))]
    Timeout {
        /// Which wait, and how long it was.
        timeout: Timeout,
        /// Attempts made.
        attempts: u32,
    },
    /// The request failed without a response (the connection closed before it), after
    /// retries.
    #[error("no response{}", tries(*attempts))]
    Request {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        #[source]
        source: HttpError,
    },
    /// The provider answered with an error status, after retries.
    #[error("the provider answered with an error{}", tries(*attempts))]
    Provider {
        /// Attempts made.
        attempts: u32,
        /// The status and the provider's message.
        #[source]
        source: ProviderError,
    },
    /// The response stream broke after it began.
    #[error("the connection broke")]
    Stream(#[source] HttpError),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The endpoint's [`TokenSource`] failed.
    #[error(transparent)]
    Token(TokenError),
}

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
            let (reason, delay) = match failure {
                Failure::Status(response) => {
                    let status = response.status().as_u16();
                    if status == 401 && !refreshed && endpoint.refreshes() {
                        // The token expired: one retry with a fresh one.
                        refreshed = true;
                        drop(response);
                        headers = endpoint.headers(&endpoint.key(true).await?)?;
                        continue;
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
            on_retry(&Retry {
                attempt: attempts + 1,
                max_attempts: self.config.max_retries.saturating_add(1),
                delay,
                reason,
            });
            tokio::time::sleep(delay).await;
        }
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

/// The body of a successful response, as chunks of bytes. Dropping it closes the connection.
///
/// When no chunk arrives for the transport's `idle_timeout`, the stream yields a
/// [`TransportError::Timeout`] of [`Timeout::Idle`] and ends.
pub struct ResponseStream {
    /// The first chunk, read before the stream was handed out.
    first: Option<Vec<u8>>,
    inner: ChunkStream,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
    done: bool,
}

impl fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream").finish_non_exhaustive()
    }
}

impl Stream for ResponseStream {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let idle = self.idle;
        if let Some(first) = self.first.take() {
            self.timer
                .as_mut()
                .reset(tokio::time::Instant::now() + idle);
            return Poll::Ready(Some(Ok(first)));
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                self.timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + idle);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                Poll::Ready(Some(Err(TransportError::Stream(HttpError(e)))))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.done = true;
                    Poll::Ready(Some(Err(TransportError::Timeout {
                        timeout: Timeout::Idle(idle),
                        attempts: 1,
                    })))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// Sends `body` to `endpoint` and decodes the streamed response with the provider's decoder;
/// returns every event, ending with what the decoder's `finish` reports.
///
/// # Errors
///
/// As [`HttpTransport::post_stream`]. A stream that breaks after the response began is not
/// an error here: an [`StreamEvent::Error`] describes it, then the decoder finishes (which
/// drops unfinished tool calls).
pub async fn stream_events(
    transport: &HttpTransport,
    endpoint: &Endpoint,
    body: String,
) -> Result<Vec<StreamEvent>, TransportError> {
    let mut decoder = endpoint.kind().decoder();
    let mut events = Vec::new();
    stream_events_with(transport, endpoint, body, decoder.as_mut(), |e| {
        events.push(e);
    })
    .await?;
    Ok(events)
}

/// [`stream_events`] with a given decoder, handing each event to `on_event` as it arrives.
///
/// # Errors
///
/// As [`stream_events`].
pub async fn stream_events_with(
    transport: &HttpTransport,
    endpoint: &Endpoint,
    body: String,
    decoder: &mut dyn StreamDecoder,
    mut on_event: impl FnMut(StreamEvent),
) -> Result<(), TransportError> {
    let mut stream = transport.post_stream(endpoint, body).await?;
    let mut sse = SseDecoder::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => {
                for event in sse.feed(&bytes) {
                    decoder.decode(&event).into_iter().for_each(&mut on_event);
                }
            }
            Err(e) => {
                on_event(StreamEvent::Error {
                    message: crate::error::chain(&e),
                });
                break;
            }
        }
    }
    if let Some(event) = sse.finish() {
        decoder.decode(&event).into_iter().for_each(&mut on_event);
    }
    decoder.finish().into_iter().for_each(&mut on_event);
    Ok(())
}

/// Races `call` against `cancel`: when `cancel` completes first, `call` is dropped (closing
/// its connection) and the result is [`TransportError::Cancelled`].
///
/// # Errors
///
/// [`TransportError::Cancelled`], or the error of `call`.
pub async fn with_cancel<T>(
    call: impl Future<Output = Result<T, TransportError>>,
    cancel: impl Future<Output = ()>,
) -> Result<T, TransportError> {
    match futures_util::future::select(pin!(call), pin!(cancel)).await {
        Either::Left((result, _)) => result,
        Either::Right(((), _)) => Err(TransportError::Cancelled),
    }
}

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
