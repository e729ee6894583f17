//! The message loop: one message at a time, in the order the client sent them, so that every
//! edit reaches the parser before the next request reads it.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, Notification as _,
    PublishDiagnostics,
};
use lsp_types::request::{
    ApplyWorkspaceEdit, CodeActionRequest, CodeLensRequest, DocumentSymbolRequest, ExecuteCommand,
    FoldingRangeRequest, GotoDefinition, HoverRequest, References, Request as _,
};
use lsp_types::{
    CodeActionProviderCapability, CodeLensOptions, DocumentSymbolResponse, ExecuteCommandOptions,
    FoldingRangeProviderCapability, GotoDefinitionResponse, HoverProviderCapability,
    InitializeResult, OneOf, PublishDiagnosticsParams, ServerCapabilities, ServerInfo,
    TextDocumentSyncCapability, TextDocumentSyncKind, Uri,
};
use serde::de::DeserializeOwned;

use crate::LspError;
use crate::actions::{self, Action};
use crate::document::OpenDocument;
use crate::hover::JobStatus;
use crate::link::{self, Link};
use crate::{navigation, outline};

/// How the server behaves.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServerOptions {
    /// How long after the last change of a document its diagnostics are published (default
    /// 50 ms): a burst of keystrokes is published once. Opening a document publishes at once.
    pub debounce: Duration,
    /// Where a hover on a tool result with `job=` reads the job's state (default: none; the
    /// hover then says whether its Job Result is in the document).
    pub jobs: Option<std::sync::Arc<dyn JobStatus>>,
    /// The options below the conversations' frontmatters (the host's `flemma.toml`, its
    /// `--set`s): what a frontmatter is evaluated against (default: the built-in defaults).
    pub config: Option<flemma_config::Config>,
    /// The host's tools: the names the options may give (unknown tools, "did you mean"),
    /// the schemas tool inputs are checked against, the descriptions a hover shows (default:
    /// none: those checks are not made).
    pub registry: Option<flemma_runtime::ToolRegistry>,
    /// How often the journals of open documents that name jobs are read, so that a job
    /// finishing in another process refreshes their diagnostics (default 1 s; `None`: never).
    pub journal_poll: Option<Duration>,
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("debounce", &self.debounce)
            .field("jobs", &self.jobs.is_some())
            .field("config", &self.config.is_some())
            .field("registry", &self.registry.is_some())
            .field("journal_poll", &self.journal_poll)
            .finish()
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(50),
            jobs: None,
            config: None,
            registry: None,
            journal_poll: Some(Duration::from_secs(1)),
        }
    }
}

impl ServerOptions {
    /// Sets [`debounce`](Self::debounce).
    #[must_use]
    pub fn debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Sets [`config`](Self::config).
    #[must_use]
    pub fn config(mut self, config: flemma_config::Config) -> Self {
        self.config = Some(config);
        self
    }

    /// Sets [`registry`](Self::registry).
    #[must_use]
    pub fn registry(mut self, registry: flemma_runtime::ToolRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// Sets [`journal_poll`](Self::journal_poll).
    #[must_use]
    pub fn journal_poll(mut self, every: Option<Duration>) -> Self {
        self.journal_poll = every;
        self
    }

    /// Sets [`jobs`](Self::jobs).
    #[must_use]
    pub fn jobs(mut self, jobs: std::sync::Arc<dyn JobStatus>) -> Self {
        self.jobs = Some(jobs);
        self
    }
}

/// What the server offers: incremental text sync, document symbols, folding ranges.
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(
            TextDocumentSyncKind::INCREMENTAL,
        )),
        document_symbol_provider: Some(OneOf::Left(true)),
        folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        completion_provider: Some(lsp_types::CompletionOptions {
            trigger_characters: Some(vec!["\"".to_owned(), "$".to_owned()]),
            ..lsp_types::CompletionOptions::default()
        }),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
        code_lens_provider: Some(CodeLensOptions {
            resolve_provider: Some(false),
        }),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: actions::COMMANDS.map(str::to_owned).to_vec(),
            ..ExecuteCommandOptions::default()
        }),
        ..ServerCapabilities::default()
    }
}

