//! What a conversation's requests used and cost: per request ([`RequestUsage`], in a
//! [`SessionEvent::Usage`](crate::SessionEvent::Usage)), per run ([`UsageTotals`]) and per
//! conversation, kept in its store ([`UsageLog`]) so that every run adds up.
//!
//! Who may change what here: the token counts are the provider's (a host chooses its
//! providers); the prices are the built-in table's and the host's (`[models]` of
//! `flemma.toml`, [`SessionBuilder::models`](crate::SessionBuilder::models)), never a
//! conversation's: a frontmatter may choose the model, not what it costs. The log is a file
//! in the conversation's store, which tools may write like any file of the project: it is a
//! record for people, read leniently (a line that does not read is skipped and counted).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use flemma_providers::{ModelTable, Usage};
use serde::{Deserialize, Serialize};

/// The name of the usage log in a conversation's store directory.
pub const USAGE_LOG: &str = "usage.jsonl";

/// What one request used, and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct RequestUsage {
    /// The request's number in this run, from 1.
    pub turn: u64,
    /// The provider it went to (`anthropic`, `openai`, `openai-chat`, `vertex`, …).
    pub provider: String,
    /// The model it named.
    pub model: String,
    /// The tokens, as the provider reported them.
    pub usage: Usage,
    /// What it cost in US dollars at the list prices of the model table; `None` when the
    /// model or a price of a kind of token it used is not known.
    pub cost: Option<f64>,
    /// The run's totals, this request included.
    pub run: UsageTotals,
    /// The request wrote the summary of a compaction (not a turn of the conversation).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub compaction: bool,
}

/// The tokens and cost of several requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UsageTotals {
    /// How many requests reported usage.
    pub requests: u64,
    /// Their tokens, added up.
    pub usage: Usage,
    /// The cost of the requests with a known cost, in US dollars.
    pub cost: f64,
    /// How many requests had no known cost (their tokens are in `usage`, their cost is not
    /// in `cost`).
    pub unpriced: u64,
}

impl UsageTotals {
    /// Adds one request.
    pub fn add(&mut self, usage: &Usage, cost: Option<f64>) {
        self.requests = self.requests.saturating_add(1);
        self.usage += usage;
        match cost {
            Some(cost) => self.cost += cost,
            None => self.unpriced = self.unpriced.saturating_add(1),
        }
    }

    /// The cost when every request's is known.
    pub fn known_cost(&self) -> Option<f64> {
        (self.unpriced == 0).then_some(self.cost)
    }
}

/// Which budget: one run's (`budget.run.*`) or the conversation's over all its runs
/// (`budget.conversation.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BudgetScope {
    /// `budget.run.*`.
    Run,
    /// `budget.conversation.*`.
    Conversation,
}

impl BudgetScope {
    /// `run` or `conversation`, as the options name it.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetScope::Run => "run",
            BudgetScope::Conversation => "conversation",
        }
    }
}

/// The limit a request would cross, and what was spent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BudgetLimit {
    /// `max_tokens`: tokens in and out.
    Tokens {
        /// The limit.
        limit: u64,
        /// Tokens spent in the scope.
        spent: u64,
        /// Tokens the next request would use at least (its input is at least the last
        /// request's of the run).
        next_at_least: u64,
    },
    /// `max_cost`: US dollars.
    Cost {
        /// The limit.
        limit: f64,
        /// Dollars spent in the scope (requests with a known cost).
        spent: f64,
        /// What the next request would cost at least.
        next_at_least: f64,
    },
    /// `max_cost` is set and the request's model has no price: what it would cost cannot be
    /// known, so it is not sent.
    Unpriced {
        /// The limit.
        limit: f64,
        /// The provider.
        provider: String,
        /// The model.
        model: String,
    },
}

/// A budget the next request would cross: the run stops before it
/// ([`Stop::BudgetReached`](crate::Stop::BudgetReached)).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BudgetReached {
    /// Which budget.
    pub scope: BudgetScope,
    /// Its limit and what was spent.
    pub limit: BudgetLimit,
}

