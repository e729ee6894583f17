//! The options of a [`Transcript`], evaluated once per revision of the frontmatter, and what
//! follows from them (the result store, the sandbox, the writer's options).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use flemma_ast::Document;
use flemma_ast::writer::WriterOptions;
use flemma_config::{Config, OptionDiagnostic, Options};
use flemma_store::Store;
use serde_json::{Map, Value};

use super::{Transcript, TranscriptError};
use flemma_core::sandbox::{Sandbox, SandboxPolicy};

/// What an evaluation depends on besides the host's layers: the frontmatter (language, code,
/// first line), the registry's tools (by its revision) and whether they are all loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    frontmatter: Option<(String, String, u32)>,
    /// The registry's [`revision`](crate::ToolRegistry::revision).
    tools: u64,
    checked: bool,
}

/// The conversation's options: the host's layers with the frontmatter, evaluated against the
/// registry ([`ToolRegistry::evaluate`](crate::ToolRegistry::evaluate)).
#[derive(Debug)]
pub struct Evaluated {
    /// The host's layers with the frontmatter (the approval chain reads its op logs).
    pub(crate) config: Config,
    pub(crate) options: Arc<Options>,
    /// What is wrong with the names the options give (checked once the registry is ready).
    pub(crate) diagnostics: Vec<OptionDiagnostic>,
    pub(crate) checked: bool,
    /// The frontmatter's template variables.
    pub(crate) variables: Map<String, Value>,
    /// The hooks the frontmatter added (where the host allows it).
    pub(crate) hooks: Arc<Vec<crate::hooks::HookRegistration>>,
    /// The command hooks of the options files (`[hooks]`): every host applies them, whether
    /// or not it registered them itself.
    pub(crate) host_hooks: Arc<Vec<crate::hooks::HookRegistration>>,
}

impl Evaluated {
    /// The host's layers with the frontmatter.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The typed options.
    pub fn options(&self) -> &Arc<Options> {
        &self.options
    }

    /// The frontmatter's template variables.
    pub fn variables(&self) -> &Map<String, Value> {
        &self.variables
    }

    /// The command hooks the conversation's frontmatter added, where the host allows it
    /// ([`hooks::from_frontmatter`](crate::hooks::from_frontmatter)); empty otherwise.
    pub fn conversation_hooks(&self) -> &[crate::hooks::HookRegistration] {
        &self.hooks
    }

    /// The hooks that run for this conversation: `registry`'s, the command hooks of the
    /// options files' `[hooks]` section (those the host did not register under the same name
    /// itself, as the `flemma` CLI does), then the
    /// [`conversation_hooks`](Self::conversation_hooks)
    /// ([`Hooks::with_conversation`](crate::hooks::Hooks::with_conversation)). So every host
    /// of a conversation (a command, an editor, an MCP client, a worker, an application)
    /// runs the hooks its options files define.
    pub fn hooks_with(&self, registry: &crate::hooks::Hooks) -> crate::hooks::Hooks {
        registry
            .merged(&self.host_hooks, false)
            .with_conversation(&self.hooks)
    }

    /// What is wrong with the names the options give (empty while a tool source loads).
    pub fn diagnostics(&self) -> &[OptionDiagnostic] {
        &self.diagnostics
    }

    /// The options' errors, as [`Evaluation::check`](crate::Evaluation::check).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Finalize`](flemma_config::ConfigError::Finalize) with every error.
    pub fn check(&self) -> Result<(), flemma_config::ConfigError> {
        let errors: Vec<OptionDiagnostic> = self
            .diagnostics
            .iter()
            .filter(|d| d.severity() == flemma_ids::Severity::Error)
            .cloned()
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(flemma_config::ConfigError::Finalize { errors })
        }
    }

    /// The evaluation as [`ToolRegistry::evaluate`](crate::ToolRegistry::evaluate) returns
    /// it (a copy).
    pub fn evaluation(&self) -> crate::Evaluation {
        crate::Evaluation {
            options: Options::clone(&self.options),
            diagnostics: self.diagnostics.clone(),
            checked: self.checked,
        }
    }

    /// The writer's options (`editing.compact_headers`).
    pub fn writer(&self) -> WriterOptions {
        WriterOptions {
            compact_headers: self.options.editing.compact_headers,
        }
    }
}

