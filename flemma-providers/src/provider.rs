//! The [`Provider`] trait: build a request from the provider-neutral prompt, stream its
//! response as [`StreamEvent`]s. [`HttpProvider`] implements it for the four HTTP APIs;
//! [`ScriptedProvider`](crate::ScriptedProvider) replays scripted responses offline.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use flemma_config::Options;
use futures_util::Stream;

use crate::event::{StreamDecoder, StreamEvent};
use crate::kind::ProviderKind;
use crate::prompt::Prompt;
use crate::request::RequestOptions;
use crate::sse::SseDecoder;
use crate::transport::{Endpoint, HttpTransport, Retry, TransportConfig, TransportError};

/// A request ready to send: the provider's JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The body, as the provider receives it.
    pub body: String,
}

/// Why a response could not be streamed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The HTTP request failed (connection, timeout, error status, after retries); it
    /// prints as its cause.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A [`ScriptedProvider`](crate::ScriptedProvider) could not replay its next turn; it
    /// prints as its cause.
    #[error(transparent)]
    Scripted(#[from] crate::scripted::ReplayError),
    /// A third party's provider failed with an error of its own; it prints as its cause,
    /// which [`downcast_ref`](std::error::Error) on the box recovers.
    ///
    /// ```
    /// use flemma_providers::SendError;
    ///
    /// #[derive(Debug, thiserror::Error)]
    /// #[error("quota exceeded")]
    /// struct Quota;
    ///
    /// let error = SendError::other(Quota);
    /// assert_eq!(error.to_string(), "quota exceeded");
    /// assert!(matches!(&error, SendError::Other(e) if e.downcast_ref::<Quota>().is_some()));
    /// ```
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl SendError {
    /// [`SendError::Other`] from any error: what a third party's [`Provider`] returns for
    /// failures of its own.
    pub fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Other(error.into())
    }
}

/// What [`Provider::stream_observed`] tells about each retry, when it is scheduled.
pub type OnRetry = Arc<dyn Fn(&Retry) + Send + Sync>;

/// The future [`Provider::stream`] and [`Provider::stream_observed`] return, as
/// `async_trait` boxes it (to name it, or to build one by hand).
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<EventStream, SendError>> + Send + 'a>>;

/// A language-model API: turns a [`Prompt`] into a [`Request`] and a request into a stream of
/// provider-neutral [`StreamEvent`]s.
///
/// Dropping the [`EventStream`] (or the future) cancels the request. The stream ends after
/// [`StreamEvent::Done`], or after a [`StreamEvent::Error`] when the response broke off.
///
/// The async methods are written with `async_trait`, like the SDK's
/// other traits (`Tool`, `Conversation`, `Approver`, `Resolver`): an implementation writes
/// `#[async_trait] impl Provider for … { async fn stream(…) … }`.
///
/// ```
/// use flemma_providers::{Provider, ScriptedProvider, Turn, build_prompt};
/// use futures_util::StreamExt as _;
///
/// let provider = ScriptedProvider::new([Turn::text("Hello!")]);
/// let doc = flemma_ast::parse("@You:\nHi\n");
/// let options = provider.request_options(&flemma_config::Config::new().options()?);
/// let request = provider.build_request(&build_prompt(&doc), &options);
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
/// let events: Vec<_> = runtime.block_on(async {
///     Ok::<_, flemma_providers::SendError>(provider.stream(request).await?.collect().await)
/// })?;
/// assert!(events.iter().any(|e| matches!(e, flemma_providers::StreamEvent::Text { text } if text == "Hello!")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[async_trait::async_trait]
pub trait Provider: fmt::Debug + Send + Sync {
    /// A short name for messages (`anthropic`, `scripted`).
    fn name(&self) -> &str;

    /// The request options the resolved `options` give for this provider (model, thinking,
    /// `max_tokens`, …); the caller adds the tools. It should depend on `options` alone: a
    /// session asks once per evaluation of a conversation's options and keeps the answer for
    /// the requests after, while the options stay the same.
    fn request_options(&self, options: &Options) -> RequestOptions;

