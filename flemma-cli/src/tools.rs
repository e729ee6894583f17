//! `flemma tools`, `flemma cycle`, `flemma approve`, `flemma reject`, `flemma approve-all`: the
//! tool system on a transcript file.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use flemma::ast::writer::JobPlacement;
use flemma::config::Config;
use flemma::tools::jobs::Delivered;
use flemma::tools::{CycleReport, Executor, FileConversation, ToolRegistry};
use serde_json::json;

use crate::failure::{Failure, failed};
use crate::input::Input;
use crate::notices::{self, Notices};
use crate::options::{self, Settings};

/// The tools the command offers: the built-ins, and with the `mcp` feature the tools of the
/// MCP servers of `[mcp.servers]` in the options files ([`crate::mcp`]), started now (in the
/// command's runtime) and stopped when the command ends ([`finish`]).
pub(crate) fn registry(config: &Config) -> Result<ToolRegistry, Failure> {
    let registry = ToolRegistry::new();
    flemma::tools::register_builtins(&registry).map_err(|e| failed(e.into()))?;
    #[cfg(feature = "mcp")]
    {
        let runtime = runtime()?;
        let _entered = runtime.enter();
        crate::mcp::add_servers(&registry, config)?;
    }
    // Command hooks come from the options files alone (a frontmatter cannot add them).
    let project = std::env::current_dir()
        .ok()
        .map(|dir| flemma::config::project_root(&dir));
    let hooks = flemma::tools::hooks::from_config(config, project.as_deref())
        .map_err(|e| Failure::usage(e.into()))?;
    for hook in hooks.hooks {
        registry.register_hook(hook).map_err(|e| failed(e.into()))?;
    }
    Ok(registry)
}

/// [`registry`], once its sources (the MCP servers) have registered their tools or failed:
/// for commands that list or check names rather than run a cycle (which waits by itself).
pub(crate) fn ready_registry(config: &Config) -> Result<ToolRegistry, Failure> {
    let registry = registry(config)?;
    runtime()?.block_on(registry.ready());
    Ok(registry)
}

/// The command's one runtime, made on first use: the MCP servers' connections live on it,
/// so every `block_on` of the command uses it.
static RUNTIME: Mutex<Option<Arc<tokio::runtime::Runtime>>> = Mutex::new(None);

/// The command's runtime (current-thread; time for timeouts, I/O for the pseudo-terminals of
/// `bash` and the MCP servers' pipes).
pub(crate) fn runtime() -> Result<Arc<tokio::runtime::Runtime>, Failure> {
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(runtime) = slot.as_ref() {
        return Ok(Arc::clone(runtime));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::usage(anyhow::Error::new(e).context("cannot start the runtime")))?;
    let runtime = Arc::new(runtime);
    *slot = Some(Arc::clone(&runtime));
    Ok(runtime)
}

/// Ends the command's runtime: the MCP servers are stopped (a stdio server's process ended),
/// then the runtime is left behind rather than waited for, so that a tool stuck in a blocking
/// call (a read that never returns) does not keep the command alive.
pub(crate) fn finish() {
    let Some(runtime) = RUNTIME
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    #[cfg(feature = "mcp")]
    runtime.block_on(crate::mcp::stop_servers());
    if let Ok(runtime) = Arc::try_unwrap(runtime) {
        runtime.shutdown_background();
    }
}

/// FILE's tool set as the model sees it: the options as a transcript of the file evaluates
/// them (its frontmatter applied once).
#[cfg(feature = "mcp")]
pub(crate) fn specs_of(
    file: &Path,
    config: Config,
    registry: &ToolRegistry,
) -> Result<Vec<flemma::schema::ToolSpec>, Failure> {
    Ok(tool_set_of(file, config, registry)?.0)
}

/// FILE's tool set as the model sees it, and the conversation's options.
fn tool_set_of(
    file: &Path,
    config: Config,
    registry: &ToolRegistry,
) -> Result<(Vec<flemma::schema::ToolSpec>, flemma::config::Options), Failure> {
    let input = Input::read(file)?;
    let transcript = options::transcript(&input.text, input.path(), config, registry.clone());
    let evaluated = options::evaluated(&transcript, &input.name)?;
    let options = flemma::config::Options::clone(evaluated.options());
    Ok((registry.specs_for_prompt(&options), options))
}

