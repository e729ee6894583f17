//! Options as the CLI reads them: `flemma.toml` (SETUP), `--set` (RUNTIME) and the file's
//! frontmatter (FRONTMATTER), and the approval explanation built from them.

use std::path::{Path, PathBuf};

use flemma::approval::{ApprovalContext, Explanation, ToolCall};
use flemma::ast::Document;
use flemma::config::{Config, ConfigError, FrontmatterError, Layer, OptionDiagnostic, Origin};
use flemma::ids::ToolName;

use crate::failure::{Failure, failed};
use crate::render::{NO_BACKEND, Writable};

/// The options file read from the working directory when `--config` is not given.
const DEFAULT_CONFIG: &str = "flemma.toml";

/// The global `--config` and `--set` arguments.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) config: Option<PathBuf>,
    pub(crate) sets: Vec<String>,
}

impl Settings {
    /// Defaults, then the options file (given, or `./flemma.toml` when present), then `--set`.
    /// `./flemma.toml` (loaded or not, present or not) and the `--config` file are read-only for tools
    /// ([`Config::protected_files`]).
    pub(crate) fn load(&self) -> Result<Config, Failure> {
        let mut config = Config::new();
        // Tools may not create or change `./flemma.toml`, loaded or not: the next run without
        // `--config` would load it.
        config.protect_file(Path::new(DEFAULT_CONFIG));
        let file = match &self.config {
            Some(path) => Some(path.clone()),
            None => Some(PathBuf::from(DEFAULT_CONFIG)).filter(|p| p.is_file()),
        };
        if let Some(file) = file {
            config
                .load_toml_file(&file)
                .map_err(|e| Failure::usage(e.into()))?;
        }
        for set in &self.sets {
            let (key, value) = set.split_once('=').ok_or_else(|| {
                Failure::usage(anyhow::anyhow!("--set {set:?}: expected KEY=VALUE"))
            })?;
            let value = serde_json::from_str(value)
                .unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
            config.set(Layer::Runtime, key, value).map_err(|e| {
                Failure::usage(anyhow::Error::new(e).context(format!("--set {set:?}")))
            })?;
        }
        Ok(config)
    }
}

/// Evaluates the document's frontmatter into the FRONTMATTER layer and returns its template
/// variables.
pub(crate) fn apply_frontmatter(
    config: &mut Config,
    doc: &Document,
) -> Result<serde_json::Map<String, serde_json::Value>, FrontmatterError> {
    match &doc.frontmatter {
        Some(fm) => config.apply_frontmatter(&fm.language, &fm.code, fm.span.start_line + 1),
        None => Ok(serde_json::Map::new()),
    }
}

/// A frontmatter error's message followed by its causes, joined by `: ` as the CLI prints
/// errors.
pub(crate) fn describe(error: &FrontmatterError) -> String {
    let mut text = error.message.clone();
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}

/// A frontmatter error as a failed command: `FILE:LINE: message: cause`.
pub(crate) fn frontmatter_failure(name: &str, error: &FrontmatterError) -> Failure {
    failed(anyhow::anyhow!(
        "{name}:{}: {}",
        error.line,
        describe(error)
    ))
}

/// Where an option diagnostic points, as the command names it: `FILE:LINE` in the
/// transcript's frontmatter, `PATH:LINE` (or `PATH`) in an options file, `--set` for the
/// command line, else the transcript `name`.
pub(crate) fn place(name: &str, diagnostic: &OptionDiagnostic) -> String {
    match &diagnostic.origin {
        Some(Origin::Frontmatter { line }) => format!("{name}:{line}"),
        Some(Origin::File {
            path,
            line: Some(line),
        }) => format!("{}:{line}", path.display()),
        Some(Origin::File { path, line: None }) => path.display().to_string(),
        Some(Origin::Layer(Layer::Runtime)) => "--set".to_owned(),
        _ => name.to_owned(),
    }
}

