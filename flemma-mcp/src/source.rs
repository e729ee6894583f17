//! [`McpServer`]: one server as a [`ToolSource`], and [`McpTool`], one of its tools.

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use flemma_config::GlobList;
use flemma_ids::ToolName;
use flemma_schema::InputSchema;
use flemma_tools::{
    ExecutionContext, Registrar, RegistryError, Tool, ToolDefinition, ToolOutput, ToolRegistry,
    ToolSource,
};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;

use crate::config::McpServerConfig;
use crate::connect::{Client, connect};
use crate::error::{McpError, chain};
use crate::naming::{Assigned, MAX_WIRE_NAME, assign};

/// What a cancelled call answers (spec §15 `tool.aborted`).
const ABORTED: &str = "User aborted tool execution.";

/// Extra time the registry gives a source past its `startup_timeout`, so that the server's
/// own timeout (which names the server) is the one reported.
const REGISTRY_GRACE: Duration = Duration::from_secs(2);

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpServerState {
    /// Not started yet, or starting and listing its tools.
    Starting,
    /// Running; the tools registered, by their registered names.
    Running {
        /// The registered names, sorted.
        tools: Vec<ToolName>,
    },
    /// It did not start, or its listing failed: the error, causes included.
    Failed(String),
}

/// What a server's tools and its handle share.
struct Shared {
    name: String,
    state: RwLock<McpServerState>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    /// A stdio server's process id, once started.
    pid: RwLock<Option<u32>>,
    /// Keeps the connection (and the child process) alive; dropped with the last handle.
    client: tokio::sync::Mutex<Option<Client>>,
}

impl Shared {
    fn set_state(&self, state: McpServerState) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = state;
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A cheap handle on a server added to a registry: its state, for hosts and `flemma mcp list`.
#[derive(Clone)]
pub struct McpServerHandle {
    shared: Arc<Shared>,
}

impl fmt::Debug for McpServerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServerHandle")
            .field("name", &self.shared.name)
            .field("state", &self.state())
            .finish()
    }
}