/// The language server of `.chat` documents on one connection.
#[derive(Debug)]
pub struct Server {
    options: ServerOptions,
    documents: HashMap<Uri, OpenDocument>,
    /// Documents whose diagnostics are due, and when.
    due: BTreeMap<String, (Uri, Instant)>,
    /// The id of the next request the server sends.
    next_request: i32,
    /// The diagnostics beyond the parser's.
    checks: crate::checks::Checks,
    /// A current-thread runtime for the approval chain and the journal (`None`: it could not
    /// be built).
    runtime: std::sync::OnceLock<Option<tokio::runtime::Runtime>>,
    /// The journal of each open document that names jobs, as last read.
    journals: HashMap<String, (std::path::PathBuf, crate::jobs::States)>,
    /// When the journal watch reads the journals next.
    next_poll: Option<Instant>,
    /// Where running cycles send what they left.
    cycles: (
        crossbeam_channel::Sender<crate::cycle::Finished>,
        crossbeam_channel::Receiver<crate::cycle::Finished>,
    ),
}

impl Server {
    /// A server with `options` and no open document.
    pub fn new(options: ServerOptions) -> Self {
        Self {
            documents: HashMap::new(),
            due: BTreeMap::new(),
            next_request: 0,
            runtime: std::sync::OnceLock::new(),
            journals: HashMap::new(),
            next_poll: None,
            cycles: crossbeam_channel::unbounded(),
            checks: crate::checks::Checks::new(
                options.config.clone().unwrap_or_default(),
                options.registry.clone(),
            ),
            options,
        }
    }

    /// The open document `uri`.
    pub fn document(&self, uri: &Uri) -> Option<&OpenDocument> {
        self.documents.get(uri)
    }

    /// Runs the protocol on `connection` (in memory: a test's, or a host's own transport):
    /// the `initialize` handshake, then every message in order until `shutdown` and `exit`.
    ///
    /// # Errors
    ///
    /// [`LspError::Disconnected`] when the client goes away without `shutdown`,
    /// [`LspError::ExitWithoutShutdown`], [`LspError::Send`] when a message cannot be sent.
    pub fn run(self, connection: &Connection) -> Result<(), LspError> {
        link::over_connection(connection, |link| self.serve(&link))
    }

    /// The protocol on `link`.
    pub(crate) fn serve(mut self, link: &Link) -> Result<(), LspError> {
        Self::initialize(link)?;
        loop {
            // The client's next message, a cycle that ended, or the next deadline.
            let wait = self
                .next_deadline()
                .map(|at| at.saturating_duration_since(Instant::now()));
            let message = crossbeam_channel::select! {
                recv(link.receiver) -> message => message.map_err(|_| LspError::Disconnected)?,
                recv(self.cycles.1) -> finished => {
                    if let Ok(finished) = finished {
                        self.cycle_finished(link, finished)?;
                    }
                    continue;
                }
                // Nothing due: wake once a day to look (there is nothing to do then).
                default(wait.unwrap_or(Duration::from_secs(86_400))) => {
                    let now = Instant::now();
                    self.publish_due(link, now)?;
                    if self.next_poll.is_some_and(|at| at <= now) {
                        self.poll_journals(link)?;
                    }
                    continue;
                }
            };
            match message {
                Message::Request(request) => {
                    if request.method == "shutdown" {
                        link.result(request.id, &serde_json::Value::Null)?;
                        return Self::await_exit(link);
                    }
                    if request.method == ExecuteCommand::METHOD {
                        self.execute(link, request)?;
                        continue;
                    }
                    self.request(link, request)?;
                }
                Message::Notification(notification) => {
                    if notification.method == "exit" {
                        // `exit` without `shutdown` first (the protocol's exit code 1).
                        return Err(LspError::ExitWithoutShutdown);
                    }
                    self.notification(link, notification)?;
                }
                Message::Response(_) => {}
            }
        }
    }

