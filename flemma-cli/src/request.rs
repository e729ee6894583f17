//! `flemma request`: the exact request body a provider would receive for a file.

use std::io::Write;
use std::path::Path;

use crate::failure::{Failure, failed};
use crate::input::Input;
use crate::setup::{TemplatesArg, template_engine};
use crate::{options, tools};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ProviderArg {
    Anthropic,
    Openai,
    OpenaiChat,
    Vertex,
}

/// `flemma request`: the body a provider would receive, built from the file, its frontmatter
/// and the options; the tools are offered as `flemma tools` lists them (the built-in tools
/// and the MCP servers' once they listed theirs, as the conversation's `tools` operations
/// change them; a misspelled name stops the command). Templates and `@./file` references are rendered; the body is printed
/// even when a template fails, and the exit code is then 1.
pub(crate) fn request(
    out: &mut impl Write,
    file: &Path,
    provider: ProviderArg,
    model: Option<String>,
    templates: Option<TemplatesArg>,
    settings: &options::Settings,
) -> Result<u8, Failure> {
    use flemma::providers::{PromptBuilder, ProviderKind, RequestOptions};
    let input = Input::read(file)?;
    let config = settings.load()?;
    // Once the MCP servers listed their tools: the tool set `flemma tools` and a run offer.
    let registry = crate::setup::ready_registry(&config)?;
    crate::setup::subagents(&registry, Some(file))?;
    // One parse and one evaluation of the frontmatter, as a session's transcript has them.
    let transcript = options::transcript(&input.text, input.path(), config, registry.clone());
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
    let id = options::conversation_id(input.path());
    let store = flemma::store::Store::new(&opts.tools.store, input.path(), &id)
        .and_then(|store| store.directory())
        .ok();
    builder = builder.file_access(flemma::providers::FileAccess::from_options(
        &opts.templates,
        store.as_deref(),
    ));
    let (doc, _) = crate::runtime::runtime()?
        .block_on(transcript.document())
        .map_err(|e| failed(e.into()))?;
    let prompt = builder.build(&doc);
    // A call in progress (or whose host died) would be sent as an empty result.
    if input.path().is_some() {
        for d in tools::in_progress_diagnostics(file, &doc, settings) {
            let _ = writeln!(
                std::io::stderr(),
                "{}:{}: warning: {}",
                crate::visible::line(&input.name),
                d.line,
                crate::visible::text(&d.message)
            );
        }
    }
    for d in &prompt.diagnostics {
        let _ = writeln!(
            std::io::stderr(),
            "{}:{}: {}: {}",
            crate::visible::line(&input.name),
            d.line,
            d.severity.as_str(),
            crate::visible::text(&d.message)
        );
    }
    let body = kind.request(&prompt, &request_options);
    writeln!(out, "{body}")?;
    // `flemma run` would send nothing: say so, as it does.
    let empty = prompt.messages.is_empty();
    if empty {
        let _ = writeln!(
            std::io::stderr(),
            "{}: error: {}",
            crate::visible::line(&input.name),
            flemma::runtime::SessionError::NothingToSend
        );
    }
    Ok(u8::from(prompt.has_errors() || empty))
}
