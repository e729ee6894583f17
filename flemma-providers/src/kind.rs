//! The wire protocols a provider may speak, their names and default models.
//! [`ProviderKind::request`] and [`ProviderKind::decoder`] are with the endpoints
//! (`transport/endpoint.rs`): they name every adapter and decoder.

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
    /// The model a request uses when none is chosen: `claude-sonnet-4-5`, `gpt-5`, `gpt-4.1`
    /// (Chat Completions), `gemini-2.5-pro`.
    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::OpenAiResponses => "gpt-5",
            ProviderKind::OpenAiChat => "gpt-4.1",
            ProviderKind::Vertex => "gemini-2.5-pro",
        }
    }

    /// The provider's name on the command line: `anthropic`, `openai`, `openai-chat`,
    /// `vertex`.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAiResponses => "openai",
            ProviderKind::OpenAiChat => "openai-chat",
            ProviderKind::Vertex => "vertex",
        }
    }

    /// The kind named `name` ([`ProviderKind::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "anthropic" => ProviderKind::Anthropic,
            "openai" => ProviderKind::OpenAiResponses,
            "openai-chat" => ProviderKind::OpenAiChat,
            "vertex" => ProviderKind::Vertex,
            _ => return None,
        })
    }
}
