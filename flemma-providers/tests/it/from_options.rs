//! `RequestOptions::from_options`: default models and the thinking mapping, as `flemma request`
//! and any embedding application compute them from the resolved options.

use flemma_config::{Config, Layer};
use flemma_providers::{
    CacheRetention, ForeignThinking, ProviderKind, RequestOptions, Thinking, ThinkingLevel,
};
use pretty_assertions::assert_eq;
use serde_json::json;

const KINDS: [ProviderKind; 4] = [
    ProviderKind::Anthropic,
    ProviderKind::OpenAiResponses,
    ProviderKind::OpenAiChat,
    ProviderKind::Vertex,
];

fn request_options(sets: &[(&str, serde_json::Value)]) -> Vec<RequestOptions> {
    let mut config = Config::new();
    for (path, value) in sets {
        config.set(Layer::Setup, path, value.clone()).unwrap();
    }
    let options = config.options().unwrap();
    KINDS
        .iter()
        .map(|&kind| RequestOptions::from_options(&options, kind))
        .collect()
}

#[test]
fn defaults_are_each_providers_model_and_nothing_else() {
    let got = request_options(&[]);
    let models: Vec<&str> = got.iter().map(|o| o.model.as_str()).collect();
    assert_eq!(
        models,
        ["claude-sonnet-4-5", "gpt-5", "gpt-4.1", "gemini-2.5-pro"]
    );
    for (options, kind) in got.into_iter().zip(KINDS) {
        assert_eq!(options, RequestOptions::new(kind.default_model()));
    }
}

#[test]
fn options_fill_every_field() {
    let got = request_options(&[
        ("model", json!("my-model")),
        ("max_tokens", json!(1000)),
        ("temperature", json!(0.5)),
        ("cache_retention", json!("long")),
        ("thinking", json!({"level": "low", "foreign": "drop"})),
    ]);
    for options in got {
        let mut expected = RequestOptions::new("my-model");
        expected.max_tokens = Some(1000);
        expected.temperature = Some(0.5);
        expected.cache_retention = CacheRetention::Long;
        expected.thinking = Thinking::Level(ThinkingLevel::Low);
        expected.foreign_thinking = ForeignThinking::Drop;
        assert_eq!(options, expected);
    }
}

#[test]
fn provider_tables_win_over_the_unified_thinking() {
    let got = request_options(&[
        ("thinking", json!("medium")),
        ("anthropic.thinking_budget", json!(3000)),
        ("vertex.thinking_budget", json!(5000)),
        ("openai.reasoning", json!("high")),
    ]);
    let thinking: Vec<Thinking> = got.iter().map(|o| o.thinking).collect();
    assert_eq!(
        thinking,
        [
            Thinking::Budget(3000),
            Thinking::Level(ThinkingLevel::High),
            Thinking::Level(ThinkingLevel::Medium),
            Thinking::Budget(5000),
        ]
    );
    // Without the provider tables every provider takes the unified level.
    let got = request_options(&[("thinking", json!(false))]);
    assert!(got.iter().all(|o| o.thinking == Thinking::Off));
}