    /// The handshake: requests before `initialize` are refused (`ServerNotInitialized`),
    /// notifications dropped (`exit` ends the server).
    fn initialize(link: &Link) -> Result<(), LspError> {
        loop {
            match link.receiver.recv().map_err(|_| LspError::Disconnected)? {
                Message::Request(request) if request.method == "initialize" => {
                    let result = InitializeResult {
                        capabilities: capabilities(),
                        server_info: Some(ServerInfo {
                            name: "flemma-lsp".to_owned(),
                            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
                        }),
                    };
                    return link.result(request.id, &result);
                }
                Message::Request(request) => link.error(
                    request.id,
                    ErrorCode::ServerNotInitialized,
                    "the server is not initialized".to_owned(),
                )?,
                Message::Notification(n) if n.method == "exit" => {
                    return Err(LspError::ExitWithoutShutdown);
                }
                Message::Notification(_) | Message::Response(_) => {}
            }
        }
    }

    /// After `shutdown`: waits for `exit` (requests are refused meanwhile); a client that
    /// closes the connection instead is done too.
    fn await_exit(link: &Link) -> Result<(), LspError> {
        loop {
            match link.receiver.recv_timeout(Duration::from_secs(30)) {
                Ok(Message::Notification(n)) if n.method == "exit" => return Ok(()),
                Ok(Message::Request(request)) => {
                    link.error(
                        request.id,
                        ErrorCode::InvalidRequest,
                        "the server is shut down".to_owned(),
                    )?;
                }
                Ok(_) => {}
                Err(_) => return Ok(()),
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let poll = (!self.journals.is_empty())
            .then_some(self.next_poll)
            .flatten();
        self.due.values().map(|(_, at)| *at).chain(poll).min()
    }

    /// The server's current-thread runtime (`None` when it cannot be built).
    fn runtime(&self) -> Option<&tokio::runtime::Runtime> {
        self.runtime
            .get_or_init(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()
            })
            .as_ref()
    }

    /// The journal of the document `uri` read now: its store directory and its jobs (`None`
    /// when the document names no job or its options do not evaluate).
    fn read_journal(&mut self, uri: &Uri) -> Option<(std::path::PathBuf, crate::jobs::States)> {
        let doc = self.documents.get(uri)?;
        if !crate::jobs::names_jobs(doc.document()) {
            return None;
        }
        let evaluated = self.checks.evaluated(uri.as_str(), doc.document())?;
        let dir = crate::jobs::store_dir(&evaluated, uri)?;
        let states = crate::jobs::read(self.runtime()?, &dir);
        Some((dir, states))
    }

    /// The journal watch: reads the journal of each document that names jobs, and publishes
    /// its diagnostics again where a job's state changed (a job that finished in another
    /// process).
    fn poll_journals(&mut self, link: &Link) -> Result<(), LspError> {
        let Some(every) = self.options.journal_poll else {
            return Ok(());
        };
        self.next_poll = Some(Instant::now() + every);
        let uris: Vec<Uri> = self
            .documents
            .keys()
            .filter(|uri| self.journals.contains_key(uri.as_str()))
            .cloned()
            .collect();
        for uri in uris {
            let fresh = self.read_journal(&uri);
            let kept = self.journals.get(uri.as_str());
            let state_of =
                |states: &crate::jobs::States| -> Vec<(String, flemma_core::jobs::JobState)> {
                    states
                        .iter()
                        .map(|(id, job)| (id.clone(), job.state))
                        .collect()
                };
            let changed = match (&fresh, kept) {
                (Some((_, new)), Some((_, old))) => state_of(new) != state_of(old),
                (None, None) => false,
                _ => true,
            };
            if changed {
                match fresh {
                    Some(journal) => self.journals.insert(uri.as_str().to_owned(), journal),
                    None => self.journals.remove(uri.as_str()),
                };
                self.publish(link, &uri)?;
            }
        }
        Ok(())
    }

    /// Publishes the diagnostics of every document due by `now`.
    fn publish_due(&mut self, link: &Link, now: Instant) -> Result<(), LspError> {
        let due: Vec<Uri> = self
            .due
            .values()
            .filter(|(_, at)| *at <= now)
            .map(|(uri, _)| uri.clone())
            .collect();
        for uri in due {
            self.due.remove(uri.as_str());
            self.publish(link, &uri)?;
        }
        Ok(())
    }

    /// Publishes the diagnostics of `uri` now (none for a document that is not open).
    fn publish(&mut self, link: &Link, uri: &Uri) -> Result<(), LspError> {
        // The journal is read when a document first names a job; the watch reads it again.
        let names_jobs = self
            .documents
            .get(uri)
            .is_some_and(|doc| crate::jobs::names_jobs(doc.document()));
        if !names_jobs {
            self.journals.remove(uri.as_str());
        } else if !self.journals.contains_key(uri.as_str())
            && let Some(journal) = self.read_journal(uri)
        {
            self.journals.insert(uri.as_str().to_owned(), journal);
            if self.next_poll.is_none() {
                self.next_poll = self
                    .options
                    .journal_poll
                    .map(|every| Instant::now() + every);
            }
        }
        let (diagnostics, version) = if let Some(doc) = self.documents.get(uri) {
            let mut diagnostics = outline::diagnostics(doc);
            let mut found =
                self.checks
                    .run(uri.as_str(), doc.document(), doc.parser().tool_index());
            if let Some((_, states)) = self.journals.get(uri.as_str()) {
                crate::jobs::diagnostics(doc.document(), states, &mut found);
            }
            diagnostics.extend(outline::to_protocol(doc, &found));
            (diagnostics, Some(doc.version()))
        } else {
            self.checks.forget(uri.as_str());
            self.journals.remove(uri.as_str());
            (Vec::new(), None)
        };
        let params = PublishDiagnosticsParams {
            uri: uri.clone(),
            diagnostics,
            version,
        };
        send(
            link,
            Message::Notification(Notification::new(
                PublishDiagnostics::METHOD.to_owned(),
                params,
            )),
        )
    }

    fn notification(&mut self, link: &Link, notification: Notification) -> Result<(), LspError> {
        match notification.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let Ok(params) =
                    params::<lsp_types::DidOpenTextDocumentParams>(notification.params)
                else {
                    return Ok(());
                };
                let doc = params.text_document;
                self.documents
                    .insert(doc.uri.clone(), OpenDocument::new(doc.text, doc.version));
                self.due.remove(doc.uri.as_str());
                self.publish(link, &doc.uri)
            }
            DidChangeTextDocument::METHOD => {
                let Ok(params) =
                    params::<lsp_types::DidChangeTextDocumentParams>(notification.params)
                else {
                    return Ok(());
                };
                let uri = params.text_document.uri;
                let Some(doc) = self.documents.get_mut(&uri) else {
                    return Ok(());
                };
                if let Err(error) = doc.apply(params.content_changes, params.text_document.version)
                {
                    // The client's text and ours differ from here: say so; the next full
                    // change (or reopening) brings them together again.
                    show_error(link, &format!("{}: {error}", uri.as_str()))?;
                }
                let at = Instant::now() + self.options.debounce;
                self.due.insert(uri.as_str().to_owned(), (uri, at));
                Ok(())
            }
            DidCloseTextDocument::METHOD => {
                let Ok(params) =
                    params::<lsp_types::DidCloseTextDocumentParams>(notification.params)
                else {
                    return Ok(());
                };
                let uri = params.text_document.uri;
                self.documents.remove(&uri);
                self.due.remove(uri.as_str());
                // Clears what the client shows for it.
                self.publish(link, &uri)
            }
            _ => Ok(()),
        }
    }

    /// Answers one request.
    fn request(&mut self, link: &Link, request: Request) -> Result<(), LspError> {
        let id = request.id.clone();
        match request.method.as_str() {
            DocumentSymbolRequest::METHOD => self
                .with_document::<lsp_types::DocumentSymbolParams, _>(link, request, |doc, _| {
                    Some(DocumentSymbolResponse::Nested(outline::document_symbols(
                        doc,
                    )))
                }),
            FoldingRangeRequest::METHOD => {
                self.with_document::<lsp_types::FoldingRangeParams, _>(link, request, |doc, _| {
                    Some(outline::folding_ranges(doc))
                })
            }
            HoverRequest::METHOD => self.hover(link, request),
            lsp_types::request::Completion::METHOD => self.completion(link, request),
            GotoDefinition::METHOD => self.with_document::<lsp_types::GotoDefinitionParams, _>(
                link,
                request,
                |doc, params| {
                    let p = &params.text_document_position_params;
                    let found = navigation::definition(doc, &p.text_document.uri, p.position);
                    (!found.is_empty()).then_some(GotoDefinitionResponse::Array(found))
                },
            ),
            References::METHOD => {
                self.with_document::<lsp_types::ReferenceParams, _>(link, request, |doc, params| {
                    let p = &params.text_document_position;
                    Some(navigation::references(
                        doc,
                        &p.text_document.uri,
                        p.position,
                    ))
                })
            }
            CodeActionRequest::METHOD => self.with_document::<lsp_types::CodeActionParams, _>(
                link,
                request,
                |doc, params| {
                    Some(actions::code_actions(
                        doc,
                        &params.text_document.uri,
                        params.range,
                    ))
                },
            ),
            CodeLensRequest::METHOD => {
                self.with_document::<lsp_types::CodeLensParams, _>(link, request, |doc, params| {
                    Some(actions::code_lenses(doc, &params.text_document.uri))
                })
            }
            other => link.error(
                id,
                ErrorCode::MethodNotFound,
                format!("unhandled method {other}"),
            ),
        }
    }

    /// `textDocument/hover`, with the approval chain's explanation of a Tool Use.
    fn hover(&mut self, link: &Link, request: Request) -> Result<(), LspError> {
        let id = request.id.clone();
        let params: lsp_types::HoverParams = match params(request.params) {
            Ok(params) => params,
            Err(error) => {
                return link.error(id, ErrorCode::InvalidParams, error.to_string());
            }
        };
        let p = &params.text_document_position_params;
        let uri = &p.text_document.uri;
        // The jobs' states as the journal says them now (a hover shows the elapsed time).
        let journal = self.read_journal(uri).map(|(_, states)| states);
        let evaluated = match self.documents.get(uri) {
            Some(doc) => self.checks.evaluated(uri.as_str(), doc.document()),
            None => None,
        };
        // Which files the conversation's references may read (`templates.file_access`).
        let chat = crate::navigation::uri_path(uri).map(|p| flemma_config::conversation_path(&p));
        let access = evaluated.as_deref().map(|e| {
            let store = crate::jobs::store_dir(e, uri);
            flemma_providers::FileAccess::from_options(&e.options.templates, store.as_deref())
        });
        let Some(doc) = self.documents.get(uri) else {
            return link.result(id, &None::<lsp_types::Hover>);
        };
        let registry = self.options.registry.as_ref();
        let runtime = self.runtime();
        let explain = |tool_use: &flemma_ast::ToolUse| -> String {
            match (registry, evaluated.as_deref(), runtime) {
                (Some(registry), Some(evaluated), Some(runtime)) => crate::explain::explain(
                    runtime,
                    registry,
                    evaluated,
                    &flemma_runtime::transcript::CommandWorkspace::new(
                        &evaluated.config,
                        &evaluated.options,
                        chat.as_deref(),
                        crate::jobs::store_dir(evaluated, uri).as_deref(),
                    ),
                    &tool_use.name,
                    &tool_use.id,
                    &serde_json::Value::Object(tool_use.input().clone()),
                ),
                _ => "unknown: the conversation's options do not evaluate".to_owned(),
            }
        };
        let host = crate::hover::Host {
            access: access.as_ref().zip(chat.as_deref()),
            jobs: self.options.jobs.as_deref(),
            journal: journal.as_ref(),
            registry,
            explain: registry.map(|_| &explain as &dyn Fn(&flemma_ast::ToolUse) -> String),
        };
        let hover = crate::hover::hover(doc, &p.text_document.uri, p.position, &host);
        link.result(id, &hover)
    }

    /// `textDocument/completion`: tool names and presets in the frontmatter.
    fn completion(&self, link: &Link, request: Request) -> Result<(), LspError> {
        let tools: Vec<String> = self
            .options
            .registry
            .as_ref()
            .map(|r| r.names().iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        let presets: Vec<String> = match &self.options.config {
            Some(config) => config.presets().names().map(str::to_owned).collect(),
            None => flemma_config::Config::new()
                .presets()
                .names()
                .map(str::to_owned)
                .collect(),
        };
        self.with_document::<lsp_types::CompletionParams, _>(link, request, |doc, params| {
            let p = &params.text_document_position;
            Some(crate::complete::completions(
                doc, p.position, &tools, &presets,
            ))
        })
    }

    /// Answers a request about one document with `answer` (`null` when the document is not
    /// open).
    fn with_document<P, R>(
        &self,
        link: &Link,
        request: Request,
        answer: impl FnOnce(&OpenDocument, &P) -> Option<R>,
    ) -> Result<(), LspError>
    where
        P: DeserializeOwned + HasDocument,
        R: serde::Serialize,
    {
        let id = request.id.clone();
        let params: P = match params(request.params) {
            Ok(params) => params,
            Err(error) => {
                return link.error(id, ErrorCode::InvalidParams, error.to_string());
            }
        };
        let result = self
            .documents
            .get(params.uri())
            .and_then(|doc| answer(doc, &params));
        link.result(id, &result)
    }
}

