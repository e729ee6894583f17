//! `bash`: runs a command in a pseudo-terminal and reports its terminal text.
//!
//! The command line is `[tools.bash.shell, "-c", command]`, wrapped by the sandbox, in the
//! call's working directory, with standard input from `/dev/null`, in its own session and
//! process group, and with the host's environment under `tools.env` (without credentials by
//! default, see [`ExecutionContext::environment`]) plus `GIT_PAGER=cat`, `PAGER=cat`,
//! `tools.bash.env`, `FLEMMA_TOOLS_STORE_PATH` and the call's marker (see [`crate::process::reap`]).
//!
//! The output is the terminal text ([`terminal`]) with trailing whitespace trimmed,
//! tail-truncated with overflow to the store; an output too large for memory streams to the
//! overflow file as it comes ([`collect`]). When the command exits, times out or is
//! cancelled, every process it started is stopped: `SIGTERM` to the group and to the marked
//! escapees, a grace period, then `SIGKILL`.

mod collect;
pub(crate) mod run;
mod terminal;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flemma_schema::builtin::inputs::BashInput;
use serde_json::Value;

use crate::messages as msg;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;
use flemma_core::truncate::{Direction, Limits, truncate_tail_of, truncate_with_overflow};
use flemma_core::{Detach, DetachedCommand, DetachedEnding};

use collect::{Collected, Collector};
use run::Ending;
use terminal::TerminalText;

/// The built-in `bash` tool, with the definition of flemma-schema's table.
#[derive(Debug)]
pub struct Bash {
    definition: ToolDefinition,
}

impl Bash {
    /// The tool.
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`flemma_schema::SchemaError`] otherwise.
    pub fn new() -> Result<Self, flemma_schema::SchemaError> {
        Ok(Self {
            definition: ToolDefinition::from_builtin(&flemma_schema::builtin::bash())?,
        })
    }
}

#[async_trait::async_trait]
impl Tool for Bash {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let (command, timeout, seconds) = match prepare(&input, ctx) {
            Ok(prepared) => prepared,
            Err(output) => return output,
        };
        // What the warning of a command that does not start names.
        let (shell, cwd) = (
            command.argv.first().cloned().unwrap_or_default(),
            command.cwd.display().to_string(),
        );
        let command = run::Command {
            argv: command.argv,
            cwd: command.cwd,
            env: command.env,
            marker: marker(ctx),
        };

        // The call runs in its own task, so that a dropped `execute` future (the executor
        // stops awaiting a cancelled call) still stops the processes in order; dropping
        // cancels the task's token.
        let token = ctx.cancellation().child_token();
        let _cancel_on_drop = token.clone().drop_guard();
        let ctx = ctx.clone();
        let task = tokio::spawn(async move {
            let spill_ctx = ctx.clone();
            let collector = Collector::new(Box::new(move || spill_ctx.overflow_writer()));
            match run::run(command, timeout, token, collector).await {
                Ok((ending, collector)) => finish(&ctx, ending, collector, seconds),
                Err(error) => {
                    tracing::warn!(
                        tool_id = %ctx.tool_id(),
                        "bash: cannot start {shell} in {cwd}: {error}"
                    );
                    ToolOutput::error(msg::JOB_START)
                }
            }
        });
        task.await.unwrap_or_else(|error| {
            tracing::warn!(%error, "bash: task failed");
            ToolOutput::error(msg::JOB_START)
        })
    }

    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let command = input.get("command").and_then(Value::as_str)?;
        Some(Preview::detail(format!("$ {command}")).with_label(Preview::label_of(input)))
    }

    fn detach(&self) -> Option<&dyn Detach> {
        Some(self)
    }

    /// The call's own timeout (`input.timeout` or the context's), after which the command
    /// is stopped.
    fn time_limit(&self, input: &Value, ctx: &ExecutionContext) -> Option<Duration> {
        Some(timeout_of(timeout_in(input), ctx).0 + crate::process::reap::GRACE)
    }
}

/// In the background, `bash` runs its command detached from the host (see
/// `flemma_runtime::jobs`): the same command line, environment and result, with the output
/// read from the job's file.
impl Detach for Bash {
    fn command(
        &self,
        input: &Value,
        ctx: &ExecutionContext,
    ) -> Result<DetachedCommand, ToolOutput> {
        let (mut command, timeout, _) = prepare(input, ctx)?;
        command.timeout = Some(timeout);
        Ok(command)
    }

    fn result(
        &self,
        input: &Value,
        ctx: &ExecutionContext,
        output: &std::path::Path,
        ending: DetachedEnding,
    ) -> ToolOutput {
        let (_, seconds) = timeout_of(timeout_in(input), ctx);
        let spill_ctx = ctx.clone();
        let mut collector = Collector::new(Box::new(move || spill_ctx.overflow_writer()));
        if let Err(error) = feed_file(output, &mut collector) {
            tracing::warn!(tool_id = %ctx.tool_id(), %error, "bash: job output unreadable");
        }
        let ending = match ending {
            DetachedEnding::Exited(code) => Ending::Exited(code),
            DetachedEnding::TimedOut => Ending::TimedOut,
            DetachedEnding::Cancelled => Ending::Cancelled,
        };
        finish(ctx, ending, collector, seconds)
    }
}

