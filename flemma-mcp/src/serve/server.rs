//! The [`ToolServer`]: an rmcp server handler over a conversation's tools, and its builder.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use flemma_config::Config;
use flemma_core::sandbox::SandboxBackends;
use flemma_ids::Severity;
use flemma_runtime::{MemoryConversation, ToolRegistry};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Map, Value};

use super::call;
use super::error::ServeError;
use super::hints::annotations;

/// What the server does with a call the approval chain leaves pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ServeApproval {
    /// Refuse it with an error result (the default: no human is there to decide).
    #[default]
    Refuse,
    /// Approve it and run it (`--approve all`): the client's user decides instead.
    All,
}

/// The suffix of the served calls' conversation: `notes.chat` → `notes.chat.mcp-serve`.
pub const SERVED_SUFFIX: &str = ".mcp-serve";

/// The MCP server of a conversation's tools; cheap to clone (one per HTTP session).
#[derive(Clone)]
pub struct ToolServer {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field("file", &self.inner.file)
            .field("approval", &self.inner.approval)
            .finish_non_exhaustive()
    }
}

pub(super) struct Inner {
    file: Option<PathBuf>,
    pub(super) config: Config,
    pub(super) registry: ToolRegistry,
    pub(super) backends: SandboxBackends,
    pub(super) approval: ServeApproval,
    /// Makes this process's call ids unique among the calls served beside the same file.
    pub(super) stamp: String,
    pub(super) calls: AtomicU64,
}

/// Builds a [`ToolServer`]; see [`ToolServer::builder`].
#[must_use]
pub struct ToolServerBuilder {
    registry: ToolRegistry,
    file: Option<PathBuf>,
    config: Config,
    backends: SandboxBackends,
    approval: ServeApproval,
}

impl std::fmt::Debug for ToolServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServerBuilder")
            .field("file", &self.file)
            .field("approval", &self.approval)
            .finish_non_exhaustive()
    }
}

impl ToolServerBuilder {
    /// The conversation file whose frontmatter shapes the options and whose directory the
    /// tools work in (default: none, the process's working directory and no frontmatter).
    pub fn file(mut self, file: impl Into<PathBuf>) -> Self {
        self.file = Some(file.into());
        self
    }

    /// The options below the frontmatter (defaults, `flemma.toml`, runtime overrides), as an
    /// executor takes them (default: the built-in defaults).
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// The sandbox backends `sandbox.backend` selects from, as
    /// [`ExecutorBuilder::sandbox_backends`](flemma_runtime::ExecutorBuilder::sandbox_backends)
    /// (default: none, so commands run unsandboxed).
    pub fn sandbox_backends(mut self, backends: SandboxBackends) -> Self {
        self.backends = backends;
        self
    }

    /// What happens to calls the chain leaves pending (default [`ServeApproval::Refuse`]).
    pub fn approval(mut self, approval: ServeApproval) -> Self {
        self.approval = approval;
        self
    }

    /// The server.
    pub fn build(self) -> ToolServer {
        let mut config = self.config;
        if let Some(file) = &self.file {
            // The served calls' conversation is beside the file: keep the file itself as
            // protected as it is in a cycle.
            config.protect_file(file);
        }
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        ToolServer {
            inner: Arc::new(Inner {
                file: self.file,
                config,
                registry: self.registry,
                backends: self.backends,
                approval: self.approval,
                stamp: format!("{secs:x}{:x}", std::process::id()),
                calls: AtomicU64::new(0),
            }),
        }
    }
}

impl ToolServer {
    /// Starts a server of the tools of `registry`.
    pub fn builder(registry: ToolRegistry) -> ToolServerBuilder {
        ToolServerBuilder {
            registry,
            file: None,
            config: Config::new(),
            backends: SandboxBackends::new(),
            approval: ServeApproval::default(),
        }
    }

    /// The conversation file, if any.
    pub fn file(&self) -> Option<&Path> {
        self.inner.file.as_deref()
    }

    /// The path of the served calls' conversation: the file's with [`SERVED_SUFFIX`].
    pub fn served_path(&self) -> Option<PathBuf> {
        self.inner.file.as_ref().map(|file| {
            let mut name = file.as_os_str().to_owned();
            name.push(SERVED_SUFFIX);
            PathBuf::from(name)
        })
    }