/// `flemma tools [FILE] [--json]`: the conversation's tool set as the model sees it, sorted
/// by name, harness parameters injected; as text, aligned columns: the name, `auto` when
/// `tools.auto_approve` names the tool (or `tools.require_approval` is off), `sandboxed` when
/// the sandbox resolver approves it while a sandbox runs it, else `ask` (hooks, MCP hints and
/// host resolvers may still decide a call: `flemma approval explain`), and the description's
/// first sentence.
pub(crate) fn tools(
    out: &mut impl Write,
    file: Option<&Path>,
    json: bool,
    settings: &Settings,
) -> Result<u8, Failure> {
    let config = settings.load()?;
    let registry = ready_registry(&config)?;
    let (specs, options) = if let Some(file) = file {
        tool_set_of(file, config, &registry)?
    } else {
        // Without a file, a diagnostic has a place of its own (the options file, `--set`).
        let mut config = config;
        let options = options::evaluate(&mut config, &registry, "options")?;
        (registry.specs_for_prompt(&options), options)
    };
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
        return Ok(0);
    }
    if specs.is_empty() {
        writeln!(out, "no tools")?;
        return Ok(0);
    }
    let auto = flemma::config::GlobList::new(options.tools.auto_approve.iter().map(String::as_str));
    let names: Vec<String> = specs
        .iter()
        .map(|s| crate::visible::line(s.name.as_str()).into_owned())
        .collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max("NAME".len());
    writeln!(out, "{:width$}  APPROVAL   DESCRIPTION", "NAME")?;
    for (spec, name) in specs.iter().zip(&names) {
        let approval = if !options.tools.require_approval || auto.is_match(spec.name.as_str()) {
            "auto"
        } else if options.tools.auto_approve_sandboxed
            && options.sandbox.enabled
            && registry.has_capability(
                spec.name.as_str(),
                flemma::schema::Capability::AutoApprovesIfSandboxed,
            )
        {
            "sandboxed"
        } else {
            "ask"
        };
        writeln!(
            out,
            "{name:width$}  {approval:9}  {}",
            crate::visible::line(first_sentence(&spec.description))
        )?;
    }
    Ok(0)
}

/// The first sentence of a description (its first line, up to the first `. `).
fn first_sentence(description: &str) -> &str {
    let line = description.lines().next().unwrap_or_default();
    match line.find(". ") {
        Some(end) => &line[..=end],
        None => line,
    }
}

/// An executor over FILE with the CLI's options.
fn executor(file: &Path, settings: &Settings) -> Result<Executor, Failure> {
    // A regular file of UTF-8 text, as every command reads FILE (exit 2 otherwise).
    Input::check(file)?;
    executor_of_read(file, settings)
}

/// [`executor`] of a file the command has read already (with [`Input::read`]).
fn executor_of_read(file: &Path, settings: &Settings) -> Result<Executor, Failure> {
    let config = settings.load()?;
    let conversation = Arc::new(FileConversation::new(file));
    // Commands run sandboxed when `sandbox.enabled` is on and a built-in backend
    // (bubblewrap) can run here; the approval chain sees the same answer.
    Ok(Executor::builder(conversation, registry(&config)?)
        .config(config)
        .sandbox_backends(flemma::tools::sandbox::SandboxBackends::with_builtins())
        .build())
}

/// Maps an executor error to a failure that names the file.
pub(crate) fn executor_failure(file: &Path, error: flemma::tools::ExecutorError) -> Failure {
    use flemma::tools::ExecutorError::Transcript;
    use flemma::tools::transcript::TranscriptError;
    match error {
        Transcript(TranscriptError::Frontmatter(e)) => {
            options::frontmatter_failure(&file.display().to_string(), &e)
        }
        Transcript(TranscriptError::Config(flemma::config::ConfigError::Finalize { errors })) => {
            options::options_failure(&file.display().to_string(), &errors)
        }
        Transcript(TranscriptError::Conversation(e)) => Failure::usage(anyhow::Error::new(e)),
        other => failed(anyhow::Error::new(other).context(file.display().to_string())),
    }
}