    /// The request body of `prompt`.
    fn build_request(&self, prompt: &Prompt<'_>, options: &RequestOptions) -> Request;

    /// Sends `request` and streams the response.
    ///
    /// # Errors
    ///
    /// A [`SendError`] when no response could be streamed.
    async fn stream(&self, request: Request) -> Result<EventStream, SendError>;

    /// [`Provider::stream`], calling `on_retry` when a failed attempt is retried (before the
    /// wait), so that a UI can show `retrying in 3 s: HTTP 429`. The default ignores
    /// `on_retry` (a provider that does not retry).
    ///
    /// # Errors
    ///
    /// As [`Provider::stream`].
    async fn stream_observed(
        &self,
        request: Request,
        on_retry: OnRetry,
    ) -> Result<EventStream, SendError> {
        let _ = on_retry;
        self.stream(request).await
    }
}

/// `Provider` for the smart pointers hosts share providers through: every method forwards to
/// the pointee.
macro_rules! forward_provider {
    ($($pointer:ident),+) => {$(
        #[async_trait::async_trait]
        impl<P: Provider + ?Sized> Provider for $pointer<P> {
            fn name(&self) -> &str {
                (**self).name()
            }

            fn request_options(&self, options: &Options) -> RequestOptions {
                (**self).request_options(options)
            }

            fn build_request(&self, prompt: &Prompt<'_>, options: &RequestOptions) -> Request {
                (**self).build_request(prompt, options)
            }

            async fn stream(&self, request: Request) -> Result<EventStream, SendError> {
                (**self).stream(request).await
            }

            async fn stream_observed(
                &self,
                request: Request,
                on_retry: OnRetry,
            ) -> Result<EventStream, SendError> {
                (**self).stream_observed(request, on_retry).await
            }
        }
    )+};
}

forward_provider!(Arc, Box);

type Events = Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// A streamed response as [`StreamEvent`]s. Dropping it closes the connection.
pub struct EventStream {
    inner: Events,
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    /// Wraps any stream of events.
    pub fn new(events: impl Stream<Item = StreamEvent> + Send + 'static) -> Self {
        Self {
            inner: Box::pin(events),
        }
    }

    /// Events known in advance.
    pub fn from_events(events: impl IntoIterator<Item = StreamEvent>) -> Self {
        Self::new(futures_util::stream::iter(
            events.into_iter().collect::<Vec<_>>(),
        ))
    }

    /// Decodes a body of server-sent events with `decoder`, as chunks arrive. A chunk that
    /// fails ends the stream with an [`StreamEvent::Error`] and the decoder's `finish`.
    pub fn decode(
        chunks: impl Stream<Item = Result<Vec<u8>, TransportError>> + Send + 'static,
        decoder: Box<dyn StreamDecoder>,
    ) -> Self {
        Self::new(Decode {
            chunks: Box::pin(chunks),
            sse: SseDecoder::new(),
            decoder,
            queue: VecDeque::new(),
            finished: false,
        })
    }
}

impl Stream for EventStream {
    type Item = StreamEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamEvent>> {
        self.inner.as_mut().poll_next(cx)
    }
}

type Chunks = Pin<Box<dyn Stream<Item = Result<Vec<u8>, TransportError>> + Send>>;

/// Bytes → SSE events → provider events, lazily.
struct Decode {
    chunks: Chunks,
    sse: SseDecoder,
    decoder: Box<dyn StreamDecoder>,
    queue: VecDeque<StreamEvent>,
    finished: bool,
}

impl Decode {
    fn finish(&mut self) {
        self.finished = true;
        if let Some(event) = self.sse.finish() {
            self.queue.extend(self.decoder.decode(&event));
        }
        self.queue.extend(self.decoder.finish());
    }
}

impl Stream for Decode {
    type Item = StreamEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StreamEvent>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Poll::Ready(Some(event));
            }
            if self.finished {
                return Poll::Ready(None);
            }
            match self.chunks.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(bytes))) => {
                    let this = &mut *self;
                    for event in this.sse.feed(&bytes) {
                        this.queue.extend(this.decoder.decode(&event));
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    self.queue.push_back(StreamEvent::Error {
                        message: flemma_ids::error_chain(&error),
                    });
                    self.finish();
                }
                Poll::Ready(None) => self.finish(),
            }
        }
    }
}

type DecoderFactory = Arc<dyn Fn() -> Box<dyn StreamDecoder> + Send + Sync>;

/// One of the four HTTP APIs, through an [`Endpoint`] and an [`HttpTransport`] (timeouts,
/// retries).
///
/// ```
/// use flemma_providers::{ApiKey, Endpoint, HttpProvider, Provider, TransportConfig};
///
/// let endpoint = Endpoint::anthropic(ApiKey::new("sk-…")).with_base_url("http://127.0.0.1:9");
/// let provider = HttpProvider::new(endpoint, TransportConfig::default())?;
/// assert_eq!(provider.name(), "anthropic");
/// # Ok::<(), flemma_providers::TransportError>(())
/// ```
#[derive(Clone)]
pub struct HttpProvider {
    endpoint: Endpoint,
    transport: HttpTransport,
    decoder: Option<DecoderFactory>,
}

