//! `flemma compact FILE`: the older part of the conversation summarised into a
//! `**Compaction:**` block now, whatever its size.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flemma::config::Layer;
use flemma::runtime::compaction::CompactOutcome;
use flemma::runtime::{FileConversation, SessionEvent};
use serde_json::json;

use crate::failure::{Failure, failed};
use crate::options::Settings;
use crate::setup::RunProvider;

/// The arguments of `flemma compact`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompactArgs {
    /// The `.chat` file.
    file: PathBuf,
    /// The provider (as `flemma run`).
    #[arg(long, value_enum, default_value = "anthropic")]
    provider: RunProvider,
    /// The model (default: the `model` option, else a per-provider default).
    #[arg(long)]
    model: Option<String>,
    /// The script `--provider scripted` replays (as `flemma run`): its first turn is the
    /// summary.
    #[arg(long, value_name = "PATH")]
    script: Option<PathBuf>,
    /// More instructions for the summary (what to keep).
    #[arg(long, value_name = "TEXT")]
    instructions: Option<String>,
    /// Print `{"outcome", "messages", "tokens", "summary_tokens", "line", "usage"}`;
    /// `outcome` is `compacted`, `nothing_to_compact` or `cancelled` (with `hook` and
    /// `reason`).
    #[arg(long)]
    json: bool,
}

/// The exit code of a compaction a `PreCompact` hook cancelled (as a prompt a hook blocked).
const CANCELLED: u8 = 6;

/// `flemma compact FILE`.
pub(crate) fn compact(
    out: &mut impl Write,
    args: &CompactArgs,
    settings: &Settings,
) -> Result<u8, Failure> {
    let mut config = settings.load()?;
    if let Some(model) = &args.model {
        config
            .set(Layer::Runtime, "model", model.as_str())
            .map_err(|e| Failure::usage(e.into()))?;
    }
    crate::input::Input::check(&args.file)?;
    let provider = crate::setup::make_provider(
        args.provider,
        args.script.as_deref(),
        args.model.as_deref(),
        &config,
    )?;
    let conversation = Arc::new(FileConversation::new(&args.file).with_inline_io());
    let registry = crate::setup::registry(&config)?;
    let models = crate::setup::models(&config)?;
    let executor = crate::setup::executor(conversation, registry, config);
    let session = crate::setup::session_of(executor, provider, models, None, None)?;
    let mut events = session.subscribe();
    let runtime = crate::runtime::runtime()?;
    let outcome = runtime.block_on(session.compact(args.instructions.as_deref()));
    // What the summary request used, and the hooks' warnings, on stderr.
    let mut usage = None;
    let mut stderr = std::io::stderr().lock();
    while let Some(event) = events.try_recv() {
        match event {
            SessionEvent::Usage(used) => {
                let _ = writeln!(
                    stderr,
                    "summary request: {}",
                    crate::usage::request(&used.usage, used.cost)
                );
                usage = Some(used);
            }
            SessionEvent::Warning(warning) => {
                let line = crate::notices::warning_line(&warning);
                let _ = writeln!(stderr, "{}", crate::visible::text(&line));
            }
            _ => {}
        }
    }
    drop(session);
    drop(runtime);
    let outcome = outcome.map_err(|e| failed(anyhow::Error::new(e).context(shown(&args.file))))?;
    let code = match &outcome {
        CompactOutcome::Cancelled { .. } => CANCELLED,
        _ => 0,
    };
    let written = if args.json {
        let mut value = match &outcome {
            CompactOutcome::Compacted(c) => json!({
                "outcome": "compacted",
                "messages": c.messages,
                "tokens": c.tokens,
                "summary_tokens": c.summary_tokens,
                "line": c.line,
            }),
            CompactOutcome::Cancelled { hook, reason } => {
                json!({"outcome": "cancelled", "hook": hook, "reason": reason})
            }
            _ => json!({"outcome": "nothing_to_compact"}),
        };
        value["usage"] = serde_json::to_value(&usage).unwrap_or_default();
        writeln!(out, "{value}")
    } else {
        writeln!(out, "{}", line(&args.file, &outcome))
    };
    written.map_err(|e| failed(e.into()))?;
    Ok(code)
}

fn shown(file: &Path) -> String {
    crate::visible::text(&file.display().to_string()).into_owned()
}

/// `FILE: compacted 48 messages (182.3k tokens) into a 2.3k-token summary at line 412`.
fn line(file: &Path, outcome: &CompactOutcome) -> String {
    let file = shown(file);
    match outcome {
        CompactOutcome::Compacted(c) => format!(
            "{file}: compacted {} messages ({} tokens) into a {}-token summary at line {}",
            c.messages,
            crate::usage::tokens(c.tokens),
            crate::usage::tokens(c.summary_tokens),
            c.line
        ),
        CompactOutcome::Cancelled { hook, reason } => format!(
            "{file}: not compacted: hook '{}' cancelled it: {}",
            crate::visible::text(hook),
            crate::visible::text(reason)
        ),
        _ => format!(
            "{file}: nothing to compact (too few messages above the turns kept, or a call in progress)"
        ),
    }
}