/// `flemma cycle FILE [--json] [--wait]`: Phase 1 then Phase 2 once, no provider call (the
/// first cycle also runs orphan recovery and re-adoption of background jobs); with `--wait`,
/// then waits for the conversation's background jobs, delivers their Job Results, and runs
/// the cycle once more so the report's `next` is current. The executor's warnings and what
/// recovery found go to stderr ([`notices`]), and with `--json` into the report too.
pub(crate) fn cycle(
    out: &mut impl Write,
    file: &Path,
    json: bool,
    wait: bool,
    settings: &Settings,
) -> Result<u8, Failure> {
    let executor = executor(file, settings)?;
    let work = async {
        let mut report = executor.cycle().await?;
        let mut delivered = Vec::new();
        if wait {
            loop {
                let batch = executor.wait_jobs().await?;
                if batch.is_empty() {
                    break;
                }
                delivered.extend(batch);
                let again = executor.cycle().await?;
                report.placed.extend(again.placed);
                report.completed.extend(again.completed);
                report.next = again.next;
            }
        }
        Ok::<_, flemma::tools::ExecutorError>((report, delivered))
    };
    let (result, notices) = runtime()?.block_on(notices::collect(&executor, work));
    // What the executor warned about is shown even when the cycle then failed.
    notices.print();
    let (report, delivered) = result.map_err(|e| executor_failure(file, e))?;
    print_report(out, &report, &delivered, &notices, json)?;
    Ok(0)
}