    /// The served conversation's text: the file's frontmatter (as it is now), then `tail`.
    pub(super) async fn text(&self, tail: &str) -> Result<String, ServeError> {
        let Some(file) = &self.inner.file else {
            return Ok(tail.to_owned());
        };
        let text = tokio::fs::read_to_string(file)
            .await
            .map_err(|source| ServeError::Read {
                path: file.clone(),
                source,
            })?;
        let doc = flemma_ast::parse(&text);
        let mut served = String::new();
        if let Some(frontmatter) = &doc.frontmatter {
            let lines = frontmatter.span.end_line as usize;
            for line in text.split_inclusive('\n').take(lines) {
                served.push_str(line);
            }
            if !served.ends_with('\n') {
                served.push('\n');
            }
            served.push('\n');
        }
        served.push_str(tail);
        Ok(served)
    }

    /// A conversation of `text`, beside the file.
    pub(super) fn conversation(&self, text: String) -> MemoryConversation {
        let chat = MemoryConversation::new(text);
        match self.served_path() {
            Some(path) => chat.with_path(path),
            None => chat,
        }
    }

    /// The tools served now: the conversation's tool set (sorted by name), each with its
    /// schema as the model sees it (without `flemma.background`) and its [`annotations`].
    ///
    /// # Errors
    ///
    /// [`ServeError::Read`] when the file cannot be read, [`ServeError::Executor`] and
    /// [`ServeError::Options`] when its options do not evaluate.
    pub async fn tools(&self) -> Result<Vec<Tool>, ServeError> {
        self.inner.registry.ready().await;
        let text = self.text("").await?;
        let transcript = flemma_runtime::transcript::Transcript::builder(
            Arc::new(self.conversation(text)),
            self.inner.registry.clone(),
        )
        .config(self.inner.config.clone())
        .build();
        let evaluated = transcript
            .evaluated()
            .await
            .map_err(flemma_runtime::ExecutorError::from)?;
        let errors: Vec<String> = evaluated
            .diagnostics()
            .iter()
            .filter(|d| d.severity() == Severity::Error)
            .map(|d| d.issue.to_string())
            .collect();
        if !errors.is_empty() {
            return Err(ServeError::Options(errors.join("; ")));
        }
        let mut tools: Vec<Tool> = self
            .inner
            .registry
            .specs_for_prompt(evaluated.options())
            .into_iter()
            .map(|spec| {
                let mut schema = match spec.input_schema {
                    Value::Object(schema) => schema,
                    _ => Map::new(),
                };
                call::strip_background(&mut schema);
                let tool = Tool::new(spec.name.as_str().to_owned(), spec.description, schema);
                match annotations(spec.name.as_str()) {
                    Some(hints) => tool.with_annotations(hints),
                    None => tool,
                }
            })
            .collect();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(tools)
    }

    /// Runs one call as a cycle runs it and returns its result as an MCP result: the tool's
    /// output, an error result for a failed, denied or refused (pending) call.
    ///
    /// # Errors
    ///
    /// [`ServeError::UnknownTool`] for a tool the conversation does not offer; the errors of
    /// [`ToolServer::tools`]; [`ServeError::Executor`] for a fault of the harness.
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<CallToolResult, ServeError> {
        self.call_cancellable(name, arguments, tokio_util::sync::CancellationToken::new())
            .await
    }

    /// [`ToolServer::call`], cancelled (the call ends as a cancelled tool call does) when
    /// `cancel` is.
    ///
    /// # Errors
    ///
    /// As [`ToolServer::call`].
    pub async fn call_cancellable(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, ServeError> {
        let offered = self.tools().await?;
        if !offered.iter().any(|t| t.name == name) {
            return Err(ServeError::UnknownTool(name.to_owned()));
        }
        call::run(self, name, arguments, cancel).await
    }

    /// Serves over standard input and output until the client closes them.
    ///
    /// # Errors
    ///
    /// [`ServeError::Transport`] when the session does not start or ends abnormally.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let running = rmcp::ServiceExt::serve(self, rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError::Transport(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| ServeError::Transport(e.to_string()))?;
        Ok(())
    }
}

/// A served call's failure as the client sees it.
fn protocol_error(error: &ServeError) -> ErrorData {
    match error {
        ServeError::UnknownTool(_) => ErrorData::invalid_params(error.to_string(), None),
        _ => ErrorData::internal_error(flemma_ids::error_chain(error), None),
    }
}

impl rmcp::ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("flemma", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "flemma's tools for this conversation: bash (sandboxed when the sandbox is on), \
                 read, write, edit, ls, grep, find, as its options enable them. Calls go through \
                 the conversation's approval chain; a call that needs a human's approval is \
                 refused unless the server approves such calls.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools().await.map_err(|e| protocol_error(&e))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        self.call_cancellable(&request.name, arguments, context.ct)
            .await
            .map(CallToolResponse::from)
            .map_err(|e| protocol_error(&e))
    }
}