/// The diagnostic's kind in `flemma check`: `frontmatter` for what the transcript wrote,
/// `options` for the options file and the command line.
pub(crate) fn kind(diagnostic: &OptionDiagnostic) -> &'static str {
    match diagnostic.origin {
        Some(Origin::Frontmatter { .. }) => "frontmatter",
        _ => "options",
    }
}

/// Option errors as a failed command (exit 1): `PLACE: message`, one line each.
pub(crate) fn options_failure(name: &str, errors: &[OptionDiagnostic]) -> Failure {
    let lines: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", place(name, e), e.issue))
        .collect();
    // `main` prints the first line's `flemma: `; each further error is its own line.
    failed(anyhow::anyhow!("{}", lines.join("\nflemma: ")))
}

/// Prints option warnings on stderr, `PLACE: warning: message`, one line each.
pub(crate) fn warn<'a>(name: &str, warnings: impl IntoIterator<Item = &'a OptionDiagnostic>) {
    use std::io::Write as _;
    let mut stderr = std::io::stderr().lock();
    for warning in warnings {
        let _ = writeln!(
            stderr,
            "{}: warning: {}",
            crate::visible::line(&place(name, warning)),
            crate::visible::text(&warning.issue.to_string())
        );
    }
}

/// The option errors ([`ConfigError::Finalize`]) an error is caused by, if it is.
pub(crate) fn option_errors<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e [OptionDiagnostic]> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(ConfigError::Finalize { errors }) = error.downcast_ref::<ConfigError>() {
            return Some(errors);
        }
        cause = error.source();
    }
    None
}

/// The conversation's options against `registry`, its frontmatter applied: stops on the option
/// errors (exit 1), prints the warnings on stderr.
pub(crate) fn evaluate(
    config: &mut Config,
    registry: &flemma::runtime::ToolRegistry,
    name: &str,
) -> Result<flemma::config::Options, Failure> {
    let evaluation = registry
        .evaluate(config)
        .map_err(|e| failed(anyhow::Error::new(e).context(name.to_owned())))?;
    warn(name, evaluation.warnings());
    let errors: Vec<OptionDiagnostic> = evaluation.errors().cloned().collect();
    if !errors.is_empty() {
        return Err(options_failure(name, &errors));
    }
    Ok(evaluation.options)
}

/// The options of a text as a [`Transcript`](flemma::runtime::transcript::Transcript) of it
/// evaluates them (its frontmatter applied once), with the failures and warnings
/// [`apply_frontmatter`] and [`evaluate`] give.
pub(crate) fn evaluated(
    transcript: &flemma::runtime::transcript::Transcript,
    name: &str,
) -> Result<std::sync::Arc<flemma::runtime::transcript::Evaluated>, Failure> {
    use flemma::runtime::transcript::TranscriptError;
    let runtime = crate::runtime::runtime()?;
    let evaluated = runtime
        .block_on(transcript.evaluated())
        .map_err(|e| match e {
            TranscriptError::Frontmatter(e) => frontmatter_failure(name, &e),
            TranscriptError::Config(e) => failed(anyhow::Error::new(e).context(name.to_owned())),
            other => failed(anyhow::Error::new(other).context(name.to_owned())),
        })?;
    let diagnostics = evaluated.diagnostics();
    warn(
        name,
        diagnostics
            .iter()
            .filter(|d| d.severity() == flemma::ids::Severity::Warning),
    );
    let errors: Vec<OptionDiagnostic> = diagnostics
        .iter()
        .filter(|d| d.severity() == flemma::ids::Severity::Error)
        .cloned()
        .collect();
    if !errors.is_empty() {
        return Err(options_failure(name, &errors));
    }
    Ok(evaluated)
}

/// The conversation id (store paths' `bufnr`, hooks' `session_id`) of the conversation in
/// `chat`, as the executor gives it: the file's stable id; `stdin` for standard input.
pub(crate) fn conversation_id(chat: Option<&Path>) -> String {
    chat.map_or_else(
        || "stdin".to_owned(),
        flemma::runtime::transcript::file_conversation_id,
    )
}

