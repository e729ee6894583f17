//! The `flemma` command: the reference application of the SDK and its black-box test surface.
//!
//! Exit codes: 0 success, 1 the file has problems (`check`, `fmt --check`) or the command
//! failed, 2 usage or I/O error. Errors go to stderr as one line naming the file, each cause
//! once; a closed standard output ends the command quietly with 0.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;
mod compact;
mod failure;
mod input;
mod log;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "mcp")]
mod mcp_serve;
mod notices;
#[cfg(feature = "object-store")]
mod object;
mod options;
// The book's command-line reference lists every command: it is rendered with all of them.
#[cfg(all(test, feature = "mcp", feature = "lsp", feature = "object-store"))]
mod reference;
mod render;
mod request;
mod run;
mod runtime;
mod setup;
mod tools;
mod usage;
mod visible;

use commands::SourceArg;
use failure::Failure;
use request::ProviderArg;
use setup::TemplatesArg;

/// Parse, check and format `.chat` transcripts.
#[derive(Debug, Parser)]
#[command(
    name = "flemma",
    version,
    about,
    long_about = concat!(
        env!("CARGO_PKG_DESCRIPTION"),
        "\n\n`run`, `cycle`, `approve`, `reject` and `approve-all` print on stderr the \
         executor's warnings as `warning: TEXT` (an approved block whose content was edited and \
         is not run, a result that could not be stored, a resolver that failed, ...) and what \
         opening the conversation found of its background jobs as `jobs: N re-adopted, N \
         finished while away, N lost, N run elsewhere`.",
        "\n\n`run`, `cycle`, `tools` and `request` stop with exit 1 on an option error, one \
         line each (`flemma: FILE:LINE: Unknown tool 'reed' -- did you mean 'read'?`); an \
         option warning goes to stderr and the command goes on.",
        "\n\nA `flemma` built with the `otel` feature exports its tracing spans over OTLP \
         (HTTP/protobuf) when `OTEL_EXPORTER_OTLP_ENDPOINT`, \
         `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER=otlp` asks; \
         `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` records the messages and \
         the tools' inputs and results on them (the book's Observability chapter).",
    )
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Options file for the SETUP layer (default: ./flemma.toml when present).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Set an option in the RUNTIME layer (`tools.max_concurrent=4`); repeatable.
    ///
    /// The value is read as JSON when it parses (`true`, `4`, `["bash"]`), else as text.
    // Not `global`: every subcommand has its own `--set` (see `command`), so values given
    // before and after a subcommand all count, in order.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Show more diagnostics on stderr: -v info, -vv debug, -vvv trace.
    ///
    /// The default shows warnings; `RUST_LOG` adds directives such as `flemma_runtime=debug`
    /// (`RUST_LOG=off` silences them, the default warnings included).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent loop on FILE: send, run the tools, repeat.
    ///
    /// Runs until the model answers, a call waits for approval, `--max-turns` is reached or
    /// it is cancelled. FILE is appended to as the response streams and rewritten atomically
    /// as the tools finish; edits made meanwhile are kept.
    ///
    /// The model's text goes to standard output, status lines to stderr: `request 1`,
    /// `running: ls: .`, `ok: ls: .` followed by the result's first lines, `stopped:
    /// finished`. On a terminal a spinner shows each running tool; elsewhere the lines are
    /// plain, without escape codes.
    ///
    /// Agents defined in the conversation's project (`.flemma/agents/NAME.md`, or Claude Code's
    /// `.claude/agents/NAME.md`) add the `agent` tool: each call runs one as a child
    /// conversation beside FILE, within FILE's tools and approvals; its calls show as
    /// `AGENT: running: …`, and one that waits for approval with no one to ask stops the run
    /// (`waiting: agent ID: …`, exit 3) until it is decided in the child's file.
    ///
    /// Ctrl-C cancels the request (an abort marker is written), the running tools, or the wait
    /// for background jobs (the jobs go on); a second Ctrl-C cancels everything, background
    /// jobs included. SIGTERM and SIGHUP cancel as the first Ctrl-C does. After the second
    /// Ctrl-C, a SIGTERM or a SIGHUP the command exits within 5 s; one more signal exits at
    /// once.
    ///
    /// Exit codes: 0 finished or nothing to do, 3 awaiting approval, 4 stopped by a limit, 5
    /// background jobs still running, 6 a hook blocked the prompt, 7 a budget was reached
    /// (`budget.run.*`, `budget.conversation.*`), 1 failed, 2 usage error, 130/143/129
    /// cancelled by a signal.
    Run {
        /// The `.chat` file.
        file: PathBuf,
        /// The provider.
        ///
        /// Keys come from `ANTHROPIC_API_KEY`, `OPENAI_API_KEY` or `VERTEX_ACCESS_TOKEN`,
        /// `VERTEX_PROJECT` and `VERTEX_LOCATION`; `FLEMMA_BASE_URL` replaces the base URL.
        #[arg(long, value_enum, default_value = "anthropic")]
        provider: setup::RunProvider,
        /// The model (default: the `model` option, else a per-provider default).
        #[arg(long)]
        model: Option<String>,
        /// The script `--provider scripted` replays: a JSON list of turns, one per request.
        ///
        /// A turn: `{"text": "…", "thinking": "…", "tool_uses": [{"name": "ls", "input":
        /// {"path": "."}, "id": "optional"}], "usage": {"input_tokens": 10, "output_tokens":
        /// 5}, "delay_ms": 0}` (every key optional), `{"error": "overloaded"}`, or
        /// `{"recording": "stream.txt", "provider": "anthropic"}` (a recorded SSE stream,
        /// relative to the script). Generated ids are `toolu_scripted_<turn>_<n>`; a
        /// conversation that holds turn k's calls resumes at turn k + 1.
        #[arg(long, value_name = "PATH")]
        script: Option<PathBuf>,
        /// What happens to calls that need approval.
        ///
        /// `ask` asks `allow CALL? [y/n/reason]` on a terminal: only `y` or `yes` runs the
        /// call, `n` or `no` rejects it, other text rejects it with that text as the reason,
        /// and Ctrl-D or Ctrl-C leaves it `(pending)` and stops the run. Where standard input
        /// or stderr is not a terminal, `ask` is `none`: calls wait as `(pending)` in the file
        /// (exit 3) for `flemma approve` or `flemma reject`, then a new `flemma run`. `all`
        /// approves every call the approval chain leaves pending.
        #[arg(long, value_enum, default_value = "ask")]
        approve: run::ApproveMode,
        /// Stop after this many consecutive responses that ask for tools (default: the
        /// `tools.autopilot.max_turns` option, 100).
        #[arg(long, value_name = "N")]
        max_turns: Option<u64>,
        /// Write the conversation to PATH (FILE is copied there first and left unchanged).
        ///
        /// Relative paths in the conversation still resolve against FILE's directory.
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
        /// Print a JSON summary on stdout when the run ends, instead of the model's text
        /// (which is in the file): `{"stop", "exit_code", "usage": {"requests", "usage",
        /// "cost", "priced_cost", "unpriced_requests"}, "requests": [{"turn", "provider",
        /// "model", "usage", "cost"}], "budget"}`; `stop` is null and `error` set when the run
        /// failed, `budget` the budget reached, if one was; a compaction's summary request has
        /// `"compaction": true`. The status lines stay on stderr.
        #[arg(long)]
        json: bool,
    },
    /// Compact FILE now: summarise its older part into a `**Compaction:**` block.
    ///
    /// The messages above the latest `compaction.keep_turns` responses are summarised by the
    /// model (as `flemma run` would call it) into a `@You:` message holding the block, written
    /// before the first message kept. The messages above it stay in the file and are no
    /// longer sent; deleting the block sends them again. A call waiting for approval or a
    /// background job still running is never summarised away. Prints `FILE: compacted 48
    /// messages (182.3k tokens) into a 2.3k-token summary at line 412`, or that there is
    /// nothing to compact (exit 0); exit 6 when a `PreCompact` hook cancelled it. Automatic
    /// compaction in `flemma run` follows `compaction.enabled` and `compaction.threshold`.
    Compact(compact::CompactArgs),
    /// Run one tool cycle on FILE, without calling a model.
    ///
    /// Places placeholders for new tool calls (approval chain), then settles statuses and
    /// runs the approved calls. FILE is rewritten atomically.
    Cycle {
        /// The `.chat` file.
        file: PathBuf,
        /// Print `{"placed", "completed", "delivered", "warnings", "recovered": {"adopted",
        /// "finished", "lost", "elsewhere"}, "next"}`, `next` being `send`, `await_approval`,
        /// `running` or `idle`.
        #[arg(long)]
        json: bool,
        /// Then wait for the conversation's background jobs and deliver their Job Results.
        #[arg(long)]
        wait: bool,
    },
    /// Approve the pending call ID.
    ///
    /// Fails (exit 1) with `flemma: FILE: Tool not found: ID`, `No tool result placeholder for
    /// ID` or `Tool ID has already completed`.
    Approve {
        /// The `.chat` file.
        file: PathBuf,
        /// The tool call id.
        id: String,
    },
    /// Reject the pending call ID.
    ///
    /// Fails as `flemma approve` does.
    Reject {
        /// The `.chat` file.
        file: PathBuf,
        /// The tool call id.
        id: String,
        /// Why; written into the block as the model will read it, marked as the user's
        /// feedback (without it, the model reads the plugin's rejection text).
        #[arg(long)]
        message: Option<String>,
    },
    /// Approve every pending call.
    ///
    /// Fails (exit 1) with `flemma: FILE: No pending tools to approve` when none is pending.
    ApproveAll {
        /// The `.chat` file.
        file: PathBuf,
    },
    /// List the conversation's background jobs.
    ///
    /// Each job is running, completed (delivery pending), delivered or lost. As text, columns
    /// JOB, CALL, TOOL, STATE and ELAPSED, or `no jobs`. It only reads: no recovery runs. A job
    /// the transcript names and no journal knows is delivered when its Job Result is there,
    /// lost when it is not or when that block is the `Job lost` marker (header `error job=J`).
    Jobs {
        /// The `.chat` file.
        file: PathBuf,
        /// Print `[{"job_id", "tool_id", "tool", "state", "elapsed_seconds"}]`; `state` is
        /// `running`, `completed`, `delivered` or `lost`, `elapsed_seconds` null when unknown.
        #[arg(long)]
        json: bool,
    },
    /// Show what the conversation's requests used and cost, over every run.
    ///
    /// Read from the usage log in the conversation's store (`usage.jsonl`), which each
    /// response adds a line to: `FILE: 12 requests, 120.4k in (98.1k cached), 3.2k out,
    /// $0.41`, then one line per model when there are several or one without a price. Costs
    /// are list prices from the built-in model table (with the date it was taken) and
    /// `[models]` of flemma.toml; a model without a known price shows its tokens only.
    Usage {
        /// The `.chat` file.
        file: PathBuf,
        /// Print `{"requests", "usage", "cost", "priced_cost", "unpriced_requests",
        /// "models": [...], "skipped_lines", "log"}`; `cost` is null when a request had no
        /// known price.
        #[arg(long)]
        json: bool,
    },
    /// Report diagnostics; exit 1 when there are any.
    ///
    /// The parser's diagnostics, the frontmatter's error, the option diagnostics (unknown
    /// tools, globs matching nothing, unknown presets) and the calls in progress, one line
    /// each: `PLACE: severity: kind: message`, PLACE being `FILE:LINE`, an options file's
    /// `PATH:LINE` or `--set`.
    Check {
        /// The `.chat` file.
        file: PathBuf,
        /// Print the diagnostics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the parsed transcript (`-` reads standard input).
    ///
    /// As text, an outline: the frontmatter, each message with its segments and their lines,
    /// then the diagnostics.
    Parse {
        /// The `.chat` file.
        file: PathBuf,
        /// Print the AST as JSON: `flemma::ast::Document` serialized.
        #[arg(long)]
        json: bool,
    },
    /// Rewrite the file in canonical form (`-` prints the result to standard output).
    ///
    /// The file is replaced atomically (no backup), only when it changes, and keeps its line
    /// ending: that of its first line, so a CRLF file stays CRLF.
    Fmt {
        /// The `.chat` file.
        file: PathBuf,
        /// Change nothing; exit 1 when the file is not in canonical form.
        #[arg(long)]
        check: bool,
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The tools a conversation offers, and which are auto-approved.
    ///
    /// Sorted by name, as the model sees them (with `--json`, harness parameters included);
    /// without FILE, the defaults. MCP servers of the options files are started and their
    /// tools listed as well.
    ///
    /// As text, columns NAME, APPROVAL and DESCRIPTION (its first sentence). APPROVAL is
    /// `auto` when `tools.auto_approve` names the tool (or `tools.require_approval` is off),
    /// `sandboxed` when the sandbox resolver approves it because a sandbox runs it, else `ask`;
    /// hooks and MCP hints may still decide a call (`flemma approval explain` shows how).
    Tools {
        /// The `.chat` file whose frontmatter shapes the tool set.
        file: Option<PathBuf>,
        /// Print `[{"name", "description", "input_schema", "strict"}]`.
        #[arg(long)]
        json: bool,
    },
    /// Print the request body a provider would receive for FILE (no network).
    ///
    /// The tools offered are the conversation's tool set as `flemma tools` lists it, the MCP
    /// servers' included; templates and `@./file` references are rendered. Diagnostics go to
    /// stderr as `FILE:LINE: severity: message`. The exit code is 1 when a template failed
    /// or there is nothing to send; the body is printed all the same.
    Request {
        /// The `.chat` file.
        file: PathBuf,
        /// The provider.
        #[arg(long, value_enum)]
        provider: ProviderArg,
        /// The model (default: the `model` option, else a per-provider default).
        #[arg(long)]
        model: Option<String>,
        /// The template language of `{{ }}` / `{% %}` (default: lua when built with the
        /// `lua` feature, as the reference writes templates; else jinja).
        #[arg(long, value_enum)]
        templates: Option<TemplatesArg>,
    },
    /// Explain how the approval chain decides a tool call.
    Approval {
        #[command(subcommand)]
        command: ApprovalCommand,
    },
    /// The tool result store.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// MCP servers as tool sources, and flemma's tools for MCP clients.
    #[cfg(feature = "mcp")]
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// The language server of `.chat` documents, on standard input and output.
    ///
    /// For an editor to start. It reads the options files and `--set` as the other commands
    /// do and checks frontmatters against the built-in tools; MCP servers are not started.
    #[cfg(feature = "lsp")]
    Lsp,
    /// Run the ready conversations under an object-store prefix (`s3://bucket/prefix`).
    ///
    /// A conversation is ready when its last message is the user's or calls wait to run;
    /// each runs under a lease that keeps other workers off it, with any number of workers
    /// on any number of machines. The bucket's client comes from the `AWS_*` variables
    /// (`AWS_ENDPOINT_URL` for S3-compatible servers). Runs until SIGINT, SIGTERM or SIGHUP,
    /// then lets the runs stop and releases their leases.
    ///
    /// `flemma run s3://BUCKET/KEY.chat` runs one conversation of a prefix, under a lease as a
    /// worker does.
    #[cfg(feature = "object-store")]
    Worker(object::WorkerArgs),
}

#[cfg(feature = "mcp")]
#[derive(Debug, Subcommand)]
enum McpCommand {
    /// The MCP servers of the options files (`[mcp.servers.NAME]`): each one's transport and
    /// state, and its tools as the model sees them (registered as `SERVER.tool`); with FILE,
    /// which of them the conversation offers.
    List {
        /// The `.chat` file whose frontmatter shapes the tool set.
        file: Option<PathBuf>,
        /// Print `[{"name", "transport", "state", "error", "tools": [{"name",
        /// "description", "hints", "offered"}]}]`.
        #[arg(long)]
        json: bool,
    },
    /// Serve FILE's tools (its tool set, approval chain and sandbox, as a cycle applies them)
    /// to an MCP client over stdio, or streamable HTTP on a loopback address with `--http`.
    ///
    /// Calls the approval chain leaves pending are refused with an error result unless
    /// `--approve all`.
    Serve(mcp_serve::ServeArgs),
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
    /// Print where the store keeps a result of FILE's conversation (FILE need not exist).
    ///
    /// For `s3://BUCKET/KEY.chat` (the `object-store` feature, on by default) it prints the
    /// result's object URL; a result the store keeps outside the conversation's store
    /// directory stays a path on this machine.
    Path {
        /// The `.chat` file.
        file: PathBuf,
        /// The tool name.
        #[arg(long)]
        tool: String,
        /// The tool call or job id.
        #[arg(long)]
        id: String,
        /// Who produced the result.
        #[arg(long, value_enum, default_value = "tool")]
        source: SourceArg,
        /// Print `{"path": ...}`.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum ApprovalCommand {
    /// Decide a call of TOOL in FILE's conversation and show every resolver consulted; for a
    /// `bash` call under command rules (`tools.bash.allow`, `ask`, `deny`), each simple command
    /// of it with the rule that decided it and what needs approval besides; then what the
    /// conversation's tools may write (the sandbox's writable set, absolute paths).
    Explain {
        /// The `.chat` file (its frontmatter is the FRONTMATTER layer).
        file: PathBuf,
        /// The tool name.
        #[arg(long)]
        tool: String,
        /// The call's input as JSON.
        #[arg(long, default_value = "{}")]
        input: String,
        /// Print the explanation as JSON, with `"writable": {"enforced", "reason", "paths",
        /// "read_only"}` (`reason` only when the set is not enforced) and, for a `bash` call
        /// under command rules, `"command": {"outcome", "segments", "findings"}`.
        #[arg(long)]
        json: bool,
    },
}

/// The command line parser: [`Cli`] with `--set` on every subcommand as its own argument.
///
/// A clap `global` argument given at several levels keeps only the deepest level's values
/// (`flemma --set a=1 run x --set b=2` lost `a=1`); [`all_sets`] gathers each level's instead.
fn command() -> clap::Command {
    fn with_set(command: clap::Command) -> clap::Command {
        command.mut_subcommands(|sub| {
            let set = clap::Arg::new("sets")
                .long("set")
                .value_name("KEY=VALUE")
                .action(clap::ArgAction::Append)
                .help("Set an option in the RUNTIME layer (`tools.max_concurrent=4`); repeatable");
            with_set(sub.arg(set))
        })
    }
    with_set(<Cli as clap::CommandFactory>::command())
}

/// The `--set` values of every level, outermost first: the order they were given in.
fn all_sets(matches: &clap::ArgMatches) -> Vec<String> {
    let mut sets = Vec::new();
    let mut level = Some(matches);
    while let Some(m) = level {
        if let Ok(Some(values)) = m.try_get_many::<String>("sets") {
            sets.extend(values.cloned());
        }
        level = m.subcommand().map(|(_, sub)| sub);
    }
    sets
}

/// Parses the command line; `Err` is the exit code after clap printed its message.
fn parse() -> Result<Cli, ExitCode> {
    let exit = |err: clap::Error| {
        let _ = err.print();
        ExitCode::from(if err.use_stderr() { 2 } else { 0 })
    };
    let matches = command().try_get_matches().map_err(exit)?;
    let mut cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).map_err(exit)?;
    cli.sets = all_sets(&matches);
    Ok(cli)
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let export = log::init(cli.verbose);
    // Tools run as this user: keep them from reading this process's environment (the
    // provider keys) through /proc. A refusal leaves the filtered environment as the bound.
    let _ = flemma::runtime::protect_host_process();
    let mut sets = cli.sets;
    // The conventions' switch for recording content on the spans: the host's environment
    // turns it on as `--set` would, before the command line's own `--set`s (which win).
    if std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"))
    {
        sets.insert(0, "telemetry.capture_content=true".to_owned());
    }
    let settings = options::Settings {
        config: cli.config,
        sets,
    };
    let outcome = run(cli.command, &settings);
    // The MCP servers stop, and the runtime is left behind.
    runtime::finish();
    export.finish();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            if let Some(error) = failure.error {
                let described = failure::describe(&error);
                let _ = writeln!(std::io::stderr(), "flemma: {}", visible::text(&described));
            }
            ExitCode::from(failure.code)
        }
    }
}

