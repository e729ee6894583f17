//! What every request needs besides the prompt, and the key order of request bodies.

use flemma_config::Options;
use flemma_schema::ToolSpec;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::kind::ProviderKind;

/// The unified thinking level (`minimal | low | medium | high | max`) or an explicit budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// No thinking requested.
    Off,
    /// A unified level.
    Level(ThinkingLevel),
    /// An explicit token budget.
    Budget(u64),
}

/// The unified thinking levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ThinkingLevel {
    /// The least.
    Minimal,
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// The most the model allows.
    Max,
}

impl ThinkingLevel {
    /// Reads a level word.
    pub fn from_word(word: &str) -> Option<Self> {
        Some(match word {
            "minimal" => ThinkingLevel::Minimal,
            "low" => ThinkingLevel::Low,
            "medium" => ThinkingLevel::Medium,
            "high" => ThinkingLevel::High,
            "max" => ThinkingLevel::Max,
            _ => return None,
        })
    }

    /// The level's word.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Max => "max",
        }
    }

    /// The token budget of a level for budget-based APIs (Anthropic, Vertex 2.5).
    pub fn budget(self) -> u64 {
        match self {
            ThinkingLevel::Minimal => 1024,
            ThinkingLevel::Low => 2048,
            ThinkingLevel::Medium => 8192,
            ThinkingLevel::High => 16384,
            ThinkingLevel::Max => 32768,
        }
    }
}

impl Thinking {
    /// Reads the `thinking` option: a level word, a budget number, `false`/`"off"`/`0`, or a
    /// table whose `level` (or `budget`) says so (`{level = "high", foreign = "drop"}`).
    ///
    /// ```
    /// use flemma_providers::{Thinking, ThinkingLevel};
    /// use serde_json::json;
    ///
    /// assert_eq!(Thinking::from_option(Some(&json!("high"))), Thinking::Level(ThinkingLevel::High));
    /// assert_eq!(Thinking::from_option(Some(&json!(4096))), Thinking::Budget(4096));
    /// assert_eq!(Thinking::from_option(Some(&json!({"level": "low", "foreign": "drop"}))), Thinking::Level(ThinkingLevel::Low));
    /// assert_eq!(Thinking::from_option(None), Thinking::Off);
    /// ```
    pub fn from_option(value: Option<&Value>) -> Self {
        match value {
            Some(Value::Object(table)) => {
                Self::from_option(table.get("level").or_else(|| table.get("budget")))
            }
            Some(Value::String(word)) => {
                ThinkingLevel::from_word(word).map_or(Thinking::Off, Thinking::Level)
            }
            Some(Value::Number(n)) => n
                .as_u64()
                .filter(|&b| b > 0)
                .map_or(Thinking::Off, Thinking::Budget),
            Some(Value::Bool(true)) => Thinking::Level(ThinkingLevel::Medium),
            _ => Thinking::Off,
        }
    }

    /// The token budget, if any.
    pub fn budget(self) -> Option<u64> {
        match self {
            Thinking::Off => None,
            Thinking::Level(level) => Some(level.budget()),
            Thinking::Budget(budget) => Some(budget),
        }
    }
}

/// What to do with thinking that another provider produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForeignThinking {
    /// Re-send it as `<thinking>` text, so the model still sees its earlier reasoning.
    #[default]
    Text,
    /// Leave it out of the request.
    Drop,
}

impl ForeignThinking {
    /// Reads `foreign` from a `thinking` table option (`{foreign = "drop"}`); anything else is
    /// [`ForeignThinking::Text`].
    ///
    /// ```
    /// use flemma_providers::ForeignThinking;
    /// use serde_json::json;
    ///
    /// assert_eq!(ForeignThinking::from_option(Some(&json!({"foreign": "drop"}))), ForeignThinking::Drop);
    /// assert_eq!(ForeignThinking::from_option(Some(&json!("high"))), ForeignThinking::Text);
    /// ```
    pub fn from_option(thinking: Option<&Value>) -> Self {
        match thinking
            .and_then(|t| t.get("foreign"))
            .and_then(Value::as_str)
        {
            Some("drop") => ForeignThinking::Drop,
            _ => ForeignThinking::Text,
        }
    }
}

/// How long providers should cache the prompt prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheRetention {
    /// No cache markers.
    None,
    /// The default short cache.
    #[default]
    Short,
    /// The long (1 hour) cache where offered.
    Long,
}

impl CacheRetention {
    /// Reads the `cache_retention` option (`none`, `short`, `long`); anything else is `short`.
    pub fn from_option(value: Option<&str>) -> Self {
        match value {
            Some("none") => CacheRetention::None,
            Some("long") => CacheRetention::Long,
            _ => CacheRetention::Short,
        }
    }
}

/// Everything a request body needs besides the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestOptions {
    /// The model.
    pub model: String,
    /// Maximum output tokens.
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Thinking (provider-specific overrides already applied by the caller).
    pub thinking: Thinking,
    /// Prompt-cache retention.
    pub cache_retention: CacheRetention,
    /// The tools offered, sorted by name.
    pub tools: Vec<ToolSpec>,
    /// What to do with another provider's thinking.
    pub foreign_thinking: ForeignThinking,
    /// A key the same for every request of one conversation, for the provider's prompt cache
    /// (OpenAI's `prompt_cache_key`: requests with one key go to the machines that hold its
    /// prefix); the session sets the conversation's id. Not sent with
    /// [`CacheRetention::None`].
    pub cache_key: Option<String>,
}