impl std::fmt::Display for BudgetReached {
    /// `run budget max_cost $0.50 reached: $0.48 spent, the next request costs at least
    /// $0.03`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scope = self.scope.as_str();
        match &self.limit {
            BudgetLimit::Tokens {
                limit,
                spent,
                next_at_least,
            } => {
                write!(
                    f,
                    "{scope} budget max_tokens {limit} reached: {spent} tokens spent"
                )?;
                if *next_at_least > 0 {
                    write!(f, ", the next request uses at least {next_at_least}")?;
                }
                Ok(())
            }
            BudgetLimit::Cost {
                limit,
                spent,
                next_at_least,
            } => {
                write!(
                    f,
                    "{scope} budget max_cost ${limit} reached: ${spent:.4} spent"
                )?;
                if *next_at_least > 0.0 {
                    write!(f, ", the next request costs at least ${next_at_least:.4}")?;
                }
                Ok(())
            }
            BudgetLimit::Unpriced {
                limit,
                provider,
                model,
            } => write!(
                f,
                "{scope} budget max_cost ${limit} cannot be kept: the model '{model}' \
                 ({provider}) has no price (give it one in [models] of flemma.toml)"
            ),
        }
    }
}

/// Whether the next request, of `provider` and `model` at `models`' prices, may go under
/// `limits` of `scope`, having spent `spent` in that scope; `last_input`: the input of the
/// run's last request (the next one's is at least that), 0 before the first.
///
/// A request goes when the scope's tokens plus at least the next request's stay within
/// `max_tokens`, and its cost plus at least the next request's (its input at the cheapest
/// input price of the model) stays within `max_cost`; a spent budget stops it even when the
/// next request's size is not known. Requests without a known cost do not count towards
/// `max_cost` (a model without a price is refused while `max_cost` is set).
pub fn budget_check(
    limits: &flemma_config::BudgetLimits,
    scope: BudgetScope,
    spent: &UsageTotals,
    last_input: u64,
    models: &ModelTable,
    provider: &str,
    model: &str,
) -> Option<BudgetReached> {
    if let Some(limit) = limits.max_tokens {
        let spent = spent.usage.total();
        // The next request uses at least one token.
        if spent.saturating_add(last_input.max(1)) > limit {
            return Some(BudgetReached {
                scope,
                limit: BudgetLimit::Tokens {
                    limit,
                    spent,
                    next_at_least: last_input,
                },
            });
        }
    }
    if let Some(limit) = limits.max_cost {
        let info = models.get(provider, model);
        let cheapest = info.and_then(|info| {
            let mut next = Usage::default();
            next.input = last_input;
            let prices = info.prices_for(&next);
            // Output must have a price, and input at some price.
            prices.output?;
            match (prices.input, prices.cache_read) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        });
        let Some(cheapest) = cheapest else {
            return Some(BudgetReached {
                scope,
                limit: BudgetLimit::Unpriced {
                    limit,
                    provider: provider.to_owned(),
                    model: model.to_owned(),
                },
            });
        };
        #[allow(clippy::cast_precision_loss, reason = "token counts far below 2^53")]
        let next_at_least = last_input as f64 * cheapest / 1_000_000.0;
        if spent.cost >= limit || spent.cost + next_at_least > limit {
            return Some(BudgetReached {
                scope,
                limit: BudgetLimit::Cost {
                    limit,
                    spent: spent.cost,
                    next_at_least,
                },
            });
        }
    }
    None
}

/// What `usage` of `model` through `provider` cost at `models`' prices.
pub fn cost_of(models: &ModelTable, provider: &str, model: &str, usage: &Usage) -> Option<f64> {
    models.get(provider, model)?.cost(usage)
}

/// One request in a conversation's [`UsageLog`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UsageRecord {
    /// When the response ended, in seconds since the Unix epoch.
    pub at: u64,
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The tokens.
    pub usage: Usage,
    /// Its cost in US dollars when it was known, at the prices of that day.
    #[serde(default)]
    pub cost: Option<f64>,
    /// A request of a subagent this conversation started (its own log has it too).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subagent: bool,
    /// A request that wrote the summary of a compaction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compaction: bool,
}

impl UsageRecord {
    /// The record of a request that ended now.
    pub fn now(provider: &str, model: &str, usage: Usage, cost: Option<f64>) -> Self {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            at,
            provider: provider.to_owned(),
            model: model.to_owned(),
            usage,
            cost,
            subagent: false,
            compaction: false,
        }
    }
}

/// Why the usage log could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UsageLogError {
    /// The file or its directory.
    #[error("usage log {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A conversation's usage, read from its log.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct UsageSummary {
    /// The records, oldest first.
    pub records: Vec<UsageRecord>,
    /// Lines that did not read as a record (a line cut by a crash, or text someone else
    /// wrote): skipped.
    pub skipped: usize,
}

impl UsageSummary {
    /// Every record added up.
    pub fn totals(&self) -> UsageTotals {
        let mut totals = UsageTotals::default();
        for record in &self.records {
            totals.add(&record.usage, record.cost);
        }
        totals
    }

