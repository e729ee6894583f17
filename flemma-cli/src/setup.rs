//! What the commands assemble: the tool registry (with the MCP servers), a file's tool set,
//! the executor, the provider, the session and its template engine, and the approval actions
//! on an executor.
//!
//! It uses the options, the runtime, the MCP servers ([`crate::mcp::servers`]) and the
//! notices, never a command module (`run`, `tools`, `request`, `object`, `mcp`), so that the
//! commands share it without depending on one another.

use std::path::Path;
use std::sync::Arc;

use flemma::async_trait;
use flemma::config::Config;
use flemma::core::Conversation;
use flemma::core::{Answer, Approver, PendingCall};
use flemma::providers::{HttpProvider, Provider, ProviderKind, ScriptedProvider, TransportConfig};
use flemma::runtime::Session;
use flemma::runtime::{Executor, ToolRegistry};

use crate::failure::{Failure, failed};
use crate::input::Input;
use crate::notices;
use crate::options;
use crate::runtime::runtime;

/// The tools the command offers: the built-ins, and with the `mcp` feature the tools of the
/// MCP servers of `[mcp.servers]` in the options files ([`crate::mcp::servers`]), started now
/// (in the command's runtime) and stopped when the command ends ([`crate::runtime::finish`]).
pub(crate) fn registry(config: &Config) -> Result<ToolRegistry, Failure> {
    let registry = ToolRegistry::new();
    flemma::runtime::register_builtins(&registry).map_err(|e| failed(e.into()))?;
    #[cfg(feature = "mcp")]
    {
        let runtime = runtime()?;
        let _entered = runtime.enter();
        crate::mcp::servers::add_servers(&registry, config)?;
    }
    // Command hooks come from the options files alone (a frontmatter cannot add them).
    let project = std::env::current_dir()
        .ok()
        .map(|dir| flemma::config::project_root(&dir));
    let hooks = flemma::runtime::hooks::from_config(config, project.as_deref())
        .map_err(|e| Failure::usage(e.into()))?;
    for hook in hooks.hooks {
        registry.register_hook(hook).map_err(|e| failed(e.into()))?;
    }
    Ok(registry)
}

/// The subagents of the conversation's project (`.flemma/agents/*.md`, then Claude Code's
/// `.claude/agents/*.md`; the project of the working directory without a conversation file),
/// with the `agent` tool registered in `registry`; `None` when the project defines none. What
/// the files could not give goes to stderr as warnings, escaped.
pub(crate) fn subagents(
    registry: &ToolRegistry,
    conversation: Option<&Path>,
) -> Result<Option<flemma::runtime::agents::Subagents>, Failure> {
    use flemma::runtime::agents::{AgentWarning, Agents, Subagents};
    use std::io::Write as _;
    let dir = conversation
        .map(flemma::config::conversation_path)
        .and_then(|chat| chat.parent().map(Path::to_owned))
        .or_else(|| std::env::current_dir().ok());
    let Some(dir) = dir else {
        return Ok(None);
    };
    let mut agents = Agents::new();
    let warnings = agents.load_project(&flemma::config::project_root(&dir));
    let mut err = std::io::stderr().lock();
    for warning in &warnings {
        let text = match warning {
            AgentWarning::Skipped { error } => flemma::ids::error_chain(error),
            other => other.to_string(),
        };
        let _ = writeln!(
            err,
            "{}",
            crate::visible::line(&notices::warning_line(&text))
        );
    }
    if agents.is_empty() {
        return Ok(None);
    }
    let subagents = Subagents::new(agents);
    registry.register(subagents.tool().map_err(|e| failed(e.into()))?);
    Ok(Some(subagents))
}