impl Server {
    /// `workspace/executeCommand`: the action's edit sent to the client as
    /// `workspace/applyEdit` (the client applies it and sends the change back), then the
    /// answer; an action that cannot apply is an error answer with its text.
    fn execute(&mut self, link: &Link, request: Request) -> Result<(), LspError> {
        let id = request.id.clone();
        let params: lsp_types::ExecuteCommandParams = match params(request.params) {
            Ok(params) => params,
            Err(error) => return link.error(id, ErrorCode::InvalidParams, error.to_string()),
        };
        if params.command == actions::CYCLE {
            let started = self.start_cycle(&params.arguments);
            return match started {
                Ok(()) => link.result(id, &serde_json::Value::Null),
                Err(text) => link.error(id, ErrorCode::RequestFailed, text),
            };
        }
        let edit = Action::from_command(&params.command, &params.arguments)
            .ok_or_else(|| format!("unknown command or arguments: {}", params.command))
            .and_then(|(uri, action)| {
                let doc = self
                    .documents
                    .get(&uri)
                    .ok_or_else(|| format!("{} is not open", uri.as_str()))?;
                let edit = actions::action_edit(doc, &action)?;
                // The person's approval, recorded before the client's text says `(approved)`.
                actions::record_approval(doc, &uri, &action)?;
                Ok((uri, edit))
            });
        match edit {
            Ok((uri, edit)) => {
                self.apply_edit(link, &params.command, actions::workspace_edit(&uri, edit))?;
                send(
                    link,
                    Message::Response(Response::new_ok(id, serde_json::Value::Null)),
                )
            }
            Err(text) => link.error(id, ErrorCode::RequestFailed, text),
        }
    }
}

