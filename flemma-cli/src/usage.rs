//! Token counts and costs as the commands show them (`12.4k in (9.8k cached), 310 out,
//! $0.012`), and `flemma usage FILE`.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use flemma::providers::Usage;
use flemma::runtime::usage::{UsageLog, UsageTotals};
use serde_json::json;

use crate::failure::{Failure, failed};
use crate::options::Settings;

/// A count of tokens: `310`, `12.4k`, `1.2M`.
pub(crate) fn tokens(n: u64) -> String {
    // Shown to one decimal: the conversion's rounding is invisible there.
    #[allow(clippy::cast_precision_loss, reason = "shown to one decimal")]
    let x = n as f64;
    if n < 1_000 {
        n.to_string()
    } else if n < 999_950 {
        trim(format!("{:.1}", x / 1_000.0)) + "k"
    } else {
        trim(format!("{:.1}", x / 1_000_000.0)) + "M"
    }
}

/// `12.0` → `12`.
fn trim(text: String) -> String {
    match text.strip_suffix(".0") {
        Some(whole) => whole.to_owned(),
        None => text,
    }
}

/// US dollars: `$1.23` from a dollar up, `$0.012` from a cent, `$0.0004` below.
pub(crate) fn dollars(cost: f64) -> String {
    if cost == 0.0 {
        "$0".to_owned()
    } else if cost >= 1.0 {
        format!("${cost:.2}")
    } else if cost >= 0.01 {
        format!("${cost:.3}")
    } else if cost >= 0.0001 {
        format!("${cost:.4}")
    } else {
        "<$0.0001".to_owned()
    }
}

/// `12.4k in (9.8k cached), 310 out (200 reasoning)`: the cache and reasoning parts only when
/// there are some.
pub(crate) fn counts(usage: &Usage) -> String {
    let mut text = format!("{} in", tokens(usage.input));
    let written = usage.cache_write.saturating_add(usage.cache_write_1h);
    match (usage.cache_read, written) {
        (0, 0) => {}
        (read, 0) => {
            let _ = write!(text, " ({} cached)", tokens(read));
        }
        (0, written) => {
            let _ = write!(text, " ({} to cache)", tokens(written));
        }
        (read, written) => {
            let _ = write!(
                text,
                " ({} cached, {} to cache)",
                tokens(read),
                tokens(written)
            );
        }
    }
    let _ = write!(text, ", {} out", tokens(usage.output));
    if usage.reasoning > 0 {
        let _ = write!(text, " ({} reasoning)", tokens(usage.reasoning));
    }
    text
}

/// One request: `12.4k in (9.8k cached), 310 out, $0.012`, no price when it is not known.
pub(crate) fn request(usage: &Usage, cost: Option<f64>) -> String {
    match cost {
        Some(cost) => format!("{}, {}", counts(usage), dollars(cost)),
        None => counts(usage),
    }
}

/// Several requests: `3 requests, 40.1k in, 1.2k out, $0.051`; `+ N unpriced` when some had
/// no known cost.
pub(crate) fn totals(totals: &UsageTotals) -> String {
    let requests = match totals.requests {
        1 => "1 request".to_owned(),
        n => format!("{n} requests"),
    };
    let mut text = format!("{requests}, {}", counts(&totals.usage));
    if totals.unpriced < totals.requests {
        let _ = write!(text, ", {}", dollars(totals.cost));
        if totals.unpriced > 0 {
            let _ = write!(text, " (+ {} unpriced)", totals.unpriced);
        }
    }
    text
}

fn totals_json(totals: &UsageTotals) -> serde_json::Value {
    json!({
        "requests": totals.requests,
        "usage": totals.usage,
        "cost": totals.known_cost(),
        "priced_cost": totals.cost,
        "unpriced_requests": totals.unpriced,
    })
}

/// `flemma usage FILE [--json]`: every request of the conversation's runs, from the usage log
/// in its store, in total and per model.
pub(crate) fn usage(
    out: &mut impl Write,
    file: &Path,
    json: bool,
    settings: &Settings,
) -> Result<u8, Failure> {
    let executor = crate::tools::executor(file, settings)?;
    let transcript = executor.transcript();
    let store = crate::runtime::runtime()?.block_on(async {
        let evaluated = transcript.evaluated().await?;
        Ok::<_, flemma::runtime::transcript::TranscriptError>(
            transcript.store_directory(evaluated.options()),
        )
    });
    let store =
        store.map_err(|e| failed(anyhow::Error::new(e).context(file.display().to_string())))?;
    let summary = match &store {
        Some(dir) => UsageLog::in_store(dir)
            .read()
            .map_err(|e| failed(anyhow::Error::new(e)))?,
        None => flemma::runtime::usage::UsageSummary::default(),
    };
    let all = summary.totals();
    let by_model = summary.by_model();
    if json {
        let models: Vec<_> = by_model
            .iter()
            .map(|((provider, model), totals)| {
                let mut entry = totals_json(totals);
                entry["provider"] = json!(provider);
                entry["model"] = json!(model);
                entry
            })
            .collect();
        let mut report = totals_json(&all);
        report["models"] = json!(models);
        report["skipped_lines"] = json!(summary.skipped);
        report["log"] = json!(store.map(|d| UsageLog::in_store(&d).path().display().to_string()));
        crate::render::json(out, &report)?;
        return Ok(0);
    }
    let name = crate::visible::line(&file.display().to_string()).into_owned();
    if all.requests == 0 {
        writeln!(out, "{name}: no usage recorded")?;
        return Ok(0);
    }
    writeln!(out, "{name}: {}", totals(&all))?;
    if by_model.len() > 1 || all.unpriced > 0 {
        for ((provider, model), totals) in &by_model {
            // Names come from the options a conversation may set: shown, never obeyed.
            let model = crate::visible::line(model);
            let provider = crate::visible::line(provider);
            let priced = if totals.unpriced == totals.requests {
                ", no price".to_owned()
            } else {
                String::new()
            };
            writeln!(
                out,
                "  {model} ({provider}): {}{priced}",
                self::totals(totals)
            )?;
        }
    }
    if summary.skipped > 0 {
        writeln!(
            out,
            "  ({} lines of the log did not read and were skipped)",
            summary.skipped
        )?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_people_write_them() {
        assert_eq!(tokens(310), "310");
        assert_eq!(tokens(12_400), "12.4k");
        assert_eq!(tokens(12_000), "12k");
        assert_eq!(tokens(999_949), "999.9k");
        assert_eq!(tokens(999_950), "1M");
        assert_eq!(tokens(1_250_000), "1.2M");
        assert_eq!(dollars(0.012), "$0.012");
        assert_eq!(dollars(1.234), "$1.23");
        assert_eq!(dollars(0.00042), "$0.0004");
        assert_eq!(dollars(0.00001), "<$0.0001");
        assert_eq!(dollars(0.0), "$0");
        let mut usage = Usage::default();
        usage.input = 12_400;
        usage.cache_read = 9_800;
        usage.output = 310;
        assert_eq!(
            request(&usage, Some(0.012)),
            "12.4k in (9.8k cached), 310 out, $0.012"
        );
        assert_eq!(request(&usage, None), "12.4k in (9.8k cached), 310 out");
    }
}
