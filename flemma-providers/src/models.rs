//! What flemma knows of the providers' models: their context window, their longest output and
//! their list prices, from a table kept in the repository (`flemma-providers/data/models.toml`,
//! with the date it was taken) that a host can override model by model.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Usage;

/// The table built into this release.
const BUILTIN: &str = include_str!("../data/models.toml");

/// Why a table of models, or an override of one, was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelTableError {
    /// The table is not a table of models as described in [`ModelTable`].
    #[error("the table of models is not valid: {0}")]
    Invalid(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Two models claim one id.
    #[error("the model id '{id}' is listed twice (for {first} and {second})")]
    DuplicateId {
        /// The id.
        id: String,
        /// The first model's name.
        first: String,
        /// The second model's name.
        second: String,
    },
    /// A price or size that cannot be (a negative or not finite price).
    #[error("model '{model}': {field} must be a finite number not below 0, not {value}")]
    BadValue {
        /// The model's id or name.
        model: String,
        /// The field.
        field: &'static str,
        /// What was written.
        value: f64,
    },
}

/// List prices in US dollars per million tokens. A kind of token the model has no price for
/// (`cache_write` of an OpenAI model) is `None`: a usage with such tokens has no cost
/// ([`Prices::cost`]), never a guessed one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Prices {
    /// Uncached input.
    pub input: Option<f64>,
    /// Output, reasoning included.
    pub output: Option<f64>,
    /// Input read from the prompt cache.
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Input written to the prompt cache (Anthropic: for 5 minutes).
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Input written to the prompt cache for an hour (Anthropic).
    #[serde(default)]
    pub cache_write_1h: Option<f64>,
}

/// The prices of a request whose input is above a size (long-context prices, for the whole
/// request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Tier {
    /// The tier applies when the request's input is above this many tokens.
    pub above_input_tokens: u64,
    /// Its prices.
    #[serde(flatten)]
    pub prices: Prices,
}

/// One model: the ids it answers to, its sizes and its prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ModelInfo {
    /// The vendor whose API serves it under these prices: `anthropic`, `openai`, `vertex`;
    /// `None` for a host's own model that any provider may serve.
    #[serde(default)]
    pub provider: Option<String>,
    /// Its name for people (`Claude Sonnet 4.5`).
    #[serde(default)]
    pub name: String,
    /// The ids a request names it by (an alias and dated snapshots).
    pub ids: Vec<String>,
    /// How many input tokens it accepts.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// How many tokens it may answer with.
    #[serde(default)]
    pub max_output: Option<u64>,
    /// Its standard prices.
    #[serde(flatten)]
    pub prices: Prices,
    /// Higher prices for long requests, by threshold.
    #[serde(default, rename = "tier")]
    pub tiers: Vec<Tier>,
}

impl ModelInfo {
    /// The prices of a request of `usage`: the highest tier whose threshold its input is
    /// above, else the standard prices.
    pub fn prices_for(&self, usage: &Usage) -> &Prices {
        self.tiers
            .iter()
            .filter(|t| usage.input > t.above_input_tokens)
            .max_by_key(|t| t.above_input_tokens)
            .map_or(&self.prices, |t| &t.prices)
    }

    /// What a request of `usage` cost in US dollars, at the tier its input falls in; `None`
    /// when the model has no price for a kind of token the usage has.
    ///
    /// ```
    /// let models = flemma_providers::ModelTable::builtin();
    /// let sonnet = models.get("anthropic", "claude-haiku-4-5").expect("a listed model");
    /// let mut usage = flemma_providers::Usage::default();
    /// usage.input = 1_000_000;
    /// let cost = sonnet.cost(&usage).expect("priced");
    /// assert!(cost > 0.0);
    /// ```
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        self.prices_for(usage).cost(usage)
    }
}