impl RequestOptions {
    /// Options for `model` with nothing else set.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            max_tokens: None,
            temperature: None,
            thinking: Thinking::Off,
            cache_retention: CacheRetention::Short,
            tools: Vec::new(),
            foreign_thinking: ForeignThinking::Text,
            cache_key: None,
        }
    }
}

impl RequestOptions {
    /// The request options the resolved `options` give for a provider, as `flemma request`
    /// computes them: the `model` option or the provider's [default
    /// model](ProviderKind::default_model); `max_tokens`, `temperature`, `cache_retention`;
    /// thinking from the unified `thinking` option unless the provider's own table says
    /// otherwise (`anthropic.thinking_budget`, `vertex.thinking_budget`, `openai.reasoning`;
    /// Chat Completions reads only `thinking`); `foreign` from a `thinking` table. No tools:
    /// the caller offers the conversation's tool set.
    ///
    /// ```
    /// use flemma_config::{Config, Layer};
    /// use flemma_providers::{ProviderKind, RequestOptions, Thinking, ThinkingLevel};
    ///
    /// let mut config = Config::new();
    /// config.set(Layer::Setup, "thinking", "high")?;
    /// config.set(Layer::Setup, "anthropic.thinking_budget", 4096)?;
    /// let options = config.options()?;
    ///
    /// let anthropic = RequestOptions::from_options(&options, ProviderKind::Anthropic);
    /// assert_eq!(anthropic.model, "claude-sonnet-4-5");
    /// assert_eq!(anthropic.thinking, Thinking::Budget(4096));
    /// let vertex = RequestOptions::from_options(&options, ProviderKind::Vertex);
    /// assert_eq!(vertex.thinking, Thinking::Level(ThinkingLevel::High));
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn from_options(options: &Options, kind: ProviderKind) -> Self {
        let budget = |table: &Map<String, Value>| {
            table
                .get("thinking_budget")
                .and_then(Value::as_u64)
                .map(Thinking::Budget)
        };
        let general = Thinking::from_option(options.thinking.as_ref());
        let thinking = match kind {
            ProviderKind::Anthropic => budget(&options.anthropic).unwrap_or(general),
            ProviderKind::Vertex => budget(&options.vertex).unwrap_or(general),
            ProviderKind::OpenAiResponses => options
                .openai
                .get("reasoning")
                .map_or(general, |v| Thinking::from_option(Some(v))),
            ProviderKind::OpenAiChat => general,
        };
        Self {
            max_tokens: options.max_tokens,
            temperature: options.temperature,
            thinking,
            cache_retention: CacheRetention::from_option(options.cache_retention.as_deref()),
            foreign_thinking: ForeignThinking::from_option(options.thinking.as_ref()),
            ..Self::new(
                options
                    .model
                    .as_deref()
                    .unwrap_or_else(|| kind.default_model()),
            )
        }
    }
}

/// Serializes a request body with keys sorted at every level, except that the top level's
/// `trailing` keys come last in the given order (prompt-cache stability).
///
/// ```
/// let body = serde_json::json!({"messages": [], "model": "m", "system": "s", "tools": []});
/// assert_eq!(
///     flemma_providers::body_to_string(&body, &["system", "tools", "messages"]),
///     r#"{"model":"m","system":"s","tools":[],"messages":[]}"#
/// );
/// ```
pub fn body_to_string(body: &Value, trailing: &[&str]) -> String {
    // Serializing through a key-sorting view writes the body once, without cloning it.
    serde_json::to_string(&SortedBody { body, trailing }).unwrap_or_else(|_| {
        // Unreachable: every key of a `Value` is a string and no part of it fails to
        // serialize. Kept as a slow, equal fallback rather than a panic.
        let mut body = body.clone();
        body.sort_all_objects();
        if let Value::Object(map) = &mut body {
            let mut moved = Map::new();
            for key in trailing {
                if let Some(value) = map.shift_remove(*key) {
                    moved.insert((*key).to_owned(), value);
                }
            }
            map.extend(moved);
        }
        body.to_string()
    })
}

/// The top level of a request body: sorted keys, then the `trailing` ones in their order.
struct SortedBody<'a> {
    body: &'a Value,
    trailing: &'a [&'a str],
}

impl Serialize for SortedBody<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Value::Object(map) = self.body else {
            return Sorted(self.body).serialize(serializer);
        };
        let mut entries = sorted_entries(map, |key| !self.trailing.contains(&key));
        entries.extend(
            self.trailing
                .iter()
                .filter_map(|key| map.get_key_value(*key)),
        );
        serializer.collect_map(entries.into_iter().map(|(k, v)| (k, Sorted(v))))
    }
}

/// A JSON value serialized with the keys of every object in sorted order.
pub(crate) struct Sorted<'a>(pub(crate) &'a Value);

impl Sorted<'_> {
    /// Serializes an object with the keys of every object in sorted order.
    pub(crate) fn map<S: Serializer>(
        map: &Map<String, Value>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            sorted_entries(map, |_| true)
                .into_iter()
                .map(|(k, v)| (k, Sorted(v))),
        )
    }
}

impl Serialize for Sorted<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => Sorted::map(map, serializer),
            Value::Array(items) => serializer.collect_seq(items.iter().map(Sorted)),
            scalar => scalar.serialize(serializer),
        }
    }
}

fn sorted_entries(map: &Map<String, Value>, keep: impl Fn(&str) -> bool) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().filter(|(k, _)| keep(k)).collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}