/// A transcript of `text` (read from `path`, if a file) under the CLI's options.
pub(crate) fn transcript(
    text: &str,
    path: Option<&Path>,
    config: Config,
    registry: flemma::runtime::ToolRegistry,
) -> flemma::runtime::transcript::Transcript {
    let mut chat = flemma::runtime::MemoryConversation::new(text);
    if let Some(path) = path {
        chat = chat.with_path(path);
    }
    flemma::runtime::transcript::Transcript::builder(std::sync::Arc::new(chat), registry)
        .config(config)
        .build()
}

/// Runs the registry's chain (the built-in resolvers, and those of the MCP servers) on one
/// call of the conversation in `chat` (resolved), once the registry's sources have registered
/// their tools; for a `bash` call under command rules, also the rules' judgement of each simple
/// command.
pub(crate) fn explain(
    config: &Config,
    registry: &flemma::runtime::ToolRegistry,
    chat: Option<&Path>,
    tool: &str,
    input: &serde_json::Value,
) -> anyhow::Result<(Explanation, Option<flemma::shell::Judgement>)> {
    let options = config.options()?;
    // The real backend check (spec §6.4 condition 6): the selection `sandbox.backend` asks
    // for among the built-in backends, with their availability checks.
    let available = flemma::builtins::sandbox_backends().is_available(&options.sandbox);
    let store = flemma::store::Store::new(&options.tools.store, chat, &conversation_id(chat))?;
    let store_dir = store.directory().ok();
    let workspace = flemma::runtime::transcript::CommandWorkspace::new(
        config,
        &options,
        chat,
        store_dir.as_deref(),
    );
    let ctx = ApprovalContext::new(config, &options)
        .with_tools(registry)
        .with_sandbox(&available)
        .with_workspace(&workspace);
    let tool = ToolName::read(tool)?;
    let call = ToolCall {
        name: &tool,
        input,
        id: None,
    };
    let runtime = crate::runtime::runtime().map_err(|f| {
        f.error
            .unwrap_or_else(|| anyhow::anyhow!("cannot start the runtime"))
    })?;
    // The conversation's own hooks decide too, where its frontmatter added some.
    let conversation = flemma::runtime::hooks::from_frontmatter(config)?;
    let hooks = registry.hooks().with_conversation(&conversation.hooks);
    let explanation = runtime.block_on(async {
        registry.ready().await;
        flemma::runtime::hooks::chain_with_hooks(registry.approval_chain(), &hooks)
            .explain(&call, &ctx)
            .await
    });
    // The rules' own reading of the command, segment by segment (an error is already the
    // resolver's in the explanation).
    let judgement = flemma::approval::BashRulesResolver::default()
        .judge(&call, &ctx)
        .ok()
        .flatten();
    Ok((explanation, judgement))
}

/// The writable set of the conversation in `chat` (resolved; `None` for standard input), as
/// the executor resolves it for `cycle` and `run`.
pub(crate) fn writable(config: &Config, chat: Option<&Path>) -> anyhow::Result<Writable> {
    let options = config.options()?;
    let store = flemma::store::Store::new(&options.tools.store, chat, &conversation_id(chat))?;
    let store_dir = store.directory().ok();
    let policy = flemma::core::sandbox::SandboxPolicy::for_conversation(
        &options.sandbox,
        chat,
        store_dir.as_deref(),
    )
    .protecting(&options.sandbox, config.protected_files());
    let reason = if !options.sandbox.enabled {
        Some("sandbox.enabled is false")
    } else if !flemma::builtins::sandbox_backends().is_available(&options.sandbox) {
        Some(NO_BACKEND)
    } else {
        None
    };
    Ok(Writable {
        enforced: reason.is_none(),
        reason,
        paths: policy.rw_paths,
        read_only: policy.read_only,
    })
}