/// [`registry`], once its sources (the MCP servers) have registered their tools or failed:
/// for commands that list or check names rather than run a cycle (which waits by itself).
pub(crate) fn ready_registry(config: &Config) -> Result<ToolRegistry, Failure> {
    let registry = registry(config)?;
    runtime()?.block_on(registry.ready());
    Ok(registry)
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
pub(crate) fn tool_set_of(
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

/// The executor of `conversation` as the commands run it: `config`, the built-in sandbox
/// backends, `registry`'s tools.
pub(crate) fn executor(
    conversation: Arc<dyn Conversation>,
    registry: flemma::runtime::ToolRegistry,
    config: flemma::config::Config,
) -> flemma::runtime::ExecutorBuilder {
    flemma::runtime::Executor::builder(conversation, registry)
        .config(config)
        .sandbox_backends(flemma::builtins::sandbox_backends())
}

/// The models' prices and sizes: the built-in table with `[models]` of the options files.
pub(crate) fn models(config: &Config) -> Result<Arc<flemma::providers::ModelTable>, Failure> {
    let builtin = flemma::providers::ModelTable::builtin();
    let Some(overrides) = config.section("models") else {
        return Ok(builtin);
    };
    builtin
        .with_overrides(overrides)
        .map(Arc::new)
        .map_err(|error| {
            let place = config
                .section_origin("models")
                .map_or_else(String::new, |p| format!("{}: ", p.display()));
            Failure::usage(anyhow::Error::new(error).context(format!("{place}[models]")))
        })
}

/// The session of `executor`, sending to `provider`, with the CLI's template engine and
/// `models`' prices.
pub(crate) fn session_of(
    executor: flemma::runtime::ExecutorBuilder,
    provider: Arc<dyn Provider>,
    models: Arc<flemma::providers::ModelTable>,
    max_turns: Option<u64>,
    subagents: Option<flemma::runtime::agents::Subagents>,
) -> Result<Session, Failure> {
    let mut builder = Session::from_executor(executor, provider)
        .template_engine(template_engine(None)?)
        .models(models);
    if let Some(max_turns) = max_turns {
        builder = builder.max_turns(max_turns);
    }
    if let Some(subagents) = subagents {
        builder = builder.subagents(subagents);
    }
    Ok(builder.build())
}

/// Maps an executor error to a failure that names the file.
pub(crate) fn executor_failure(file: &Path, error: flemma::runtime::ExecutorError) -> Failure {
    use flemma::runtime::ExecutorError::Transcript;
    use flemma::runtime::transcript::TranscriptError;
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

/// What `approve`, `reject` and `approve-all` do.
#[derive(Debug)]
pub(crate) enum Action<'a> {
    Approve(&'a str),
    Reject(&'a str, Option<&'a str>),
    ApproveAll,
}

/// `action` on `executor`'s conversation, after the recovery of its jobs; the executor's
/// notices printed.
pub(crate) fn act_on(
    executor: &Executor,
    action: &Action<'_>,
    runtime: &tokio::runtime::Runtime,
) -> Result<(), flemma::runtime::ExecutorError> {
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

/// `--provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RunProvider {
    Anthropic,
    Openai,
    OpenaiChat,
    Vertex,
    /// Replays `--script` (no network).
    Scripted,
}

/// The provider `--provider` (and `--script`, `--model`) name, `http.*` from `config`.
pub(crate) fn make_provider(
    provider: RunProvider,
    script: Option<&Path>,
    model: Option<&str>,
    config: &flemma::config::Config,
) -> Result<Arc<dyn Provider>, Failure> {
    let kind = match provider {
        RunProvider::Scripted => {
            let script = script.ok_or_else(|| {
                Failure::usage(anyhow::anyhow!("--provider scripted needs --script PATH"))
            })?;
            return ScriptedProvider::from_file(script)
                .map(|p| Arc::new(p) as Arc<dyn Provider>)
                .map_err(|e| Failure::usage(e.into()));
        }
        _ if script.is_some() => {
            return Err(Failure::usage(anyhow::anyhow!(
                "--script goes with --provider scripted"
            )));
        }
        RunProvider::Anthropic => ProviderKind::Anthropic,
        RunProvider::Openai => ProviderKind::OpenAiResponses,
        RunProvider::OpenaiChat => ProviderKind::OpenAiChat,
        RunProvider::Vertex => ProviderKind::Vertex,
    };
    let model = model.unwrap_or_else(|| kind.default_model());
    // `http.*` (timeouts, retries) from flemma.toml and --set; the frontmatter is read later.
    let options = config.options().map_err(|e| Failure::usage(e.into()))?;
    HttpProvider::from_env_with(kind, model, TransportConfig::from_options(&options))
        .map(|p| Arc::new(p) as Arc<dyn Provider>)
        .map_err(|e| Failure::usage(e.into()))
}

/// Approves every pending call (`--approve all`).
pub(crate) struct ApproveAll;

#[async_trait]
impl Approver for ApproveAll {
    async fn ask(&self, _call: &PendingCall) -> Answer {
        Answer::Approve
    }
}

/// `--templates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TemplatesArg {
    /// Jinja (minijinja).
    Jinja,
    /// Lua (needs the `lua` feature).
    Lua,
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
