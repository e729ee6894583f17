//! The `flemma` command: the reference application of the SDK and its black-box test surface.
//!
//! Exit codes: 0 success, 1 the file has problems (`check`, `fmt --check`) or the command
//! failed, 2 usage or I/O error. Errors go to stderr as one line naming the file, each cause
//! once; a closed standard output ends the command quietly with 0.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod input;
mod log;
mod notices;
mod options;
mod render;
mod run;
mod tools;

use input::Input;

/// Parse, check and format `.chat` transcripts.
#[derive(Debug, Parser)]
#[command(name = "flemma", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Options file for the SETUP layer (default: ./flemma.toml when present).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Set an option in the RUNTIME layer (`tools.max_concurrent=4`); repeatable. The value
    /// is read as JSON when it parses (`true`, `4`, `["bash"]`), else as text.
    // Not `global`: every subcommand has its own `--set` (see `command`), so values given
    // before and after a subcommand all count, in order.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Show more diagnostics on stderr: -v info, -vv debug, -vvv trace (default: warnings;
    /// `RUST_LOG` adds directives such as `flemma_tools=debug`).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the parsed transcript (`-` reads standard input).
    Parse {
        /// The `.chat` file.
        file: PathBuf,
        /// Print the AST as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Report diagnostics; exit 1 when there are any.
    Check {
        /// The `.chat` file.
        file: PathBuf,
        /// Print the diagnostics as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Rewrite the file in canonical form (`-` prints the result to standard output).
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
    /// Approval: how the chain decides a tool call.
    Approval {
        #[command(subcommand)]
        command: ApprovalCommand,
    },
    /// Print the exact request body a provider would receive for FILE (no network).
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
    /// The tool result store.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// The tools a conversation offers, as the model sees them (sorted by name, harness
    /// parameters included); without FILE, the defaults.
    Tools {
        /// The `.chat` file whose frontmatter shapes the tool set.
        file: Option<PathBuf>,
        /// Print `[{"name", "description", "input_schema", "strict"}]`.
        #[arg(long)]
        json: bool,
    },
    /// Run one tool cycle on FILE: placeholders for new tool calls (approval chain), then
    /// settle statuses and run the approved calls; no provider call. FILE is rewritten
    /// atomically.
    Cycle {
        /// The `.chat` file.
        file: PathBuf,
        /// Print `{"placed", "completed", "delivered", "warnings", "recovered", "next"}`.
        #[arg(long)]
        json: bool,
        /// Then wait for the conversation's background jobs and deliver their Job Results.
        #[arg(long)]
        wait: bool,
    },
    /// List the conversation's background jobs: running, completed (delivery pending),
    /// delivered or lost.
    Jobs {
        /// The `.chat` file.
        file: PathBuf,
        /// Print `[{"job_id", "tool_id", "tool", "state", "elapsed_seconds"}]`.
        #[arg(long)]
        json: bool,
    },
    /// Approve the pending call ID.
    Approve {
        /// The `.chat` file.
        file: PathBuf,
        /// The tool call id.
        id: String,
    },
    /// Reject the pending call ID; the model is told `User feedback: MESSAGE`.
    Reject {
        /// The `.chat` file.
        file: PathBuf,
        /// The tool call id.
        id: String,
        /// Why; written into the block as `User feedback: MESSAGE` (without it, the model
        /// reads `This tool has been rejected by the user.`).
        #[arg(long)]
        message: Option<String>,
    },
    /// Approve every pending call.
    ApproveAll {
        /// The `.chat` file.
        file: PathBuf,
    },
    /// Run the agent loop on FILE until it is idle, waits for approval, exceeds
    /// `--max-turns` or is cancelled (Ctrl-C; twice cancels everything). FILE is appended to
    /// as the response streams and rewritten atomically as the tools finish; edits made
    /// meanwhile are kept. Exit 130 when cancelled.
    Run {
        /// The `.chat` file.
        file: PathBuf,
        /// The provider; keys come from `ANTHROPIC_API_KEY`, `OPENAI_API_KEY` or
        /// `VERTEX_ACCESS_TOKEN`, `VERTEX_PROJECT` and `VERTEX_LOCATION`; `FLEMMA_BASE_URL`
        /// replaces the base URL.
        #[arg(long, value_enum, default_value = "anthropic")]
        provider: run::RunProvider,
        /// The model (default: the `model` option, else a per-provider default).
        #[arg(long)]
        model: Option<String>,
        /// The script `--provider scripted` replays (JSON; see `ScriptedProvider`).
        #[arg(long, value_name = "PATH")]
        script: Option<PathBuf>,
        /// What happens to calls that need approval.
        #[arg(long, value_enum, default_value = "ask")]
        approve: run::ApproveMode,
        /// Stop after this many consecutive responses that ask for tools (default: the
        /// `tools.autopilot.max_turns` option, 100).
        #[arg(long, value_name = "N")]
        max_turns: Option<u64>,
        /// Write the conversation to PATH (FILE is copied there first and left unchanged);
        /// relative paths in the conversation still resolve against FILE's directory.
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
    /// Print where the store keeps a result of FILE's conversation (FILE need not exist).
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

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ProviderArg {
    Anthropic,
    Openai,
    OpenaiChat,
    Vertex,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TemplatesArg {
    /// Jinja (minijinja).
    Jinja,
    /// Lua (needs the `lua` feature).
    Lua,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum SourceArg {
    Tool,
    Job,
}

#[derive(Debug, Subcommand)]
enum ApprovalCommand {
    /// Decide a call of TOOL in FILE's conversation and show every resolver consulted, then
    /// what the conversation's tools may write (the sandbox's writable set).
    Explain {
        /// The `.chat` file (its frontmatter is the FRONTMATTER layer).
        file: PathBuf,
        /// The tool name.
        #[arg(long)]
        tool: String,
        /// The call's input as JSON.
        #[arg(long, default_value = "{}")]
        input: String,
        /// Print the explanation as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A failure with the exit code it maps to and the error to print, if any.
#[derive(Debug)]
struct Failure {
    code: u8,
    error: Option<anyhow::Error>,
}

impl Failure {
    /// A usage or I/O error (exit 2).
    fn usage(error: anyhow::Error) -> Self {
        Self {
            code: 2,
            error: Some(error),
        }
    }
}

/// A command that ran but failed (exit 1).
fn failed(error: anyhow::Error) -> Failure {
    Failure {
        code: 1,
        error: Some(error),
    }
}

impl From<input::InputError> for Failure {
    fn from(error: input::InputError) -> Self {
        Self::usage(error.into())
    }
}

/// A failed write to standard output (the commands' `?` on their writes). A closed pipe
/// (`flemma parse big.chat | head -1`) is how the reader says it has read enough: the command
/// ends quietly with success.
impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            return Self {
                code: 0,
                error: None,
            };
        }
        Self::usage(anyhow::Error::new(error).context("cannot write to standard output"))
    }
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
    log::init(cli.verbose);
    // Tools run as this user: keep them from reading this process's environment (the
    // provider keys) through /proc. A refusal leaves the filtered environment as the bound.
    let _ = flemma::tools::protect_host_process();
    let settings = options::Settings {
        config: cli.config,
        sets: cli.sets,
    };
    match run(cli.command, &settings) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            if let Some(error) = failure.error {
                let _ = writeln!(std::io::stderr(), "flemma: {}", describe(&error));
            }
            ExitCode::from(failure.code)
        }
    }
}

/// The error and its causes joined by `: `, each cause once: a cause whose text the message
/// before it already holds (`cannot read x: No such file` over `No such file`) is left out, and
/// so is a message the next one only restates at more length (`the request failed` over `the
/// request failed after 4 attempt(s)`).
fn describe(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || parts.last().is_some_and(|last| last.contains(&text)) {
            continue;
        }
        if parts
            .last()
            .is_some_and(|last| text.starts_with(last.as_str()))
        {
            parts.pop();
        }
        parts.push(text);
    }
    parts.join(": ")
}

fn run(command: Command, settings: &options::Settings) -> Result<u8, Failure> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::Parse { file, json } => {
            let input = Input::read(&file)?;
            let doc = flemma::ast::parse(&input.text);
            if json {
                render::json(&mut out, &doc)?;
            } else {
                render::tree(&mut out, &doc)?;
            }
            Ok(0)
        }
        Command::Check { file, json } => check(&mut out, &file, json, settings),
        Command::Approval {
            command:
                ApprovalCommand::Explain {
                    file,
                    tool,
                    input,
                    json,
                },
        } => explain(&mut out, &file, &tool, &input, json, settings),
        Command::Fmt { file, check, json } => fmt(&mut out, &file, check, json),
        Command::Request {
            file,
            provider,
            model,
            templates,
        } => request(&mut out, &file, provider, model, templates, settings),
        Command::Store {
            command:
                StoreCommand::Path {
                    file,
                    tool,
                    id,
                    source,
                    json,
                },
        } => store_path(&mut out, &file, &tool, &id, source, json, settings),
        Command::Tools { file, json } => tools::tools(&mut out, file.as_deref(), json, settings),
        Command::Cycle { file, json, wait } => tools::cycle(&mut out, &file, json, wait, settings),
        Command::Jobs { file, json } => tools::jobs(&mut out, &file, json, settings),
        Command::Approve { file, id } => tools::act(&file, &tools::Action::Approve(&id), settings),
        Command::Reject { file, id, message } => tools::act(
            &file,
            &tools::Action::Reject(&id, message.as_deref()),
            settings,
        ),
        Command::ApproveAll { file } => tools::act(&file, &tools::Action::ApproveAll, settings),
        Command::Run {
            file,
            provider,
            model,
            script,
            approve,
            max_turns,
            output,
        } => run::run(
            &run::RunArgs {
                file,
                provider,
                model,
                script,
                approve,
                max_turns,
                output,
            },
            settings,
        ),
    }
}

