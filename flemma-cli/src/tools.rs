//! `flemma tools`, `flemma cycle`, `flemma approve`, `flemma reject`, `flemma approve-all`: the
//! tool system on a transcript file.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use flemma::ast::writer::JobPlacement;
use flemma::runtime::jobs::Delivered;
use flemma::runtime::{CycleReport, Executor, FileConversation};
use serde_json::json;

use crate::failure::Failure;
use crate::input::Input;
use crate::notices::{self, Notices};
use crate::options::{self, Settings};
use crate::runtime::runtime;
use crate::setup::{Action, act_on, executor_failure, ready_registry, registry, tool_set_of};

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
    crate::setup::subagents(&registry, file)?;
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
pub(crate) fn executor(file: &Path, settings: &Settings) -> Result<Executor, Failure> {
    // A regular file of UTF-8 text, as every command reads FILE (exit 2 otherwise).
    Input::check(file)?;
    executor_of_read(file, settings)
}

/// [`executor`] of a file the command has read already (with [`Input::read`]).
fn executor_of_read(file: &Path, settings: &Settings) -> Result<Executor, Failure> {
    let config = settings.load()?;
    // One conversation on a current-thread runtime: its file work needs no other thread.
    let conversation = Arc::new(FileConversation::new(file).with_inline_io());
    // Commands run sandboxed when `sandbox.enabled` is on and a built-in backend
    // (bubblewrap) can run here; the approval chain sees the same answer.
    let registry = registry(&config)?;
    // An `agent` call has no session to run its child here: it says so.
    crate::setup::subagents(&registry, Some(file))?;
    Ok(Executor::builder(conversation, registry)
        .config(config)
        .sandbox_backends(flemma::builtins::sandbox_backends())
        .build())
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
        Ok::<_, flemma::runtime::ExecutorError>((report, delivered))
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

/// `flemma approve FILE ID`, `flemma reject FILE ID [--message TEXT]`, `flemma approve-all
/// FILE`: rewrite status suffixes.
pub(crate) fn act(file: &Path, action: &Action<'_>, settings: &Settings) -> Result<u8, Failure> {
    #[cfg(feature = "object-store")]
    if let Some(code) = crate::object::act(file, action, settings)? {
        return Ok(code);
    }
    let executor = executor(file, settings)?;
    act_on(&executor, action, &*runtime()?).map_err(|e| executor_failure(file, e))?;
    Ok(0)
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