impl Prices {
    /// What `usage` cost at these prices, in US dollars; `None` when a kind of token the
    /// usage has (more than 0 of) has no price here.
    pub fn cost(&self, usage: &Usage) -> Option<f64> {
        let part = |tokens: u64, price: Option<f64>| -> Option<f64> {
            if tokens == 0 {
                return Some(0.0);
            }
            // Token counts stay far below 2^53: the conversion is exact.
            #[allow(clippy::cast_precision_loss, reason = "counts far below 2^53")]
            let tokens = tokens as f64;
            price.map(|p| tokens * p / 1_000_000.0)
        };
        Some(
            part(usage.uncached_input(), self.input)?
                + part(usage.cache_read, self.cache_read)?
                + part(usage.cache_write, self.cache_write)?
                + part(usage.cache_write_1h, self.cache_write_1h)?
                + part(usage.output, self.output)?,
        )
    }

    fn check(&self, model: &str) -> Result<(), ModelTableError> {
        for (field, value) in [
            ("input", self.input),
            ("output", self.output),
            ("cache_read", self.cache_read),
            ("cache_write", self.cache_write),
            ("cache_write_1h", self.cache_write_1h),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                return Err(ModelTableError::BadValue {
                    model: model.to_owned(),
                    field,
                    value,
                });
            }
        }
        Ok(())
    }

    /// These prices with each price `other` sets replacing this one's.
    fn overridden(&self, other: &Prices) -> Prices {
        Prices {
            input: other.input.or(self.input),
            output: other.output.or(self.output),
            cache_read: other.cache_read.or(self.cache_read),
            cache_write: other.cache_write.or(self.cache_write),
            cache_write_1h: other.cache_write_1h.or(self.cache_write_1h),
        }
    }
}

/// The file's form.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    taken: String,
    #[serde(default)]
    sources: Vec<String>,
    #[serde(default, rename = "model")]
    models: Vec<ModelInfo>,
}

/// A host's override of one model (`[models."<id>"]` of `flemma.toml`): every field is
/// optional and replaces the table's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Override {
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    context_window: Option<u64>,
    #[serde(default)]
    max_output: Option<u64>,
    #[serde(flatten)]
    prices: Prices,
    #[serde(default, rename = "tier")]
    tiers: Option<Vec<Tier>>,
}

/// The models flemma knows: the built-in table ([`ModelTable::builtin`], taken on the date
/// [`ModelTable::taken`] says) and a host's overrides ([`ModelTable::with_overrides`]).
///
/// A model is found by the provider a request went to and the model id it named
/// ([`ModelTable::get`]): `openai-chat` finds OpenAI's models, and a host's own model without
/// a `provider` is found through any provider. A model not in the table has no price and no
/// known window: usage shows its tokens and no cost, never a wrong one.
///
/// ```
/// use flemma_providers::ModelTable;
///
/// let models = ModelTable::builtin();
/// assert!(models.get("anthropic", "claude-haiku-4-5").is_some());
/// assert!(models.get("anthropic", "a-model-nobody-made").is_none());
///
/// // A host's prices (from `[models]` of flemma.toml), a model of its own included.
/// let overrides = serde_json::json!({
///     "claude-haiku-4-5": { "input": 2.5 },
///     "local-llama": { "context_window": 32768, "input": 0.0, "output": 0.0 },
/// });
/// let models = models.with_overrides(&overrides)?;
/// assert_eq!(models.get("anthropic", "claude-haiku-4-5").unwrap().prices.input, Some(2.5));
/// assert_eq!(models.get("openai-chat", "local-llama").unwrap().context_window, Some(32768));
/// # Ok::<(), flemma_providers::ModelTableError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ModelTable {
    taken: String,
    sources: Vec<String>,
    models: Vec<ModelInfo>,
    /// Each id's model.
    index: HashMap<String, usize>,
}

static BUILTIN_TABLE: LazyLock<Result<Arc<ModelTable>, String>> = LazyLock::new(|| {
    ModelTable::parse(BUILTIN)
        .map(Arc::new)
        .map_err(|e| e.to_string())
});

/// The vendor whose list prices apply to a provider's requests.
fn vendor(provider: &str) -> &str {
    match provider {
        "openai-chat" => "openai",
        other => other,
    }
}

impl ModelTable {
    /// The table built into this release. It is checked by the crate's tests; were it ever
    /// unreadable, the table is empty (no prices, never wrong ones).
    pub fn builtin() -> Arc<ModelTable> {
        match &*BUILTIN_TABLE {
            Ok(table) => Arc::clone(table),
            Err(_) => Arc::new(ModelTable::empty()),
        }
    }