/// `flemma request`: the body a provider would receive, built from the file, its frontmatter
/// and the options; the built-in tools are offered as `flemma tools` lists them (every
/// enabled tool, as the conversation's `tools` operations change them; a misspelled name
/// stops the command). Templates and `@./file` references are rendered; the body is printed
/// even when a template fails, and the exit code is then 1.
fn request(
    out: &mut impl Write,
    file: &Path,
    provider: ProviderArg,
    model: Option<String>,
    templates: Option<TemplatesArg>,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    use flemma::providers::{PromptBuilder, ProviderKind, RequestOptions};
    let input = Input::read(file)?;
    let registry = tools::registry()?;
    // One parse and one evaluation of the frontmatter, as a session's transcript has them.
    let transcript = options::transcript(
        &input.text,
        input.path(),
        settings.load()?,
        registry.clone(),
    );
    let evaluated = options::evaluated(&transcript, &input.name)?;
    let opts = evaluated.options();
    let kind = match provider {
        ProviderArg::Anthropic => ProviderKind::Anthropic,
        ProviderArg::Openai => ProviderKind::OpenAiResponses,
        ProviderArg::OpenaiChat => ProviderKind::OpenAiChat,
        ProviderArg::Vertex => ProviderKind::Vertex,
    };
    let mut request_options = RequestOptions::from_options(opts, kind);
    if let Some(model) = model {
        request_options.model = model;
    }
    request_options.tools = registry.specs_for_prompt(opts);
    let mut builder = PromptBuilder::new()
        .engine(template_engine(templates)?)
        .variables(evaluated.variables().clone());
    if let Some(path) = input.path() {
        builder = builder.chat_path(flemma::config::conversation_path(path));
    }
    // References and `include()` read inside the project and the store unless
    // `templates.file_access` says otherwise.
    let store = flemma::store::Store::new(&opts.tools.store, input.path(), "1")
        .and_then(|store| store.directory())
        .ok();
    builder = builder.file_access(flemma::providers::FileAccess::from_options(
        &opts.templates,
        store.as_deref(),
    ));
    let (doc, _) = tools::runtime()?
        .block_on(transcript.document())
        .map_err(|e| failed(e.into()))?;
    let prompt = builder.build(&doc);
    // A call in progress (or whose host died) would be sent as an empty result.
    if input.path().is_some() {
        for d in tools::in_progress_diagnostics(file, &doc, settings) {
            let _ = writeln!(
                std::io::stderr(),
                "{}:{}: warning: {}",
                input.name,
                d.line,
                d.message
            );
        }
    }
    for d in &prompt.diagnostics {
        let _ = writeln!(
            std::io::stderr(),
            "{}:{}: {}: {}",
            input.name,
            d.line,
            d.severity.as_str(),
            d.message
        );
    }
    let body = kind.request(&prompt, &request_options);
    writeln!(out, "{body}")?;
    Ok(u8::from(prompt.has_errors()))
}