/// What a cycle needs from the options of the moment: the [`Evaluated`] options
/// ([`evaluated`](Self::evaluated)), the conversation's file, the result store and the sandbox.
#[derive(Debug)]
pub struct Settings {
    pub(crate) evaluated: Arc<Evaluated>,
    pub(crate) writer: WriterOptions,
    /// The conversation's file, absolute and resolved ([`flemma_config::conversation_path`]).
    pub(crate) chat: Option<PathBuf>,
    /// The path the conversation gave (the key of `chat`).
    given: Option<PathBuf>,
    pub(crate) store: Option<Arc<Store>>,
    /// The store's directory (`None` when its path format does not render).
    pub(crate) store_dir: Option<PathBuf>,
    pub(crate) sandbox: Sandbox,
    pub(crate) sandbox_available: bool,
    /// Where `bash` commands run, for the command rules.
    pub(crate) workspace: super::CommandWorkspace,
}

impl Settings {
    /// The options as the frontmatter evaluated them, with their diagnostics.
    pub fn evaluated(&self) -> &Evaluated {
        &self.evaluated
    }

    /// Where the conversation's `bash` commands run (for the command rules).
    pub fn workspace(&self) -> &super::CommandWorkspace {
        &self.workspace
    }

    /// The conversation's file, absolute and resolved.
    pub fn chat(&self) -> Option<&std::path::Path> {
        self.chat.as_deref()
    }

    /// The result store.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()
    }

    /// The store's directory, what tools see as `$FLEMMA_TOOLS_STORE_PATH` (`None` when the
    /// store's path format does not render), rendered once with the settings.
    pub fn store_directory(&self) -> Option<&std::path::Path> {
        self.store_dir.as_deref()
    }

    /// The sandbox commands run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Whether a sandbox backend can run here under the options.
    pub fn sandbox_available(&self) -> bool {
        self.sandbox_available
    }
}

impl Transcript {
    /// The conversation's options as they are now: evaluated again only when the
    /// frontmatter's text (or its place) or the registry's tools changed since the last
    /// evaluation, else the same `Arc`. A frontmatter that reads the clock or the environment
    /// sees them as they were at that evaluation.
    ///
    /// # Errors
    ///
    /// [`TranscriptError::Conversation`], [`TranscriptError::Frontmatter`],
    /// [`TranscriptError::Config`] when the options do not evaluate at all (an error is not
    /// kept: the next call evaluates again).
    pub async fn evaluated(&self) -> Result<Arc<Evaluated>, TranscriptError> {
        let frontmatter = self.read(|doc, _| frontmatter_key(doc)).await?;
        self.evaluate(frontmatter)
    }

    /// [`evaluated`](Self::evaluated) with the frontmatter of `doc`, a parse of the
    /// conversation the caller holds: the conversation is not read.
    pub(crate) fn evaluated_in(&self, doc: &Document) -> Result<Arc<Evaluated>, TranscriptError> {
        self.evaluate(frontmatter_key(doc))
    }

    /// The options under `frontmatter` (language, code, first line), from the cache when
    /// nothing they depend on changed.
    fn evaluate(
        &self,
        frontmatter: Option<(String, String, u32)>,
    ) -> Result<Arc<Evaluated>, TranscriptError> {
        // Readiness first: tools read after it are at least as complete.
        let checked = self.registry.is_ready();
        let tools = self.registry.revision();
        let key = Key {
            frontmatter,
            tools,
            checked,
        };
        {
            let cached = self
                .evaluated
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some((cached_key, evaluated)) = cached.as_ref()
                && *cached_key == key
            {
                return Ok(Arc::clone(evaluated));
            }
        }
        let mut config = self.config.clone();
        let variables = match &key.frontmatter {
            Some((language, code, line)) => {
                self.evaluations.fetch_add(1, Ordering::Relaxed);
                config.apply_frontmatter(language, code, *line)?
            }
            None => Map::new(),
        };
        let hooks = match &key.frontmatter {
            Some((_, _, line)) => {
                crate::hooks::from_frontmatter(&config)
                    .map_err(|e| {
                        flemma_config::FrontmatterError::with_source(*line, "invalid hooks", e)
                    })?
                    .hooks
            }
            None => Vec::new(),
        };
        // The options files' hooks, with Claude Code's settings of the conversation's project
        // where they say so.
        let project = self
            .conversation
            .path()
            .map(flemma_config::conversation_path)
            .and_then(|chat| chat.parent().map(flemma_config::project_root))
            .or_else(|| {
                std::env::current_dir()
                    .ok()
                    .map(|dir| flemma_config::project_root(&dir))
            });
        let host_hooks = crate::hooks::from_config(&self.config, project.as_deref())?.hooks;
        let evaluation = self.registry.evaluate(&mut config)?;
        let evaluated = Arc::new(Evaluated {
            hooks: Arc::new(hooks),
            host_hooks: Arc::new(host_hooks),
            config,
            options: Arc::new(evaluation.options),
            diagnostics: evaluation.diagnostics,
            checked: evaluation.checked,
            variables,
        });
        *self
            .evaluated
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((key, Arc::clone(&evaluated)));
        Ok(evaluated)
    }