impl Server {
    /// Starts the cycle `flemma.cycle [uri]` asks for, on the document's text as it is now.
    fn start_cycle(&mut self, arguments: &[serde_json::Value]) -> Result<(), String> {
        let uri: Uri = arguments
            .first()
            .and_then(serde_json::Value::as_str)
            .and_then(|u| u.parse().ok())
            .ok_or_else(|| format!("{}: expected [uri]", actions::CYCLE))?;
        let doc = self
            .documents
            .get(&uri)
            .ok_or_else(|| format!("{} is not open", uri.as_str()))?;
        let registry =
            self.options.registry.clone().ok_or_else(|| {
                "the server has no tools to run (ServerOptions::registry)".to_owned()
            })?;
        let chat = navigation::uri_path(&uri)
            .map(|p| flemma_config::conversation_path(&p))
            .ok_or_else(|| {
                format!(
                    "{} is not a file: a cycle needs the conversation's directory",
                    uri.as_str()
                )
            })?;
        crate::cycle::spawn(
            crate::cycle::Job {
                uri: uri.clone(),
                version: doc.version(),
                text: doc.text().to_owned(),
                chat,
                config: self.options.config.clone().unwrap_or_default(),
                registry,
            },
            self.cycles.0.clone(),
        );
        Ok(())
    }