    /// A table with no model.
    pub fn empty() -> ModelTable {
        ModelTable {
            taken: String::new(),
            sources: Vec::new(),
            models: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Reads a table in the built-in file's form: `taken = "YYYY-MM-DD"`, `sources`, and
    /// `[[model]]` tables (`provider`, `name`, `ids`, `context_window`, `max_output`, the
    /// prices per million tokens `input`, `output`, `cache_read`, `cache_write`,
    /// `cache_write_1h`, and `[[model.tier]]` tables with `above_input_tokens`).
    ///
    /// # Errors
    ///
    /// [`ModelTableError`] when it is not such a table, an id is listed twice or a price is
    /// negative.
    pub fn parse(text: &str) -> Result<ModelTable, ModelTableError> {
        let file: File = toml::from_str(text).map_err(|e| ModelTableError::Invalid(Box::new(e)))?;
        let mut table = ModelTable {
            taken: file.taken,
            sources: file.sources,
            models: Vec::with_capacity(file.models.len()),
            index: HashMap::new(),
        };
        for model in file.models {
            table.insert(model)?;
        }
        Ok(table)
    }

    fn insert(&mut self, model: ModelInfo) -> Result<(), ModelTableError> {
        let label = model
            .ids
            .first()
            .cloned()
            .unwrap_or_else(|| model.name.clone());
        model.prices.check(&label)?;
        for tier in &model.tiers {
            tier.prices.check(&label)?;
        }
        let at = self.models.len();
        for id in &model.ids {
            if let Some(&other) = self.index.get(id) {
                return Err(ModelTableError::DuplicateId {
                    id: id.clone(),
                    first: self.models[other].name.clone(),
                    second: model.name.clone(),
                });
            }
            self.index.insert(id.clone(), at);
        }
        self.models.push(model);
        Ok(())
    }

    /// The date the built-in prices were taken (`2026-12-06`); empty for a table without one.
    pub fn taken(&self) -> &str {
        &self.taken
    }

    /// Where the prices came from.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    /// Every model, in the table's order.
    pub fn models(&self) -> &[ModelInfo] {
        &self.models
    }

    /// The model `id` as `provider` (`anthropic`, `openai`, `openai-chat`, `vertex`, or
    /// another) serves it: a model of that provider's vendor, or one with no provider.
    pub fn get(&self, provider: &str, id: &str) -> Option<&ModelInfo> {
        let model = &self.models[*self.index.get(id)?];
        match &model.provider {
            // A host's model may name the provider (`openai-chat`) or its vendor (`openai`).
            Some(p) if p != provider && p != vendor(provider) => None,
            _ => Some(model),
        }
    }

    /// This table with a host's overrides: a JSON object (as `[models]` of `flemma.toml`
    /// loads) from model id to the fields to replace. An id the table has changes that
    /// model (for every id of it); another id adds a model of its own (with no `provider`
    /// unless it says one, so any provider finds it).
    ///
    /// # Errors
    ///
    /// [`ModelTableError`] when an override has a field that is not a model's, or a negative
    /// price.
    pub fn with_overrides(&self, overrides: &Value) -> Result<ModelTable, ModelTableError> {
        let mut table = self.clone();
        let Some(overrides) = overrides.as_object() else {
            if overrides.is_null() {
                return Ok(table);
            }
            return Err(ModelTableError::Invalid(
                "`[models]` must be a table of models by id".into(),
            ));
        };
        for (id, fields) in overrides {
            let patch: Override = serde_json::from_value(fields.clone())
                .map_err(|e| ModelTableError::Invalid(Box::new(ModelError(id.clone(), e))))?;
            patch.prices.check(id)?;
            for tier in patch.tiers.iter().flatten() {
                tier.prices.check(id)?;
            }
            match table.index.get(id) {
                Some(&at) => {
                    let model = &mut table.models[at];
                    if patch.provider.is_some() {
                        model.provider = patch.provider;
                    }
                    if let Some(name) = patch.name {
                        model.name = name;
                    }
                    model.context_window = patch.context_window.or(model.context_window);
                    model.max_output = patch.max_output.or(model.max_output);
                    model.prices = model.prices.overridden(&patch.prices);
                    if let Some(tiers) = patch.tiers {
                        model.tiers = tiers;
                    }
                }
                None => table.insert(ModelInfo {
                    provider: patch.provider,
                    name: patch.name.unwrap_or_else(|| id.clone()),
                    ids: vec![id.clone()],
                    context_window: patch.context_window,
                    max_output: patch.max_output,
                    prices: patch.prices,
                    tiers: patch.tiers.unwrap_or_default(),
                })?,
            }
        }
        Ok(table)
    }
}

/// An override of one model that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("[models.\"{0}\"]")]
struct ModelError(String, #[source] serde_json::Error);

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cache_read: u64, cache_write: u64, output: u64) -> Usage {
        Usage {
            input,
            cache_read,
            cache_write,
            output,
            ..Usage::default()
        }
    }

    const TABLE: &str = r#"
taken = "2026-12-06"
sources = ["test"]

[[model]]
provider = "anthropic"
name = "Long"
ids = ["long", "long-20250101"]
context_window = 1000000
input = 3.0
output = 15.0
cache_read = 0.3
cache_write = 3.75

[[model.tier]]
above_input_tokens = 200000
input = 6.0
output = 22.5
cache_read = 0.6
cache_write = 7.5

[[model]]
provider = "openai"
name = "Plain"
ids = ["plain"]
input = 1.25
output = 10.0
cache_read = 0.125
"#;

    #[test]
    fn the_builtin_table_reads_and_has_every_vendor() {
        let table = ModelTable::parse(BUILTIN).expect("the built-in table");
        assert_eq!(table.taken().len(), "2026-12-06".len(), "{}", table.taken());
        assert!(!table.sources().is_empty());
        for vendor in ["anthropic", "openai", "vertex"] {
            assert!(
                table
                    .models()
                    .iter()
                    .any(|m| m.provider.as_deref() == Some(vendor)),
                "{vendor}"
            );
        }
        for model in table.models() {
            assert!(
                model.prices.input.is_some() && model.prices.output.is_some(),
                "{model:?}"
            );
            assert!(model.context_window.is_some(), "{model:?}");
        }
    }

    #[test]
    fn builtin_tiers_cost_more_and_cache_reads_cost_less() {
        let table = ModelTable::builtin();
        for model in table.models() {
            let base = &model.prices;
            if let (Some(read), Some(input)) = (base.cache_read, base.input) {
                assert!(read < input, "{model:?}");
            }
            for tier in &model.tiers {
                for (t, b) in [
                    (tier.prices.input, base.input),
                    (tier.prices.output, base.output),
                    (tier.prices.cache_read, base.cache_read),
                ] {
                    assert!(t.zip(b).is_none_or(|(t, b)| t >= b), "{model:?}");
                }
            }
        }
    }

    proptest::proptest! {
        /// More tokens of any kind never cost less, on every built-in model.
        #[test]
        fn more_tokens_never_cost_less(
            index in 0usize..1000,
            uncached in 0u64..2_000_000,
            read in 0u64..2_000_000,
            output in 0u64..200_000,
            more in 1u64..500_000,
            which in 0usize..3,
        ) {
            let table = ModelTable::builtin();
            let model = &table.models()[index % table.models().len()];
            let base = usage(uncached + read, read, 0, output);
            let mut bigger = base;
            match which {
                0 => bigger.input += more,
                1 => { bigger.input += more; bigger.cache_read += more; }
                _ => bigger.output += more,
            }
            let (Some(a), Some(b)) = (model.cost(&base), model.cost(&bigger)) else {
                // Only a model without a cache read price may have no cost.
                proptest::prop_assert!(model.prices.cache_read.is_none() || model.tiers.iter().any(|t| t.prices.cache_read.is_none()));
                return Ok(());
            };
            proptest::prop_assert!(b >= a, "{} < {} for {:?}", b, a, model.name);
            proptest::prop_assert!(a >= 0.0);
        }
    }

    #[test]
    fn cost_adds_each_kind_at_its_price() {
        let table = ModelTable::parse(TABLE).expect("table");
        let long = table.get("anthropic", "long-20250101").expect("long");
        // 1,000 uncached + 100,000 read + 10,000 written; 2,000 out.
        let cost = long
            .cost(&usage(111_000, 100_000, 10_000, 2_000))
            .expect("cost");
        let expected = 1_000.0 * 3.0 / 1e6
            + 100_000.0 * 0.3 / 1e6
            + 10_000.0 * 3.75 / 1e6
            + 2_000.0 * 15.0 / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost} {expected}");
    }