/// The template engine `flemma request` renders with.
#[cfg_attr(
    feature = "lua",
    expect(
        clippy::unnecessary_wraps,
        reason = "only a build without the lua feature can refuse --templates lua"
    )
)]
pub(crate) fn template_engine(
    choice: Option<TemplatesArg>,
) -> Result<std::sync::Arc<dyn flemma::providers::TemplateEngine>, Failure> {
    let lua = cfg!(feature = "lua");
    match choice.unwrap_or(if lua {
        TemplatesArg::Lua
    } else {
        TemplatesArg::Jinja
    }) {
        TemplatesArg::Jinja => Ok(std::sync::Arc::new(
            flemma::providers::MiniJinjaEngine::new(),
        )),
        #[cfg(feature = "lua")]
        TemplatesArg::Lua => Ok(std::sync::Arc::new(flemma::providers::LuaEngine::new())),
        #[cfg(not(feature = "lua"))]
        TemplatesArg::Lua => Err(Failure::usage(anyhow::anyhow!(
            "--templates lua needs flemma built with the `lua` feature"
        ))),
    }
}

/// `flemma store path`.
fn store_path(
    out: &mut impl Write,
    file: &Path,
    tool: &str,
    id: &str,
    source: SourceArg,
    json: bool,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    let chat = flemma::config::conversation_path(file);
    let mut config = settings.load()?;
    // The conversation's own frontmatter may override `tools.store`.
    if chat.is_file() {
        let input = Input::read(file)?;
        options::apply_frontmatter(&mut config, &flemma::ast::parse(&input.text))
            .map_err(|e| options::frontmatter_failure(&input.name, &e))?;
    }
    let store_options = config.options().map_err(|e| failed(e.into()))?.tools.store;
    let store = flemma::store::Store::new(&store_options, Some(&chat), "1")
        .map_err(|e| failed(e.into()))?;
    let usage = |e: flemma::ast::InvalidId| Failure::usage(e.into());
    let tool = flemma::ast::ToolName::read(tool).map_err(usage)?;
    let path = match source {
        SourceArg::Tool => {
            let id = flemma::ast::ToolUseId::new(id).map_err(usage)?;
            store.path_for(&id, Some(&tool))
        }
        SourceArg::Job => {
            let id = flemma::ast::JobId::new(id).map_err(usage)?;
            store.path_for(&id, Some(&tool))
        }
    }
    .map_err(|e| failed(e.into()))?;
    if json {
        render::json(out, &serde_json::json!({ "path": path }))?;
    } else {
        writeln!(out, "{}", path.display())?;
    }
    Ok(0)
}

