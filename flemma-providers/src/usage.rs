//! The tokens a response used, in one meaning for every provider.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The tokens one response used, as its provider reported them, normalised so that every
/// provider's counts mean the same: `input` is the whole prompt (cached or not), `output` the
/// whole answer (reasoning included).
///
/// Providers count differently: Anthropic's `input_tokens` leaves out the tokens read from or
/// written to the prompt cache, OpenAI's and Vertex's include the cached ones; Vertex counts
/// thoughts apart from the answer, OpenAI inside it. The decoders add them up so that one
/// [`Prices`](crate::Prices) computation fits all.
///
/// Fields a provider does not report are 0. The struct is `#[non_exhaustive]`: build one from
/// [`Usage::default`] and set its fields.
///
/// ```
/// let mut usage = flemma_providers::Usage::default();
/// usage.input = 12_400;
/// usage.cache_read = 9_800;
/// usage.output = 310;
/// assert_eq!(usage.uncached_input(), 2_600);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Usage {
    /// Every input token of the request: uncached, read from the cache and written to it.
    pub input: u64,
    /// Of `input`, the tokens read from the provider's prompt cache.
    pub cache_read: u64,
    /// Of `input`, the tokens written to the prompt cache for a short time (Anthropic's
    /// 5-minute cache).
    pub cache_write: u64,
    /// Of `input`, the tokens written to the prompt cache for an hour (Anthropic's `1h`
    /// retention).
    pub cache_write_1h: u64,
    /// Every output token: the answer, tool calls and reasoning.
    pub output: u64,
    /// Of `output`, the reasoning (thinking) tokens, where the provider says.
    pub reasoning: u64,
}

impl Usage {
    /// The input tokens neither read from nor written to the cache.
    pub fn uncached_input(&self) -> u64 {
        self.input
            .saturating_sub(self.cache_read)
            .saturating_sub(self.cache_write)
            .saturating_sub(self.cache_write_1h)
    }

    /// Every token, in and out.
    pub fn total(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Adds `other`'s counts (saturating).
impl std::ops::AddAssign<&Usage> for Usage {
    fn add_assign(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cache_write_1h = self.cache_write_1h.saturating_add(other.cache_write_1h);
        self.output = self.output.saturating_add(other.output);
        self.reasoning = self.reasoning.saturating_add(other.reasoning);
    }
}

/// A count at `pointer` of `value`, if it is a non-negative integer.
pub(crate) fn count(value: &Value, pointer: &str) -> Option<u64> {
    value.pointer(pointer).and_then(Value::as_u64)
}

/// What a provider reported so far for one response, merged report by report: a later report
/// replaces the counts it carries and keeps the others (Anthropic reports the input at the
/// start and the output at the end; OpenAI's Chat Completions may report twice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Reported {
    /// Anthropic's uncached input, kept apart until the cache counts are known.
    pub(crate) uncached: Option<u64>,
    /// Whole input (OpenAI, Vertex).
    pub(crate) input: Option<u64>,
    pub(crate) cache_read: Option<u64>,
    pub(crate) cache_write: Option<u64>,
    pub(crate) cache_write_1h: Option<u64>,
    /// Every cache write, when the split by retention is not given (Anthropic's
    /// `cache_creation_input_tokens`): the 5-minute write unless a split came with it or
    /// before it.
    pub(crate) cache_write_total: Option<u64>,
    /// Whole output (OpenAI) or the answer without thoughts (Vertex, added to `reasoning`).
    pub(crate) output: Option<u64>,
    pub(crate) reasoning: Option<u64>,
    /// Whether `output` leaves the reasoning out (Vertex's `candidatesTokenCount`).
    pub(crate) output_excludes_reasoning: bool,
}

impl Reported {
    /// Merges `other`: each count it has replaces this one's.
    pub(crate) fn merge(&mut self, other: Reported) {
        fn keep(into: &mut Option<u64>, from: Option<u64>) {
            if from.is_some() {
                *into = from;
            }
        }
        keep(&mut self.uncached, other.uncached);
        keep(&mut self.input, other.input);
        keep(&mut self.cache_read, other.cache_read);
        keep(&mut self.cache_write, other.cache_write);
        keep(&mut self.cache_write_1h, other.cache_write_1h);
        keep(&mut self.cache_write_total, other.cache_write_total);
        keep(&mut self.output, other.output);
        keep(&mut self.reasoning, other.reasoning);
        self.output_excludes_reasoning |= other.output_excludes_reasoning;
    }