    /// The totals per provider and model, in the order each first appears.
    pub fn by_model(&self) -> Vec<((String, String), UsageTotals)> {
        let mut out: Vec<((String, String), UsageTotals)> = Vec::new();
        for record in &self.records {
            let key = (record.provider.clone(), record.model.clone());
            if let Some((_, totals)) = out.iter_mut().find(|(k, _)| *k == key) {
                totals.add(&record.usage, record.cost);
            } else {
                let mut totals = UsageTotals::default();
                totals.add(&record.usage, record.cost);
                out.push((key, totals));
            }
        }
        out
    }
}

/// A conversation's usage log: one JSON line per request in `usage.jsonl` of its store
/// directory, appended when each response ends.
///
/// A line is appended with one write and not synced: a power cut may lose the last lines of
/// the log (the transcript's own durability is not touched).
///
/// ```
/// use flemma_runtime::usage::{UsageLog, UsageRecord};
/// let dir = std::env::temp_dir().join(format!("flemma-doc-usage-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// let log = UsageLog::in_store(&dir);
/// let mut usage = flemma_providers::Usage::default();
/// usage.input = 1_000;
/// usage.output = 50;
/// log.append(&UsageRecord::now("anthropic", "claude-haiku-4-5", usage, Some(0.00125)))?;
/// log.append(&UsageRecord::now("anthropic", "claude-haiku-4-5", usage, Some(0.00125)))?;
/// let totals = log.read()?.totals();
/// assert_eq!((totals.requests, totals.usage.input), (2, 2_000));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageLog {
    path: PathBuf,
}