impl McpServerHandle {
    /// The server's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Where the server is in its life.
    pub fn state(&self) -> McpServerState {
        self.shared
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A stdio server's process id, once it was started.
    pub fn pid(&self) -> Option<u32> {
        *self
            .shared
            .pid
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the server (a stdio server's process is ended); its tools then answer with an
    /// error.
    pub async fn shutdown(&self) {
        self.shared
            .peer
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut client) = self.shared.client.lock().await.take() {
            let _ = client.close().await;
        }
    }
}

/// One MCP server as a [`ToolSource`].
///
/// The server is started when the source is added to a registry
/// ([`ToolRegistry::add_source`], or [`add_servers`]), that is at start-up, not on first
/// use: a request waits for its tools like for every asynchronous source (spec §4.3), so
/// starting early overlaps the server's start with the host's. Its tools are listed (every
/// page) and registered as `SERVER.tool` ([`registered_name`](crate::registered_name)). A
/// server that fails to start, or does not start and list within `startup_timeout`, is
/// reported as `Async tool source failed: MCP server 'NAME': …`; the other sources go on.
pub struct McpServer {
    config: McpServerConfig,
    shared: Arc<Shared>,
    /// A connection the host made itself ([`McpServer::with_peer`]).
    given: Option<Peer<RoleClient>>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A source for `config` (not started until added to a registry).
    pub fn new(config: McpServerConfig) -> Self {
        let shared = Arc::new(Shared {
            name: config.name().to_owned(),
            state: RwLock::new(McpServerState::Starting),
            peer: RwLock::new(None),
            pid: RwLock::new(None),
            client: tokio::sync::Mutex::new(None),
        });
        Self {
            config,
            shared,
            given: None,
        }
    }

    /// A handle on the server, to follow its state after the source moved into a registry.
    pub fn handle(&self) -> McpServerHandle {
        McpServerHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// A source on a connection the host already made with rmcp (any client handler, any
    /// transport): the tools are listed through `peer`, and calls go through it. The
    /// transport fields of `config` are not used; the host keeps its `RunningService` alive
    /// and ends it.
    pub fn with_peer(config: McpServerConfig, peer: Peer<RoleClient>) -> Self {
        let mut server = Self::new(config);
        server.given = Some(peer);
        server
    }

    async fn start(
        &self,
    ) -> Result<(Option<Client>, Peer<RoleClient>, Vec<rmcp::model::Tool>), McpError> {
        let (client, peer) = if let Some(peer) = &self.given {
            (None, peer.clone())
        } else {
            let client = connect(&self.config, &|pid| {
                *self
                    .shared
                    .pid
                    .write()
                    .unwrap_or_else(PoisonError::into_inner) = Some(pid);
            })
            .await?;
            let peer = client.peer().clone();
            (Some(client), peer)
        };
        let tools = peer
            .list_all_tools()
            .await
            .map_err(|source| McpError::List {
                server: self.config.name().to_owned(),
                source: Box::new(source),
            })?;
        Ok((client, peer, tools))
    }

    /// Registers the tools `include`/`exclude` keep; returns their names.
    fn register(&self, registrar: &Registrar, tools: &[rmcp::model::Tool]) -> Vec<ToolName> {
        let include = GlobList::new(&self.config.include);
        let exclude = GlobList::new(&self.config.exclude);
        let kept: Vec<&rmcp::model::Tool> = tools
            .iter()
            .filter(|t| self.config.include.is_empty() || include.is_match(&t.name))
            .filter(|t| !exclude.is_match(&t.name))
            .collect();
        let names: Vec<&str> = kept.iter().map(|t| t.name.as_ref()).collect();
        let mut registered = Vec::new();
        for assigned in assign(self.config.name(), &names) {
            if let Some(note) = &assigned.note {
                registrar.warn(note.clone());
            }
            let Some(tool) = kept.iter().find(|t| t.name == assigned.original.as_str()) else {
                continue;
            };
            match self.tool(tool, &assigned) {
                Ok(tool) => {
                    let wire = tool.definition.spec().wire_name().len();
                    if wire > MAX_WIRE_NAME {
                        registrar.warn(format!(
                            "tool '{}' is {wire} characters on the wire; providers accept {MAX_WIRE_NAME}",
                            assigned.name
                        ));
                    }
                    registered.push(assigned.name.clone());
                    registrar.register(tool);
                }
                Err(reason) => registrar.warn(format!(
                    "tool '{}' skipped: its input schema cannot be used: {reason}",
                    assigned.original
                )),
            }
        }
        registered.sort();
        registered
    }

    fn tool(&self, tool: &rmcp::model::Tool, assigned: &Assigned) -> Result<McpTool, String> {
        let schema = Value::Object((*tool.input_schema).clone());
        if let Some(kind) = schema.get("type")
            && kind != "object"
        {
            return Err(format!("its type is {kind}, not \"object\""));
        }
        flemma_schema::Validator::new(&schema).map_err(|e| e.to_string())?;
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default();
        let mut builder = ToolDefinition::builder_for(assigned.name.clone(), description)
            .input(InputSchema::Raw(schema));
        if let Some(output) = &tool.output_schema {
            builder = builder.output_schema(Value::Object((**output).clone()));
        }
        let definition = builder.build().map_err(|e| e.to_string())?;
        Ok(McpTool {
            definition,
            server_tool: assigned.original.clone(),
            timeout: self.config.tool_timeout,
            shared: Arc::clone(&self.shared),
        })
    }
}

#[async_trait::async_trait]
impl ToolSource for McpServer {
    fn name(&self) -> &str {
        self.config.name()
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.config.startup_timeout + REGISTRY_GRACE)
    }

    async fn resolve(
        &self,
        registrar: Registrar,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let timeout = self.config.startup_timeout;
        let started = match tokio::time::timeout(timeout, self.start()).await {
            Ok(started) => started,
            Err(_) => Err(McpError::StartupTimeout {
                server: self.config.name().to_owned(),
                timeout,
            }),
        };
        let (client, peer, tools) = match started {
            Ok(started) => started,
            Err(error) => {
                let text = chain(&error);
                self.shared.set_state(McpServerState::Failed(text.clone()));
                return Err(text.into());
            }
        };
        *self
            .shared
            .peer
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(peer);
        *self.shared.client.lock().await = client;
        let tools = self.register(&registrar, &tools);
        self.shared.set_state(McpServerState::Running { tools });
        Ok(())
    }
}

/// Adds each enabled server to `registry` as a source (disabled ones are skipped) and
/// returns their handles, in the order given.
///
/// # Errors
///
/// [`RegistryError::NoRuntime`] outside a tokio runtime.
pub fn add_servers(
    registry: &ToolRegistry,
    servers: impl IntoIterator<Item = McpServerConfig>,
) -> Result<Vec<McpServerHandle>, RegistryError> {
    let mut handles = Vec::new();
    for config in servers.into_iter().filter(|s| s.enabled) {
        let server = McpServer::new(config);
        handles.push(server.handle());
        // The server's own timeout applies; this default is never used.
        registry.add_source(server, crate::DEFAULT_STARTUP_TIMEOUT + REGISTRY_GRACE)?;
    }
    Ok(handles)
}

/// One tool of a server, registered as `SERVER.tool`: a call sends `tools/call` with the input
/// as the arguments, and maps the result ([`tool_output_in`](crate::tool_output_in)).
///
/// The call ends with an error result when the server is gone or closes the connection
/// during the call, and when `tool_timeout` runs out; a timeout and the executor's cancel drop
/// the request, which makes rmcp send `notifications/cancelled`.
pub struct McpTool {
    definition: ToolDefinition,
    server_tool: String,
    timeout: Duration,
    shared: Arc<Shared>,
}

impl fmt::Debug for McpTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpTool")
            .field("name", self.definition.name())
            .field("server_tool", &self.server_tool)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    fn server(&self) -> &str {
        &self.shared.name
    }

    async fn call(
        &self,
        peer: Peer<RoleClient>,
        input: Value,
        ctx: &ExecutionContext,
    ) -> ToolOutput {
        let arguments = match input {
            Value::Object(arguments) => arguments,
            Value::Null => serde_json::Map::new(),
            other => {
                return ToolOutput::error(format!("The input must be a JSON object, got {other}"));
            }
        };
        let params = CallToolRequestParams::new(self.server_tool.clone()).with_arguments(arguments);
        match peer.call_tool(params).await {
            Ok(result) => crate::tool_output_in(&result, ctx).await,
            Err(rmcp::ServiceError::TransportClosed) => ToolOutput::error(format!(
                "MCP server '{}' closed the connection during the call (did it exit?)",
                self.server()
            )),
            Err(rmcp::ServiceError::McpError(error)) => ToolOutput::error(format!(
                "MCP server '{}' refused the call: {} (error {})",
                self.server(),
                error.message,
                error.code.0
            )),
            Err(error) => ToolOutput::error(format!(
                "MCP server '{}': the call failed: {}",
                self.server(),
                chain(&error)
            )),
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let Some(peer) = self.shared.peer().filter(|p| !p.is_transport_closed()) else {
            return ToolOutput::error(format!("MCP server '{}' is not running", self.server()));
        };
        // Dropping the call (cancel, timeout) sends `notifications/cancelled` (rmcp).
        tokio::select! {
            output = self.call(peer, input, ctx) => output,
            () = ctx.cancellation().cancelled() => ToolOutput::error(ABORTED),
            () = tokio::time::sleep(self.timeout) => ToolOutput::error(format!(
                "MCP tool '{}' of server '{}' timed out after {}s",
                self.server_tool,
                self.server(),
                self.timeout.as_secs_f64()
            )),
        }
    }

    fn time_limit(&self, _input: &Value, _ctx: &ExecutionContext) -> Option<Duration> {
        // The call times itself out (and tells the server); the executor's limit is a
        // backstop a few seconds later.
        Some(self.timeout)
    }
}