impl fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl HttpProvider {
    /// A provider sending to `endpoint` with a transport configured by `config`.
    ///
    /// # Errors
    ///
    /// [`TransportError::Client`] when the HTTP client cannot be built.
    pub fn new(endpoint: Endpoint, config: TransportConfig) -> Result<Self, TransportError> {
        Ok(Self::with_transport(endpoint, HttpTransport::new(config)?))
    }

    /// A provider sending to `endpoint` through `transport` (shared between providers).
    pub fn with_transport(endpoint: Endpoint, transport: HttpTransport) -> Self {
        Self {
            endpoint,
            transport,
            decoder: None,
        }
    }

    /// The provider for `kind` with its key from the environment ([`Endpoint::from_env`]) and,
    /// when `FLEMMA_BASE_URL` is set, that base URL (a proxy, a local server, an
    /// OpenAI-compatible server through `OpenAiChat`).
    ///
    /// # Errors
    ///
    /// [`TransportError::MissingEnv`] and [`TransportError::Client`].
    pub fn from_env(kind: ProviderKind, model: &str) -> Result<Self, TransportError> {
        Self::from_env_with(kind, model, TransportConfig::default())
    }

    /// [`HttpProvider::from_env`] with a transport configured by `config` (timeouts and
    /// retries, e.g. [`TransportConfig::from_options`]).
    ///
    /// # Errors
    ///
    /// [`TransportError::MissingEnv`] and [`TransportError::Client`].
    pub fn from_env_with(
        kind: ProviderKind,
        model: &str,
        config: TransportConfig,
    ) -> Result<Self, TransportError> {
        let mut endpoint = Endpoint::from_env(kind, model)?;
        if let Some(url) = std::env::var("FLEMMA_BASE_URL")
            .ok()
            .filter(|u| !u.is_empty())
        {
            endpoint = endpoint.with_base_url(url);
        }
        Self::new(endpoint, config)
    }

    /// Decodes responses with decoders from `factory` instead of the provider's own (a Vertex
    /// decoder with fixed ids, in tests).
    #[must_use]
    pub fn with_decoder(
        mut self,
        factory: impl Fn() -> Box<dyn StreamDecoder> + Send + Sync + 'static,
    ) -> Self {
        self.decoder = Some(Arc::new(factory));
        self
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }
}

#[async_trait::async_trait]
impl Provider for HttpProvider {
    fn name(&self) -> &str {
        self.endpoint.kind().name()
    }

    fn request_options(&self, options: &Options) -> RequestOptions {
        RequestOptions::from_options(options, self.endpoint.kind())
    }

    fn build_request(&self, prompt: &Prompt<'_>, options: &RequestOptions) -> Request {
        Request {
            body: self.endpoint.kind().request(prompt, options).to_json(),
        }
    }

    async fn stream(&self, request: Request) -> Result<EventStream, SendError> {
        self.stream_observed(request, Arc::new(|_: &Retry| {}))
            .await
    }

    async fn stream_observed(
        &self,
        request: Request,
        on_retry: OnRetry,
    ) -> Result<EventStream, SendError> {
        let chunks = self
            .transport
            .post_stream_observed(&self.endpoint, request.body, on_retry.as_ref())
            .await?;
        let decoder = match &self.decoder {
            Some(factory) => factory(),
            None => self.endpoint.kind().decoder(),
        };
        Ok(EventStream::decode(chunks, decoder))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_object_safe(_: &dyn Provider) {}

    #[test]
    fn provider_is_object_safe_and_names_round_trip() {
        let endpoint = Endpoint::openai_chat(crate::ApiKey::new("k"));
        let provider: Box<dyn Provider> =
            Box::new(HttpProvider::new(endpoint, TransportConfig::default()).unwrap());
        assert_object_safe(provider.as_ref());
        for kind in [
            ProviderKind::Anthropic,
            ProviderKind::OpenAiResponses,
            ProviderKind::OpenAiChat,
            ProviderKind::Vertex,
        ] {
            assert_eq!(ProviderKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(ProviderKind::from_name("scripted"), None);
    }

    #[tokio::test]
    async fn a_broken_chunk_ends_the_stream_with_an_error_and_drops_open_calls() {
        use futures_util::StreamExt as _;
        let first = b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"x\",\"input\":{}}}\n\n".to_vec();
        let chunks = futures_util::stream::iter(vec![Ok(first), Err(TransportError::Cancelled)]);
        let events: Vec<_> = EventStream::decode(chunks, ProviderKind::Anthropic.decoder())
            .collect()
            .await;
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::Error { message } if message == "cancelled"))
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, StreamEvent::ToolCall { .. }))
        );
    }
}
