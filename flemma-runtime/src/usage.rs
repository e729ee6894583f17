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
        let dir = std::env::temp_dir().join(format!("flemma-usage-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let log = UsageLog::in_store(&dir.join("store"));
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
        std::fs::remove_dir_all(&dir).expect("clean");
    }
}