fn print_report(
    out: &mut impl Write,
    report: &CycleReport,
    delivered: &[Delivered],
    notices: &Notices,
    json: bool,
) -> Result<(), Failure> {
    if json {
        let value = json!({
            "placed": report.placed.iter().map(|p| json!({
                "id": p.id, "tool": p.tool, "status": p.status.as_str(),
            })).collect::<Vec<_>>(),
            "completed": report.completed.iter().map(|c| json!({
                "id": c.id, "tool": c.tool, "success": c.success,
            })).collect::<Vec<_>>(),
            "delivered": delivered.iter().map(|d| json!({
                "job_id": d.job_id, "tool_id": d.tool_id, "tool": d.tool, "success": d.success,
                "placement": placement(d.placement),
            })).collect::<Vec<_>>(),
            "warnings": notices.warnings(),
            "recovered": notices.recovered(),
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
    for done in delivered {
        let outcome = if done.success { "ok" } else { "error" };
        writeln!(
            out,
            "delivered {} {} {} ({outcome}, {})",
            done.job_id,
            done.tool_id,
            done.tool,
            placement(done.placement)
        )?;
    }
    let next = serde_json::to_value(report.next)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    writeln!(out, "next: {next}")?;
    Ok(())
}

fn placement(placement: JobPlacement) -> &'static str {
    match placement {
        JobPlacement::Replaced => "replaced",
        JobPlacement::Displaced => "displaced",
        JobPlacement::Appended => "appended",
        JobPlacement::Created => "created",
    }
}

/// `flemma jobs FILE [--json]`: the conversation's background jobs (read only: no recovery).
pub(crate) fn jobs(
    out: &mut impl Write,
    file: &Path,
    json: bool,
    settings: &Settings,
) -> Result<u8, Failure> {
    let executor = executor(file, settings)?;
    let jobs = runtime()?
        .block_on(executor.jobs())
        .map_err(|e| executor_failure(file, e))?;
    if json {
        let list: Vec<_> = jobs
            .iter()
            .map(|j| {
                json!({
                    "job_id": j.job_id,
                    "tool_id": j.tool_id,
                    "tool": j.tool,
                    "state": j.state.as_str(),
                    "elapsed_seconds": j.elapsed_seconds.map(|s| (s * 10.0).round() / 10.0),
                })
            })
            .collect();
        crate::render::json(out, &list)?;
    } else if jobs.is_empty() {
        writeln!(out, "no jobs")?;
    } else {
        // Aligned columns; ids and names come from the transcript: shown, never obeyed.
        let rows: Vec<[String; 5]> = jobs
            .iter()
            .map(|job| {
                [
                    crate::visible::line(job.job_id.as_str()).into_owned(),
                    crate::visible::line(job.tool_id.as_str()).into_owned(),
                    crate::visible::line(job.tool.as_str()).into_owned(),
                    job.state.to_string(),
                    job.elapsed_seconds
                        .map(|s| format!("{s:.1}s"))
                        .unwrap_or_default(),
                ]
            })
            .collect();
        let header = ["JOB", "CALL", "TOOL", "STATE", "ELAPSED"];
        let mut widths = header.map(str::len);
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 5]| {
            use std::fmt::Write as _;
            let mut text = String::new();
            for (at, (cell, width)) in cells.iter().zip(widths).enumerate() {
                if at + 1 == cells.len() {
                    text.push_str(cell);
                } else {
                    let _ = write!(text, "{cell:width$}  ");
                }
            }
            text.trim_end().to_owned()
        };
        writeln!(out, "{}", line(header))?;
        for row in &rows {
            writeln!(out, "{}", line(row.each_ref().map(String::as_str)))?;
        }
    }
    Ok(0)
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
    #[cfg(feature = "object-store")]
    if let Some(code) = crate::object::act(file, action, settings)? {
        return Ok(code);
    }
    let executor = executor(file, settings)?;
    act_on(&executor, action, &*runtime()?).map_err(|e| executor_failure(file, e))?;
    Ok(0)
}

/// `action` on `executor`'s conversation, after the recovery of its jobs; the executor's
/// notices printed.
pub(crate) fn act_on(
    executor: &Executor,
    action: &Action<'_>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), flemma::tools::ExecutorError> {
    let work = async {
        // Opening a transcript to write it recovers its jobs first.
        executor.recover().await?;
        match action {
            Action::Approve(id) => executor.approve(id).await,
            Action::Reject(id, message) => executor.reject(id, *message).await,
            Action::ApproveAll => executor.approve_all_pending().await,
        }
    };
    let (result, notices) = runtime.block_on(notices::collect(executor, work));
    notices.print();
    result
}

/// `flemma check`'s warnings about calls in progress: a result block that is still the empty
/// block of a running call, claimed by a live host (its result is not written yet) or by one
/// that died (the next cycle answers it with an error). Nothing when the claims cannot be read.
pub(crate) fn in_progress_diagnostics(
    file: &Path,
    doc: &flemma::ast::Document,
    settings: &Settings,
) -> Vec<flemma::ast::Diagnostic> {
    // `doc` is the file as the command read it: the executor neither reads nor parses it
    // again (twice the time and the memory on a large transcript).
    let Ok(executor) = executor_of_read(file, settings) else {
        return Vec::new();
    };
    let Ok(runtime) = runtime() else {
        return Vec::new();
    };
    let mut found =
        unplaced_diagnostics(doc, &runtime.block_on(executor.unplaced_approvals_in(doc)));
    let Ok(claims) = runtime.block_on(executor.claims_in(doc)) else {
        return found;
    };
    let pid = |pid: Option<i32>| pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
    found.extend(claims.into_iter().filter_map(|claim| {
        let result = flemma::ast::find_tool_result_by_id(doc, claim.id.as_str())?;
        let result = result.node;
        if result.status.is_some() || !result.content.trim().is_empty() {
            return None;
        }
        let message = if claim.live {
            format!(
                "call `{}` is running in another process (pid {}); its result is not written yet",
                claim.id,
                pid(claim.pid)
            )
        } else {
            format!(
                "call `{}` was interrupted: its host (pid {}) ended before it completed; \
                     the next `flemma cycle` or `flemma run` answers it with an error",
                claim.id,
                pid(claim.pid)
            )
        };
        Some(flemma::ast::Diagnostic {
            kind: flemma::ast::DiagnosticKind::ToolResult,
            severity: flemma::ids::Severity::Warning,
            message,
            line: result.span.start_line,
        })
    }));
    found
}

/// The `(approved)` calls no approval backs (this host did not place them, no person approved
/// them through it), `ids`: the next cycle decides them with the approval chain.
fn unplaced_diagnostics(
    doc: &flemma::ast::Document,
    ids: &[flemma::ids::ToolUseId],
) -> Vec<flemma::ast::Diagnostic> {
    ids.iter()
        .filter_map(|id| {
            let result = flemma::ast::find_tool_result_by_id(doc, id.as_str())?.node;
            Some(flemma::ast::Diagnostic {
                kind: flemma::ast::DiagnosticKind::ToolResult,
                severity: flemma::ids::Severity::Warning,
                message: format!(
                    "call `{id}` is (approved) in the file, but not by this host: it did not place the call and no one approved it with `flemma approve`; the next cycle asks the approval chain (run `flemma approval explain`)"
                ),
                line: result.span.start_line,
            })
        })
        .collect()
}