/// Feeds a job's output file through the terminal filter into `collector`, a chunk at a time.
fn feed_file(path: &std::path::Path, collector: &mut Collector) -> std::io::Result<()> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut filter = TerminalText::new();
    let mut buf = vec![0_u8; 64 * 1024];
    let mut text = Vec::with_capacity(64 * 1024);
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        filter.feed(&buf[..n], &mut text);
        collector.push(&text);
        text.clear();
    }
    filter.finish(&mut text);
    collector.push(&text);
    Ok(())
}

/// The `timeout` of a call that reads as `bash`'s input.
fn timeout_in(input: &Value) -> Option<f64> {
    BashInput::from_call(input)
        .ok()
        .and_then(|input| input.timeout)
}

/// The call's timeout: its `timeout` when positive, else the context's.
fn timeout_of(timeout: Option<f64>, ctx: &ExecutionContext) -> (Duration, f64) {
    match timeout {
        Some(s) if s > 0.0 => match Duration::try_from_secs_f64(s) {
            Ok(d) => (d, s),
            Err(_) => (ctx.timeout(), ctx.timeout().as_secs_f64()),
        },
        _ => (ctx.timeout(), ctx.timeout().as_secs_f64()),
    }
}

/// The command line, working directory and environment of a call, and its timeout.
fn prepare(
    input: &Value,
    ctx: &ExecutionContext,
) -> Result<(DetachedCommand, Duration, f64), ToolOutput> {
    let BashInput {
        command, timeout, ..
    } = BashInput::from_call(input).map_err(|missing| ToolOutput::error(msg::missing(missing)))?;
    if command.trim().is_empty() {
        return Err(ToolOutput::error(msg::NO_COMMAND));
    }
    let (timeout, seconds) = timeout_of(timeout, ctx);
    let options = &ctx.options().tools.bash;
    let store_dir = ctx.store().and_then(|s| s.directory().ok());
    if command.contains(flemma_store::STORE_PATH_VAR)
        && let Some(dir) = &store_dir
        && let Err(error) = std::fs::create_dir_all(dir)
    {
        tracing::warn!(dir = %dir.display(), %error, "store directory not created");
    }
    let argv = vec![options.shell.clone(), "-c".to_owned(), command];
    let argv = ctx
        .sandbox()
        .wrap_command(argv)
        .map_err(|error| ToolOutput::error(msg::sandbox_error(&error.to_string())))?;
    // The host's environment is not inherited: this is the whole of it.
    let mut env = ctx.environment();
    env.extend([
        ("GIT_PAGER".to_owned(), "cat".to_owned()),
        ("PAGER".to_owned(), "cat".to_owned()),
    ]);
    env.extend(options.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    if let Some(dir) = store_dir {
        env.push((
            flemma_store::STORE_PATH_VAR.to_owned(),
            dir.to_string_lossy().into_owned(),
        ));
    }
    Ok((
        DetachedCommand {
            argv,
            cwd: ctx.cwd().to_owned(),
            env,
            timeout: None,
        },
        timeout,
        seconds,
    ))
}

/// A value unique to this call in this process (and very likely across processes).
pub(crate) fn marker(ctx: &ExecutionContext) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}.{}.{n}.{nanos}", ctx.tool_id(), std::process::id())
}

/// The result the model sees.
fn finish(
    ctx: &ExecutionContext,
    ending: Ending,
    collector: Collector,
    seconds: f64,
) -> ToolOutput {
    let text = report(ctx, collector.finish());
    let body = if text.is_empty() {
        msg::NO_OUTPUT
    } else {
        &text
    };
    match ending {
        Ending::Exited(0) => ToolOutput::text(body),
        Ending::Exited(code) => ToolOutput::error(format!("{body}\n\n{}", msg::exit_code(code))),
        Ending::TimedOut if text.is_empty() => ToolOutput::error(msg::bash_timeout(seconds)),
        Ending::TimedOut => ToolOutput::error(format!("{text}\n\n{}", msg::bash_timeout(seconds))),
        Ending::Cancelled if text.is_empty() => ToolOutput::error(msg::ABORTED),
        Ending::Cancelled => ToolOutput::error(msg::ABORTED).with_partial_output(text),
    }
}

/// The output tail-truncated with overflow to the store; empty for no output.
fn report(ctx: &ExecutionContext, collected: Collected) -> String {
    let limits = Limits::default();
    match collected {
        Collected::Whole(text, _) if text.is_empty() => String::new(),
        Collected::Whole(text, None) => {
            ctx.truncate_with_overflow(&text, Direction::Tail, limits)
                .content
        }
        Collected::Whole(text, Some(writer)) => {
            // The overflow file already holds this text: installing it is the sink's write.
            let writer = Mutex::new(Some(writer));
            let sink = |_: &str| {
                let writer = writer.lock().ok()?.take()?;
                commit(ctx, writer)
            };
            let overflow = truncate_with_overflow(&text, Direction::Tail, limits, &sink);
            if let Some(path) = &overflow.path {
                ctx.set_overflow_path(path.clone());
            }
            overflow.content
        }
        Collected::Tail {
            tail,
            total_lines,
            total_bytes,
            writer,
        } => {
            let path = writer.and_then(|w| commit(ctx, w));
            if let Some(path) = &path {
                ctx.set_overflow_path(path.clone());
            }
            truncate_tail_of(&tail, total_lines, total_bytes, limits, path.as_deref()).content
        }
    }
}

fn commit(
    ctx: &ExecutionContext,
    writer: flemma_store::AtomicWriter,
) -> Option<std::path::PathBuf> {
    writer
        .commit()
        .map_err(|error| ctx.record_overflow_error(error))
        .ok()
}