/// `flemma check`: parser diagnostics, frontmatter errors and what is wrong with the tool
/// names, globs and presets the options give (one line each, `PLACE: severity: kind:
/// message`); exit 1 when there are any.
fn check(
    out: &mut impl Write,
    file: &Path,
    json: bool,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    let input = Input::read(file)?;
    let mut doc = flemma::ast::parse(&input.text);
    let mut config = settings.load()?;
    let frontmatter = options::apply_frontmatter(&mut config, &doc).err();
    // The names the options give, checked against the built-in tools (spec §5.4-§5.6).
    let found = tools::registry()?
        .evaluate(&mut config)
        .map(|evaluation| evaluation.diagnostics)
        .map_err(|e| failed(anyhow::Error::new(e).context(input.name.clone())))?;
    // Calls that run in another process, or whose host died mid-run.
    if input.path().is_some() {
        let in_progress = tools::in_progress_diagnostics(file, &doc, settings);
        doc.diagnostics.extend(in_progress);
    }
    if json {
        let mut diagnostics =
            serde_json::to_value(&doc.diagnostics).map_err(|e| failed(e.into()))?;
        if let Some(list) = diagnostics.as_array_mut() {
            for (at, d) in found.iter().enumerate() {
                let mut value = serde_json::json!({
                    "kind": options::kind(d),
                    "severity": d.severity().as_str(),
                    "message": d.issue.to_string(),
                    "line": d.frontmatter_line(),
                });
                // A place outside the transcript: the options file and its line, `--set`.
                if d.frontmatter_line().is_none() {
                    value["place"] = options::place(&input.name, d).into();
                }
                list.insert(at, value);
            }
            if let Some(err) = &frontmatter {
                list.insert(
                    0,
                    serde_json::json!({"kind": "frontmatter", "severity": "error", "message": options::describe(err), "line": err.line}),
                );
            }
        }
        render::json(
            out,
            &serde_json::json!({ "file": input.name, "diagnostics": diagnostics }),
        )?;
    } else {
        if let Some(err) = &frontmatter {
            writeln!(
                out,
                "{}:{}: error: frontmatter: {}",
                input.name,
                err.line,
                options::describe(err)
            )?;
        }
        for d in &found {
            writeln!(
                out,
                "{}: {}: {}: {}",
                options::place(&input.name, d),
                d.severity(),
                options::kind(d),
                d.issue
            )?;
        }
        for d in &doc.diagnostics {
            writeln!(
                out,
                "{}:{}: {}: {}: {}",
                input.name,
                d.line,
                d.severity.as_str(),
                d.kind.as_str(),
                d.message
            )?;
        }
    }
    Ok(u8::from(
        !doc.diagnostics.is_empty() || frontmatter.is_some() || !found.is_empty(),
    ))
}