    /// A cycle ended: its changes go to the client as one edit of the version it ran on (the
    /// client refuses it when the document changed meanwhile), or its error is shown.
    fn cycle_finished(
        &mut self,
        link: &Link,
        finished: crate::cycle::Finished,
    ) -> Result<(), LspError> {
        let new = match finished.new {
            Ok(new) => new,
            Err(error) => {
                return show_error(link, &format!("{}: {error}", finished.uri.as_str()));
            }
        };
        if new == finished.old {
            return Ok(());
        }
        let lines = crate::LineIndex::new(&finished.old);
        let edit = actions::replacement(&lines, &finished.old, &new);
        let change = lsp_types::TextDocumentEdit {
            text_document: lsp_types::OptionalVersionedTextDocumentIdentifier {
                uri: finished.uri,
                version: Some(finished.version),
            },
            edits: vec![OneOf::Left(edit)],
        };
        let edit = lsp_types::WorkspaceEdit {
            document_changes: Some(lsp_types::DocumentChanges::Edits(vec![change])),
            ..lsp_types::WorkspaceEdit::default()
        };
        self.apply_edit(link, actions::CYCLE, edit)
    }

    /// Asks the client to apply `edit` (`workspace/applyEdit`, labelled `label`).
    fn apply_edit(
        &mut self,
        link: &Link,
        label: &str,
        edit: lsp_types::WorkspaceEdit,
    ) -> Result<(), LspError> {
        self.next_request += 1;
        let apply = lsp_types::ApplyWorkspaceEditParams {
            label: Some(label.to_owned()),
            edit,
        };
        send(
            link,
            Message::Request(Request::new(
                lsp_server::RequestId::from(format!("flemma-{}", self.next_request)),
                ApplyWorkspaceEdit::METHOD.to_owned(),
                apply,
            )),
        )
    }
}