    #[test]
    fn a_long_request_pays_its_tier_for_all_of_it() {
        let table = ModelTable::parse(TABLE).expect("table");
        let long = table.get("anthropic", "long").expect("long");
        let at = long.cost(&usage(200_000, 0, 0, 0)).expect("cost");
        let above = long.cost(&usage(200_001, 0, 0, 0)).expect("cost");
        assert!((at - 0.6).abs() < 1e-12, "{at}");
        assert!((above - 200_001.0 * 6.0 / 1e6).abs() < 1e-12, "{above}");
    }

    #[test]
    fn tokens_without_a_price_have_no_cost() {
        let table = ModelTable::parse(TABLE).expect("table");
        let plain = table
            .get("openai-chat", "plain")
            .expect("plain through openai-chat");
        assert!(plain.cost(&usage(10, 0, 0, 5)).is_some());
        // OpenAI lists no cache write price: a usage with writes has no cost.
        assert_eq!(plain.cost(&usage(10, 0, 5, 5)), None);
    }

    #[test]
    fn a_model_is_found_only_through_its_vendor() {
        let table = ModelTable::parse(TABLE).expect("table");
        assert!(table.get("anthropic", "plain").is_none());
        assert!(table.get("vertex", "long").is_none());
        assert!(table.get("openai", "plain").is_some());
    }

