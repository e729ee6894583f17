//! Endpoints: where a request goes, its key or token source, the provider kinds' request
//! bodies and decoders.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::TransportError;
use crate::body::RequestBody;
use crate::event::StreamDecoder;
use crate::kind::ProviderKind;
use crate::prompt::Prompt;
use crate::request::RequestOptions;
use crate::{AnthropicDecoder, ChatCompletionsDecoder, OpenAiResponsesDecoder, VertexDecoder};

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

// `ProviderKind` is defined in `kind.rs` (the request options name it); its methods are here,
// beside the endpoints, since they name every adapter and decoder.
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

/// The future [`TokenSource::token`] returns, as `async_trait` boxes it.
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
/// use async_trait::async_trait;
/// use flemma_providers::{ApiKey, Endpoint, TokenError, TokenSource};
///
/// /// A token from `gcloud auth print-access-token`, cached by the host.
/// #[derive(Debug)]
/// struct Gcloud;
///
/// #[async_trait]
/// impl TokenSource for Gcloud {
///     async fn token(&self, _refresh: bool) -> Result<ApiKey, TokenError> {
///         Ok(ApiKey::new("ya29.token"))
///     }
/// }
///
/// let endpoint = Endpoint::vertex_with(std::sync::Arc::new(Gcloud), "my-project", "us-central1", "gemini-2.5-pro");
/// assert!(endpoint.url().starts_with("https://us-central1-aiplatform.googleapis.com/"));
/// ```
#[async_trait::async_trait]
pub trait TokenSource: fmt::Debug + Send + Sync {
    /// The current token; a fresh one when `refresh` is set (the last one was refused).
    ///
    /// # Errors
    ///
    /// A [`TokenError`] when no token can be had (the request is not sent).
    async fn token(&self, refresh: bool) -> Result<ApiKey, TokenError>;
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
    pub(super) fn refreshes(&self) -> bool {
        matches!(self.credentials, Credentials::Source(_))
    }

    pub(super) async fn key(&self, refresh: bool) -> Result<ApiKey, TransportError> {
        match &self.credentials {
            Credentials::Key(key) => Ok(key.clone()),
            Credentials::Source(source) => {
                source.token(refresh).await.map_err(TransportError::Token)
            }
        }
    }

    pub(super) fn headers(&self, key: &ApiKey) -> Result<HeaderMap, TransportError> {
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