/// The parameters of requests about one document.
pub(crate) trait HasDocument {
    fn uri(&self) -> &Uri;
}

/// [`HasDocument`] for request parameters, by the path of their document's URI.
macro_rules! has_document {
    ($($params:ty => $($field:ident).+;)*) => {
        $(impl HasDocument for $params {
            fn uri(&self) -> &Uri {
                &self.$($field).+
            }
        })*
    };
}

has_document! {
    lsp_types::DocumentSymbolParams => text_document.uri;
    lsp_types::FoldingRangeParams => text_document.uri;
    lsp_types::CompletionParams => text_document_position.text_document.uri;
    lsp_types::GotoDefinitionParams => text_document_position_params.text_document.uri;
    lsp_types::ReferenceParams => text_document_position.text_document.uri;
    lsp_types::CodeActionParams => text_document.uri;
    lsp_types::CodeLensParams => text_document.uri;
}

fn params<P: DeserializeOwned>(value: serde_json::Value) -> Result<P, serde_json::Error> {
    serde_json::from_value(value)
}

fn send(link: &Link, message: Message) -> Result<(), LspError> {
    link.send(message)
}

fn show_error(link: &Link, text: &str) -> Result<(), LspError> {
    let params = lsp_types::ShowMessageParams {
        typ: lsp_types::MessageType::ERROR,
        message: text.to_owned(),
    };
    send(
        link,
        Message::Notification(Notification::new(
            lsp_types::notification::ShowMessage::METHOD.to_owned(),
            params,
        )),
    )
}