fn run(command: Command, settings: &options::Settings) -> Result<u8, Failure> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Parse { file, json } => commands::parse(&mut out, &file, json),
        Command::Check { file, json } => commands::check(&mut out, &file, json, settings),
        Command::Approval {
            command:
                ApprovalCommand::Explain {
                    file,
                    tool,
                    input,
                    json,
                },
        } => commands::explain(&mut out, &file, &tool, &input, json, settings),
        Command::Fmt { file, check, json } => commands::fmt(&mut out, &file, check, json),
        Command::Request {
            file,
            provider,
            model,
            templates,
        } => request::request(&mut out, &file, provider, model, templates, settings),
        Command::Store {
            command:
                StoreCommand::Path {
                    file,
                    tool,
                    id,
                    source,
                    json,
                },
        } => commands::store_path(&mut out, &file, &tool, &id, source, json, settings),
        Command::Tools { file, json } => tools::tools(&mut out, file.as_deref(), json, settings),
        Command::Cycle { file, json, wait } => tools::cycle(&mut out, &file, json, wait, settings),
        Command::Jobs { file, json } => tools::jobs(&mut out, &file, json, settings),
        Command::Usage { file, json } => usage::usage(&mut out, &file, json, settings),
        #[cfg(feature = "mcp")]
        Command::Mcp {
            command: McpCommand::List { file, json },
        } => mcp::list(&mut out, file.as_deref(), json, settings),
        #[cfg(feature = "mcp")]
        Command::Mcp {
            command: McpCommand::Serve(args),
        } => {
            // The MCP session over stdio writes standard output itself.
            drop(out);
            mcp_serve::serve(&args, settings)
        }
        #[cfg(feature = "lsp")]
        Command::Lsp => {
            // The protocol owns standard output.
            drop(out);
            // Frontmatters are checked against the options files and the built-in tools (MCP
            // servers are not started for an editor).
            let config = settings.load()?;
            let registry = flemma::runtime::ToolRegistry::new();
            flemma::runtime::register_builtins(&registry).map_err(|e| failure::failed(e.into()))?;
            let options = flemma::lsp::ServerOptions::default()
                .config(config)
                .registry(registry);
            flemma::lsp::serve_stdio(options)
                .map(|()| 0)
                .map_err(|e| failure::failed(e.into()))
        }
        Command::Approve { file, id } => tools::act(&file, &setup::Action::Approve(&id), settings),
        Command::Reject { file, id, message } => tools::act(
            &file,
            &setup::Action::Reject(&id, message.as_deref()),
            settings,
        ),
        Command::ApproveAll { file } => tools::act(&file, &setup::Action::ApproveAll, settings),
        Command::Run {
            file,
            provider,
            model,
            script,
            approve,
            max_turns,
            output,
            json,
        } => run::run(
            &run::RunArgs {
                file,
                provider,
                model,
                script,
                approve,
                max_turns,
                output,
                json,
            },
            settings,
        ),
        Command::Compact(args) => compact::compact(&mut out, &args, settings),
        #[cfg(feature = "object-store")]
        Command::Worker(args) => object::worker(&args, settings),
    }
}