/// `flemma approval explain`.
fn explain(
    out: &mut impl Write,
    file: &Path,
    tool: &str,
    input: &str,
    json: bool,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    let text = Input::read(file)?;
    let call_input: serde_json::Value = serde_json::from_str(input)
        .map_err(|e| Failure::usage(anyhow::Error::new(e).context("--input is not JSON")))?;
    let doc = flemma::ast::parse(&text.text);
    let mut config = settings.load()?;
    options::apply_frontmatter(&mut config, &doc)
        .map_err(|e| options::frontmatter_failure(&text.name, &e))?;
    let explanation = options::explain(&config, tool, &call_input).map_err(failed)?;
    let chat = text.path().map(flemma::config::conversation_path);
    let writable = options::writable(&config, chat.as_deref()).map_err(failed)?;
    if json {
        let mut value = serde_json::to_value(&explanation).map_err(|e| failed(e.into()))?;
        if let Some(object) = value.as_object_mut() {
            let writable = serde_json::to_value(&writable).map_err(|e| failed(e.into()))?;
            object.insert("writable".to_owned(), writable);
        }
        render::json(out, &value)?;
    } else {
        render::explanation(out, tool, &explanation)?;
        render::writable(out, &writable)?;
    }
    Ok(0)
}

/// `flemma fmt`.
fn fmt(out: &mut impl Write, file: &Path, check: bool, json: bool) -> Result<u8, Failure> {
    let input = Input::read(file)?;
    let formatted = input.with_line_ending(&flemma::ast::print(&flemma::ast::parse(&input.text)));
    let changed = formatted != input.text;
    if json {
        render::json(
            out,
            &serde_json::json!({ "file": input.name, "changed": changed }),
        )?;
    }
    if check {
        if changed && !json {
            writeln!(out, "{}: not in canonical form", input.name)?;
        }
        return Ok(u8::from(changed));
    }
    if input.is_stdin() {
        if !json {
            out.write_all(formatted.as_bytes())?;
        }
    } else if changed {
        input
            .write_back(&formatted)
            .map_err(|e| Failure::usage(e.into()))?;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::describe;

    #[derive(Debug, thiserror::Error)]
    #[error("the request failed after 4 attempt(s)")]
    struct Attempts;

    #[derive(Debug, thiserror::Error)]
    #[error("the request failed")]
    struct Request(#[source] Attempts);

    /// A cause that prints its own source as well as keeping it.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot open x: {0}")]
    struct Inlined(#[source] std::io::Error);

    #[test]
    fn each_cause_is_shown_once() {
        let error = anyhow::Error::new(Request(Attempts)).context("the anthropic request failed");
        assert_eq!(
            format!("{error:#}"),
            "the anthropic request failed: the request failed: the request failed after 4 attempt(s)"
        );
        assert_eq!(
            describe(&error),
            "the anthropic request failed: the request failed after 4 attempt(s)"
        );
        let error = anyhow::Error::new(Inlined(std::io::Error::other("denied"))).context("a.chat");
        assert_eq!(
            format!("{error:#}"),
            "a.chat: cannot open x: denied: denied"
        );
        assert_eq!(describe(&error), "a.chat: cannot open x: denied");
    }
}