    /// How many times this transcript evaluated a frontmatter (a host's or a bench's measure
    /// of [`evaluated`](Self::evaluated)'s cache).
    pub fn frontmatter_evaluations(&self) -> u64 {
        self.evaluations.load(Ordering::Relaxed)
    }

    /// The settings of the moment: the [`evaluated`](Self::evaluated) options, the store, the
    /// sandbox and the writer's options; built again only when the options or the
    /// conversation's file changed.
    ///
    /// # Errors
    ///
    /// As [`evaluated`](Self::evaluated); [`TranscriptError::Store`] when the store's path
    /// format does not parse.
    pub async fn settings(&self) -> Result<Arc<Settings>, TranscriptError> {
        let evaluated = self.evaluated().await?;
        self.settings_under(evaluated)
    }

    /// [`settings`](Self::settings) with the frontmatter of `doc`, a parse of the
    /// conversation the caller holds: the conversation is not read.
    pub(crate) fn settings_in(&self, doc: &Document) -> Result<Arc<Settings>, TranscriptError> {
        let evaluated = self.evaluated_in(doc)?;
        self.settings_under(evaluated)
    }

    /// The settings under `evaluated`, from the cache when the options and the
    /// conversation's file are those it was built for.
    fn settings_under(&self, evaluated: Arc<Evaluated>) -> Result<Arc<Settings>, TranscriptError> {
        let given = self.conversation.path().map(std::path::Path::to_path_buf);
        {
            let cached = self.settings.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(settings) = cached.as_ref()
                && Arc::ptr_eq(&settings.evaluated, &evaluated)
                && settings.given == given
            {
                return Ok(Arc::clone(settings));
            }
        }
        let settings = Arc::new(self.settle(evaluated, given)?);
        *self.settings.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&settings));
        Ok(settings)
    }

    /// The store, the sandbox and the writer's options under `evaluated`.
    fn settle(
        &self,
        evaluated: Arc<Evaluated>,
        given: Option<PathBuf>,
    ) -> Result<Settings, TranscriptError> {
        let options = &evaluated.options;
        // The one place the conversation's file is resolved for a cycle: the tools' working
        // directory and paths, the store and the sandbox's writable set all start from it.
        let chat = given.as_deref().map(flemma_config::conversation_path);
        let mut store = Store::new(&options.tools.store, chat.as_deref(), &self.conversation_id)?;
        if let Some(writes) = self.conversation.store_writes() {
            store = store.with_writes(writes);
        }
        let sandbox_available = self.sandbox.is_available(&options.sandbox);
        // The policy is resolved with the sandbox off too: its read-only files (the
        // conversation's, the options files loaded) hold either way.
        let store_dir = store.directory().ok();
        let policy = SandboxPolicy::for_conversation(
            &options.sandbox,
            chat.as_deref(),
            store_dir.as_deref(),
        )
        .protecting(&options.sandbox, evaluated.config.protected_files());
        let workspace = super::CommandWorkspace::with_policy(options, chat.as_deref(), &policy);
        let sandbox = self.sandbox.sandbox(&options.sandbox, policy);
        Ok(Settings {
            writer: evaluated.writer(),
            evaluated,
            chat,
            given,
            store: Some(Arc::new(store)),
            store_dir,
            sandbox,
            sandbox_available,
            workspace,
        })
    }

    /// The conversation's store directory under `options` (what tools see as
    /// `$FLEMMA_TOOLS_STORE_PATH`); `None` when the store's path format does not render.
    pub fn store_directory(&self, options: &Options) -> Option<PathBuf> {
        // The settings of these options know it already.
        if let Some(settings) = self
            .settings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            && std::ptr::eq(Arc::as_ptr(&settings.evaluated.options), options)
            && settings.given.as_deref() == self.conversation.path()
        {
            return settings.store_dir.clone();
        }
        // Resolved as the settings resolve it, so both give the one directory.
        let chat = self
            .conversation
            .path()
            .map(flemma_config::conversation_path);
        Store::new(&options.tools.store, chat.as_deref(), &self.conversation_id)
            .ok()?
            .directory()
            .ok()
    }
}

/// What an evaluation reads of a document: its frontmatter's language, code and first line.
fn frontmatter_key(doc: &Document) -> Option<(String, String, u32)> {
    doc.frontmatter
        .as_ref()
        .map(|fm| (fm.language.clone(), fm.code.clone(), fm.span.start_line + 1))
}