impl UsageLog {
    /// The log of the store at `store_dir`.
    pub fn in_store(store_dir: &Path) -> Self {
        Self {
            path: store_dir.join(USAGE_LOG),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` (creating the store directory and the file when needed).
    ///
    /// # Errors
    ///
    /// [`UsageLogError::Io`] when the directory or the file cannot be written.
    pub fn append(&self, record: &UsageRecord) -> Result<(), UsageLogError> {
        let io = |source| UsageLogError::Io {
            path: self.path.clone(),
            source,
        };
        let mut line = serde_json::to_vec(record).map_err(|e| io(e.into()))?;
        line.push(b'\n');
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io)?;
        // One write: appends of other runs land before or after it, not inside.
        file.write_all(&line).map_err(io)
    }

    /// Every record; a log that does not exist is empty.
    ///
    /// # Errors
    ///
    /// [`UsageLogError::Io`] when the file exists and cannot be read.
    pub fn read(&self) -> Result<UsageSummary, UsageLogError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => {
                return Err(UsageLogError::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let mut summary = UsageSummary::default();
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<UsageRecord>(line) {
                Ok(record) => summary.records.push(record),
                Err(_) => summary.skipped += 1,
            }
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(input: u64, output: u64) -> Usage {
        let mut usage = Usage::default();
        usage.input = input;
        usage.output = output;
        usage
    }

    fn limits(max_tokens: Option<u64>, max_cost: Option<f64>) -> flemma_config::BudgetLimits {
        let mut config = flemma_config::Config::new();
        if let Some(tokens) = max_tokens {
            config
                .set(flemma_config::Layer::Setup, "budget.run.max_tokens", tokens)
                .expect("set");
        }
        if let Some(cost) = max_cost {
            config
                .set(flemma_config::Layer::Setup, "budget.run.max_cost", cost)
                .expect("set");
        }
        config.options().expect("options").budget.run
    }

    fn spent(input: u64, output: u64, cost: Option<f64>) -> UsageTotals {
        let mut totals = UsageTotals::default();
        totals.add(&tokens(input, output), cost);
        totals
    }

    const TABLE: &str = r#"
taken = "2026-12-06"
[[model]]
provider = "anthropic"
ids = ["m"]
input = 2.0
output = 10.0
cache_read = 0.5
"#;

    fn check(
        limits: &flemma_config::BudgetLimits,
        spent: &UsageTotals,
        last_input: u64,
        model: &str,
    ) -> Option<BudgetReached> {
        let models = ModelTable::parse(TABLE).expect("table");
        budget_check(
            limits,
            BudgetScope::Run,
            spent,
            last_input,
            &models,
            "anthropic",
            model,
        )
    }

    #[test]
    fn a_token_budget_stops_the_request_that_would_cross_it() {
        let budget = limits(Some(10_000), None);
        assert_eq!(check(&budget, &UsageTotals::default(), 0, "m"), None);
        // 6,000 spent; the next request reads at least the last one's 3,000: fits.
        assert_eq!(check(&budget, &spent(5_000, 1_000, None), 3_000, "m"), None);
        // At least 4,001 more: 10,001 would cross 10,000.
        let reached = check(&budget, &spent(5_000, 1_000, None), 4_001, "m").expect("reached");
        assert_eq!(
            reached.limit,
            BudgetLimit::Tokens {
                limit: 10_000,
                spent: 6_000,
                next_at_least: 4_001
            }
        );
        assert_eq!(
            reached.to_string(),
            "run budget max_tokens 10000 reached: 6000 tokens spent, the next request uses at least 4001"
        );
        // A spent budget stops even the first request of a run.
        assert!(check(&budget, &spent(9_000, 1_000, None), 0, "m").is_some());
    }

    #[test]
    fn a_cost_budget_counts_the_next_input_at_the_cheapest_price() {
        let budget = limits(None, Some(1.0));
        // $0.90 spent; 100k input at the cache price ($0.50/M) is $0.05 more: fits.
        assert_eq!(check(&budget, &spent(1, 1, Some(0.9)), 100_000, "m"), None);
        // 300k: $0.15 more crosses $1.
        let reached = check(&budget, &spent(1, 1, Some(0.9)), 300_000, "m").expect("reached");
        assert!(matches!(
            reached.limit,
            BudgetLimit::Cost { next_at_least, .. } if (next_at_least - 0.15).abs() < 1e-12
        ));
        assert!(check(&budget, &spent(1, 1, Some(1.0)), 0, "m").is_some());
    }

    #[test]
    fn a_cost_budget_refuses_a_model_without_a_price() {
        let budget = limits(None, Some(5.0));
        let reached = check(&budget, &UsageTotals::default(), 0, "unknown").expect("refused");
        assert!(matches!(reached.limit, BudgetLimit::Unpriced { .. }));
        assert!(reached.to_string().contains("has no price"), "{reached}");
        // Without a cost budget, the same model goes.
        assert_eq!(
            check(
                &limits(Some(10), None),
                &UsageTotals::default(),
                0,
                "unknown"
            ),
            None
        );
    }

    proptest::proptest! {
        /// However the requests grow, checking before each one keeps what a run spends within
        /// its budget plus the one response it could not foresee: the request that crossed it
        /// was allowed only while the spent tokens and its known input fitted.
        #[test]
        fn a_budget_is_exceeded_by_one_response_at_most(
            limit in 1u64..200_000,
            steps in proptest::collection::vec((0u64..20_000, 0u64..5_000), 1..40),
        ) {
            let budget = limits(Some(limit), None);
            let mut totals = UsageTotals::default();
            let (mut input, mut last_input) = (0u64, 0u64);
            let mut last_used = 0u64;
            for (growth, output) in steps {
                if check(&budget, &totals, last_input, "m").is_some() {
                    break;
                }
                input += growth + 1;
                let used = tokens(input, output);
                totals.add(&used, None);
                last_input = input;
                last_used = used.total();
            }
            proptest::prop_assert!(totals.usage.total() <= limit + last_used);
            // Every request sent before the last fitted whole.
            proptest::prop_assert!(totals.usage.total() - last_used <= limit);
        }
    }

    #[test]
    fn totals_keep_unpriced_requests_apart() {
        let mut totals = UsageTotals::default();
        totals.add(&tokens(10, 1), Some(0.5));
        assert_eq!(totals.known_cost(), Some(0.5));
        totals.add(&tokens(5, 1), None);
        assert_eq!(totals.known_cost(), None);
        assert_eq!((totals.requests, totals.unpriced), (2, 1));
        assert_eq!(totals.usage.input, 15);
        assert!((totals.cost - 0.5).abs() < f64::EPSILON);
    }

    #[test]
    fn a_torn_or_foreign_line_is_skipped() {
        let dir = tempfile::Builder::new()
            .prefix("flemma-usage-log-")
            .tempdir()
            .expect("scratch");
        let log = UsageLog::in_store(&dir.path().join("store"));
        assert_eq!(log.read().expect("empty").records.len(), 0);
        log.append(&UsageRecord::now("openai", "gpt-5.4", tokens(3, 4), None))
            .expect("append");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .expect("open");
        file.write_all(b"not json\n{\"at\": 1, \"provider\": \"x\"")
            .expect("write");
        let summary = log.read().expect("read");
        assert_eq!((summary.records.len(), summary.skipped), (1, 2));
        assert_eq!(
            summary.by_model()[0].0,
            ("openai".to_owned(), "gpt-5.4".to_owned())
        );
    }
}