    #[test]
    fn overrides_change_and_add_models() {
        let table = ModelTable::parse(TABLE).expect("table");
        let table = table
            .with_overrides(&serde_json::json!({
                "long-20250101": { "output": 20.0, "tier": [] },
                "mine": { "input": 0.0, "output": 0.0, "context_window": 8192 },
            }))
            .expect("overrides");
        let long = table.get("anthropic", "long").expect("long");
        assert_eq!(long.prices.output, Some(20.0));
        assert_eq!(long.prices.input, Some(3.0));
        assert!(long.tiers.is_empty());
        let mine = table.get("vertex", "mine").expect("any provider");
        assert_eq!(mine.cost(&usage(1_000, 0, 0, 1_000)), Some(0.0));
        // A host's model of one provider, named as the command line names it.
        let table = table
            .with_overrides(&serde_json::json!({
                "local": { "provider": "openai-chat", "input": 0.0, "output": 0.0 },
            }))
            .expect("overrides");
        assert!(table.get("openai-chat", "local").is_some());
        assert!(table.get("anthropic", "local").is_none());
    }

    #[test]
    fn bad_tables_and_overrides_are_refused() {
        let table = ModelTable::parse(TABLE).expect("table");
        for (overrides, wanted) in [
            (
                serde_json::json!({ "plain": { "input": -1.0 } }),
                "must be a finite",
            ),
            (
                serde_json::json!({ "plain": { "imput": 1.0 } }),
                "[models.\"plain\"]",
            ),
            (serde_json::json!(["plain"]), "table of models by id"),
        ] {
            let error = table.with_overrides(&overrides).expect_err("refused");
            let text = flemma_ids::error_chain(&error);
            assert!(text.contains(wanted), "{text}");
        }
        let twice = format!("{TABLE}\n[[model]]\nname = \"Again\"\nids = [\"plain\"]\n");
        assert!(matches!(
            ModelTable::parse(&twice),
            Err(ModelTableError::DuplicateId { .. })
        ));
        assert!(matches!(
            ModelTable::parse("taken = 1"),
            Err(ModelTableError::Invalid(_))
        ));
    }
}