    /// Whether any count was reported.
    pub(crate) fn any(&self) -> bool {
        [
            self.uncached,
            self.input,
            self.cache_read,
            self.cache_write,
            self.cache_write_1h,
            self.cache_write_total,
            self.output,
            self.reasoning,
        ]
        .iter()
        .any(Option::is_some)
    }

    /// The counts, normalised.
    pub(crate) fn usage(&self) -> Usage {
        let cache_read = self.cache_read.unwrap_or(0);
        let (cache_write, cache_write_1h) = match (self.cache_write, self.cache_write_1h) {
            (None, None) => (self.cache_write_total.unwrap_or(0), 0),
            (write, write_1h) => (write.unwrap_or(0), write_1h.unwrap_or(0)),
        };
        let input = match (self.input, self.uncached) {
            (Some(input), _) => input,
            (None, Some(uncached)) => uncached
                .saturating_add(cache_read)
                .saturating_add(cache_write)
                .saturating_add(cache_write_1h),
            (None, None) => 0,
        };
        let reasoning = self.reasoning.unwrap_or(0);
        let output = self.output.unwrap_or(0);
        let output = if self.output_excludes_reasoning {
            output.saturating_add(reasoning)
        } else {
            output
        };
        Usage {
            input,
            cache_read,
            cache_write,
            cache_write_1h,
            output,
            reasoning,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_input_adds_the_cache_counts() {
        let reported = Reported {
            uncached: Some(10),
            cache_read: Some(100),
            cache_write: Some(20),
            cache_write_1h: Some(5),
            output: Some(7),
            ..Reported::default()
        };
        let usage = reported.usage();
        assert_eq!(usage.input, 135);
        assert_eq!(usage.uncached_input(), 10);
        assert_eq!(usage.output, 7);
    }

    #[test]
    fn a_total_of_cache_writes_does_not_count_a_split_twice() {
        let mut reported = Reported {
            uncached: Some(200),
            cache_read: Some(9_800),
            cache_write: Some(1_000),
            cache_write_1h: Some(500),
            cache_write_total: Some(1_500),
            ..Reported::default()
        };
        // Anthropic's `message_delta` repeats the total without the split.
        reported.merge(Reported {
            uncached: Some(200),
            cache_read: Some(9_800),
            cache_write_total: Some(1_500),
            output: Some(310),
            ..Reported::default()
        });
        let usage = reported.usage();
        assert_eq!(
            (
                usage.input,
                usage.cache_write,
                usage.cache_write_1h,
                usage.output
            ),
            (11_500, 1_000, 500, 310)
        );
        let total_only = Reported {
            uncached: Some(1),
            cache_write_total: Some(40),
            ..Reported::default()
        };
        assert_eq!(
            (total_only.usage().cache_write, total_only.usage().input),
            (40, 41)
        );
    }

    #[test]
    fn a_later_report_replaces_only_what_it_carries() {
        let mut reported = Reported {
            uncached: Some(10),
            output: Some(1),
            ..Reported::default()
        };
        reported.merge(Reported {
            output: Some(42),
            ..Reported::default()
        });
        assert_eq!(reported.usage().input, 10);
        assert_eq!(reported.usage().output, 42);
    }

    #[test]
    fn vertex_thoughts_are_output() {
        let reported = Reported {
            input: Some(50),
            output: Some(10),
            reasoning: Some(30),
            output_excludes_reasoning: true,
            ..Reported::default()
        };
        assert_eq!(reported.usage().output, 40);
        assert_eq!(reported.usage().reasoning, 30);
    }

    #[test]
    fn counts_saturate() {
        let mut usage = Usage {
            input: u64::MAX,
            ..Usage::default()
        };
        usage += &Usage {
            input: 1,
            output: 1,
            ..Usage::default()
        };
        assert_eq!(usage.input, u64::MAX);
        assert_eq!(usage.total(), u64::MAX);
        let odd = Usage {
            input: 1,
            cache_read: 5,
            ..Usage::default()
        };
        assert_eq!(odd.uncached_input(), 0);
    }
}
