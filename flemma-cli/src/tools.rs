//! `flemma tools`, `flemma cycle`, `flemma approve`, `flemma reject`, `flemma approve-all`: the
//! tool system on a transcript file.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use flemma::tools::{CycleReport, Executor, FileConversation, ToolRegistry};
use serde_json::json;

use crate::input::Input;
use crate::options::{self, Settings};
use crate::{Failure, failed};

/// The tools the command offers: the built-ins implemented so far.
pub(crate) fn registry() -> Result<ToolRegistry, Failure> {
    let registry = ToolRegistry::new();
    flemma::tools::register_builtins(&registry).map_err(|e| failed(e.into()))?;
    Ok(registry)
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    // Time for timeouts, I/O for the pseudo-terminals of `bash`.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(anyhow::Error::new(e).context("cannot start the runtime")))
}

/// `flemma tools [FILE] [--json]`: the conversation's tool set as the model sees it, sorted
/// by name, harness parameters injected.
pub(crate) fn tools(
    out: &mut impl Write,
    file: Option<&Path>,
    json: bool,
    settings: &Settings,
) -> Result<u8, Failure> {
    let mut config = settings.load()?;
    if let Some(file) = file {
        let input = Input::read(file)?;
        options::apply_frontmatter(&mut config, &flemma::ast::parse(&input.text))
            .map_err(|e| options::frontmatter_failure(&input.name, &e))?;
    }
    let registry = registry()?;
    let options = config
        .options_with_tools(&registry.names())
        .map_err(|e| failed(e.into()))?;
    let specs = registry.specs_for_prompt(&options);
    if json {
        let list: Vec<_> = specs
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "description": s.description,
                    "input_schema": s.input_schema,
                    "strict": s.strict,
                })
            })
            .collect();
        crate::render::json(out, &list)?;
    } else {
        for spec in &specs {
            let summary = spec.description.lines().next().unwrap_or_default();
            writeln!(out, "{}  {summary}", spec.name)?;
        }
    }
    Ok(0)
}

/// An executor over FILE with the CLI's options.
fn executor(file: &Path, settings: &Settings) -> Result<Executor, Failure> {
    let config = settings.load()?;
    let conversation = Arc::new(FileConversation::new(file));
    // Commands run sandboxed when `sandbox.enabled` is on and a built-in backend
    // (bubblewrap) can run here; the approval chain sees the same answer.
    Ok(Executor::builder(conversation, registry()?)
        .config(config)
        .sandbox_backends(flemma::tools::sandbox::SandboxBackends::with_builtins())
        .build())
}

/// Maps an executor error to a failure that names the file.
fn executor_failure(file: &Path, error: flemma::tools::ExecutorError) -> Failure {
    use flemma::tools::ExecutorError;
    match error {
        ExecutorError::Frontmatter(e) => {
            options::frontmatter_failure(&file.display().to_string(), &e)
        }
        ExecutorError::Conversation(e) => Failure::usage(anyhow::Error::new(e)),
        other => failed(anyhow::Error::new(other).context(file.display().to_string())),
    }
}

/// `flemma cycle FILE [--json]`: Phase 1 then Phase 2 once, no provider call.
pub(crate) fn cycle(
    out: &mut impl Write,
    file: &Path,
    json: bool,
    settings: &Settings,
) -> Result<u8, Failure> {
    let executor = executor(file, settings)?;
    let report = runtime()?
        .block_on(executor.cycle())
        .map_err(|e| executor_failure(file, e))?;
    print_report(out, &report, json)?;
    Ok(0)
}

fn print_report(out: &mut impl Write, report: &CycleReport, json: bool) -> Result<(), Failure> {
    if json {
        let value = json!({
            "placed": report.placed.iter().map(|p| json!({
                "id": p.id, "tool": p.tool, "status": p.status.as_str(),
            })).collect::<Vec<_>>(),
            "completed": report.completed.iter().map(|c| json!({
                "id": c.id, "tool": c.tool, "success": c.success,
            })).collect::<Vec<_>>(),
            "next": report.next,
        });
        crate::render::json(out, &value)?;
        return Ok(());
    }
    for placed in &report.placed {
        writeln!(
            out,
            "placed {} {} ({})",
            placed.id, placed.tool, placed.status
        )?;
    }
    for done in &report.completed {
        let outcome = if done.success { "ok" } else { "error" };
        writeln!(out, "completed {} {} ({outcome})", done.id, done.tool)?;
    }
    let next = serde_json::to_value(report.next)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    writeln!(out, "next: {next}")?;
    Ok(())
}

/// What `approve`, `reject` and `approve-all` do.
#[derive(Debug)]
pub(crate) enum Action<'a> {
    Approve(&'a str),
    Reject(&'a str, Option<&'a str>),
    ApproveAll,
}

/// `flemma approve FILE ID`, `flemma reject FILE ID [--message TEXT]`, `flemma approve-all
/// FILE`: rewrite status suffixes (spec §7.1).
pub(crate) fn act(file: &Path, action: &Action<'_>, settings: &Settings) -> Result<u8, Failure> {
    let executor = executor(file, settings)?;
    let result = runtime()?.block_on(async {
        match action {
            Action::Approve(id) => executor.approve(id).await,
            Action::Reject(id, message) => executor.reject(id, *message).await,
            Action::ApproveAll => executor.approve_all_pending().await,
        }
    });
    result.map_err(|e| executor_failure(file, e))?;
    Ok(0)
}
