//! [`McpServer`]: one server as a [`ToolSource`], and [`McpTool`], one of its tools.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use flemma_config::GlobList;
use flemma_ids::ToolName;
use flemma_schema::InputSchema;
use flemma_tools::truncate::{Direction, Limits};
use flemma_tools::{
    ExecutionContext, Output, Registrar, RegistryError, Tool, ToolDefinition, ToolOutput,
    ToolProgress, ToolRegistry, ToolSource,
};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientNotification, ClientRequest, ProgressNotificationParam,
    ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::config::McpServerConfig;
use crate::connect::{Client, Handler, Listener, connect};
use crate::error::{McpError, chain};
use crate::naming::{Assigned, MAX_WIRE_NAME, assign};

/// What a cancelled call answers (spec §15 `tool.aborted`).
const ABORTED: &str = "User aborted tool execution.";

/// Extra time the registry gives a source past its `startup_timeout`, so that the server's
/// own timeout (which names the server) is the one reported.
const REGISTRY_GRACE: Duration = Duration::from_secs(2);

/// How long sending `notifications/cancelled` may take before the call gives up on it.
const CANCEL_SEND: Duration = Duration::from_secs(1);

/// The delay before the first restart of a server whose connection was lost.
pub const RESTART_BACKOFF_FIRST: Duration = Duration::from_millis(500);

/// The longest delay between restarts.
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How long after its last loss a server is started again, by the number of losses and failed
/// restarts since a call last got an answer: nothing for none, then 0.5 s, 1 s, 2 s, 4 s, …
/// doubling up to [`RESTART_BACKOFF_MAX`] (30 s).
///
/// ```
/// use std::time::Duration;
/// use flemma_mcp::restart_backoff;
///
/// assert_eq!(restart_backoff(0), Duration::ZERO);
/// assert_eq!(restart_backoff(1), Duration::from_millis(500));
/// assert_eq!(restart_backoff(3), Duration::from_secs(2));
/// assert_eq!(restart_backoff(20), Duration::from_secs(30));
/// ```
pub fn restart_backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => RESTART_BACKOFF_FIRST
            .saturating_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX))
            .min(RESTART_BACKOFF_MAX),
    }
}

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
    /// It did not start, or its first listing failed: the error, causes included. Its tools
    /// were never registered, and it is not started again.
    Failed(String),
    /// Its connection was lost after it ran (the process exited or was killed, the HTTP
    /// server went away), or a restart failed. Its tools stay registered; the next call
    /// starts it again once `backoff` ([`restart_backoff`] of `failures`) has passed since.
    Lost {
        /// Why: the error, causes included.
        error: String,
        /// Losses and failed restarts since a call last got an answer.
        failures: u32,
        /// The delay before the next start, counted from the loss.
        backoff: Duration,
    },
    /// Stopped by [`McpServerHandle::shutdown`]: its tools answer with an error.
    Stopped,
}

/// One connection: its number (a restart makes a new one) and its peer.
#[derive(Clone)]
struct Live {
    epoch: u64,
    peer: Peer<RoleClient>,
}

/// Which listing may still change the registry: a listing takes a ticket when it starts,
/// and its result is applied only when no listing that started later was applied before it
/// (a listing in flight never restores an older list).
#[derive(Default)]
struct Listings {
    started: AtomicU64,
    applied: Mutex<u64>,
}

impl Listings {
    /// The ticket of a listing starting now.
    fn begin(&self) -> u64 {
        self.started.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Runs `apply` unless a listing with a later ticket was applied already; `None` when
    /// the result was discarded. Applying is serialised, so the registry follows the order of
    /// the tickets.
    fn apply<R>(&self, ticket: u64, apply: impl FnOnce() -> R) -> Option<R> {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        if ticket <= *applied {
            return None;
        }
        *applied = ticket;
        Some(apply())
    }
}

/// What a server's tools, its handle and its connections' handlers share.
struct Shared {
    name: String,
    config: McpServerConfig,
    /// The host made the connection ([`McpServer::with_peer`]): it is not restarted.
    given: bool,
    state: RwLock<McpServerState>,
    live: RwLock<Option<Live>>,
    /// The number of the next connection.
    epochs: AtomicU64,
    /// A stdio server's process id, once started.
    pid: RwLock<Option<u32>>,
    /// Keeps the connection (and the child process) alive; dropped with the last handle.
    client: tokio::sync::Mutex<Option<Client>>,
    /// Where the tools go, kept for listings after the first (it does not keep the registry
    /// alive).
    registrar: Mutex<Option<Registrar>>,
    listings: Listings,
    /// The calls waiting for progress, by connection and progress token.
    progress:
        Mutex<HashMap<(u64, ProgressToken), mpsc::UnboundedSender<ProgressNotificationParam>>>,
    /// Losses and failed restarts since a call last got an answer.
    failures: AtomicU32,
    /// When the connection was last lost or a restart last failed.
    lost_at: Mutex<Option<Instant>>,
    /// One restart at a time.
    restart: tokio::sync::Mutex<()>,
    stopped: AtomicBool,
}

impl Shared {
    fn set_state(&self, state: McpServerState) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = state;
    }

    fn state(&self) -> McpServerState {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn live(&self) -> Option<Live> {
        self.live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn registrar(&self) -> Option<Registrar> {
        self.registrar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The handler of a new connection, with its number.
    fn handler(self: &Arc<Self>) -> (u64, Handler) {
        let epoch = self.epochs.fetch_add(1, Ordering::SeqCst) + 1;
        let listener = Notifications {
            shared: Arc::downgrade(self),
            epoch,
        };
        (
            epoch,
            Handler {
                listener: Arc::new(listener),
            },
        )
    }

    /// Starts the server (or takes the host's connection) and lists its tools, within
    /// `startup_timeout`.
    async fn start(
        self: &Arc<Self>,
        given: Option<&Peer<RoleClient>>,
    ) -> Result<(Option<Client>, Live, Vec<rmcp::model::Tool>), McpError> {
        let timeout = self.config.startup_timeout;
        let start = async {
            let (epoch, handler) = self.handler();
            let (client, peer) = if let Some(peer) = given {
                (None, peer.clone())
            } else {
                let client = connect(&self.config, handler, &|pid| {
                    *self.pid.write().unwrap_or_else(PoisonError::into_inner) = Some(pid);
                })
                .await?;
                let peer = client.peer().clone();
                (Some(client), peer)
            };
            let tools = self.list(&peer).await?;
            Ok((client, Live { epoch, peer }, tools))
        };
        match tokio::time::timeout(timeout, start).await {
            Ok(started) => started,
            Err(_) => Err(McpError::StartupTimeout {
                server: self.name.clone(),
                timeout,
            }),
        }
    }

    async fn list(&self, peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, McpError> {
        peer.list_all_tools()
            .await
            .map_err(|source| McpError::List {
                server: self.name.clone(),
                source: Box::new(source),
            })
    }

    /// Makes `live` the connection (`client` owns it when flemma made it).
    async fn install(&self, client: Option<Client>, live: Live) {
        *self.live.write().unwrap_or_else(PoisonError::into_inner) = Some(live);
        let old = std::mem::replace(&mut *self.client.lock().await, client);
        if let Some(mut old) = old {
            let _ = tokio::time::timeout(CANCEL_SEND, old.close()).await;
        }
    }

    /// Applies the listing `ticket` found: the registry's tools of this server become
    /// `tools` (unless a later listing was applied already). Returns whether it was applied.
    fn apply_listing(self: &Arc<Self>, ticket: u64, tools: &[rmcp::model::Tool]) -> bool {
        let Some(registrar) = self.registrar() else {
            return false;
        };
        self.listings
            .apply(ticket, || {
                let names = self.register(&registrar, tools);
                if !self.stopped.load(Ordering::SeqCst) {
                    self.set_state(McpServerState::Running { tools: names });
                }
            })
            .is_some()
    }

    /// Lists the tools again (after `notifications/tools/list_changed`, or when the host
    /// asks) and updates the registry; a listing that fails keeps the tools registered and
    /// is a warning naming the server.
    async fn relist(self: &Arc<Self>, peer: Peer<RoleClient>) -> Result<bool, McpError> {
        let ticket = self.listings.begin();
        match self.list(&peer).await {
            Ok(tools) => Ok(self.apply_listing(ticket, &tools)),
            Err(error) => {
                if let Some(registrar) = self.registrar() {
                    registrar.warn(format!(
                        "the tools were not listed again: {}",
                        chain(&error)
                    ));
                }
                Err(error)
            }
        }
    }

    /// The registry's tools of this server become those `include`/`exclude` keep of `tools`
    /// (in one step); returns their names.
    fn register(
        self: &Arc<Self>,
        registrar: &Registrar,
        tools: &[rmcp::model::Tool],
    ) -> Vec<ToolName> {
        let include = GlobList::new(&self.config.include);
        let exclude = GlobList::new(&self.config.exclude);
        let kept: Vec<&rmcp::model::Tool> = tools
            .iter()
            .filter(|t| self.config.include.is_empty() || include.is_match(&t.name))
            .filter(|t| !exclude.is_match(&t.name))
            .collect();
        let names: Vec<&str> = kept.iter().map(|t| t.name.as_ref()).collect();
        let mut registered = Vec::new();
        let mut set: Vec<Arc<dyn Tool>> = Vec::new();
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
                    set.push(Arc::new(tool));
                }
                Err(reason) => registrar.warn(format!(
                    "tool '{}' skipped: its input schema cannot be used: {reason}",
                    assigned.original
                )),
            }
        }
        registrar.replace(set);
        registered.sort();
        registered
    }

    fn tool(
        self: &Arc<Self>,
        tool: &rmcp::model::Tool,
        assigned: &Assigned,
    ) -> Result<McpTool, String> {
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
            shared: Arc::clone(self),
        })
    }

    /// Notes that connection `epoch` was lost (once per connection): the server is
    /// [`McpServerState::Lost`] until a call starts it again.
    fn lost(&self, epoch: u64, error: String) {
        {
            let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
            if live.as_ref().is_none_or(|l| l.epoch != epoch) {
                return;
            }
            live.take();
        }
        self.failed_again(error);
    }

    /// Counts a loss or a failed restart, now.
    fn failed_again(&self, error: String) {
        let failures = self.failures.fetch_add(1, Ordering::SeqCst) + 1;
        *self.lost_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        tracing::warn!(server = %self.name, %error, failures, "MCP server lost");
        if !self.stopped.load(Ordering::SeqCst) {
            self.set_state(McpServerState::Lost {
                error,
                failures,
                backoff: restart_backoff(failures),
            });
        }
    }

    fn not_running(&self) -> ToolOutput {
        ToolOutput::error(format!("MCP server '{}' is not running", self.name))
    }

    /// The connection for a call: the live one, else a new one once the backoff since the
    /// loss has passed (one restart at a time; the others wait for it).
    async fn connection(self: &Arc<Self>, ctx: &ExecutionContext) -> Result<Live, ToolOutput> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(self.not_running());
        }
        if let Some(live) = self.live() {
            if !live.peer.is_transport_closed() {
                return Ok(live);
            }
            self.lost(live.epoch, "the connection closed".to_owned());
        }
        if self.given || matches!(self.state(), McpServerState::Failed(_)) {
            return Err(self.not_running());
        }
        let _restarting = self.restart.lock().await;
        if let Some(live) = self.live().filter(|l| !l.peer.is_transport_closed()) {
            return Ok(live);
        }
        let since = *self.lost_at.lock().unwrap_or_else(PoisonError::into_inner);
        let wait = restart_backoff(self.failures.load(Ordering::SeqCst))
            .saturating_sub(since.map_or(Duration::MAX, |at| at.elapsed()));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = ctx.cancellation().cancelled() => return Err(ToolOutput::error(ABORTED)),
        }
        if self.stopped.load(Ordering::SeqCst) {
            return Err(self.not_running());
        }
        let ticket = self.listings.begin();
        let started = tokio::select! {
            started = self.start(None) => started,
            () = ctx.cancellation().cancelled() => return Err(ToolOutput::error(ABORTED)),
        };
        match started {
            Ok((client, live, tools)) => {
                tracing::info!(server = %self.name, "MCP server restarted");
                self.install(client, live.clone()).await;
                self.apply_listing(ticket, &tools);
                Ok(live)
            }
            Err(error) => {
                let text = chain(&error);
                self.failed_again(text.clone());
                Err(ToolOutput::error(format!(
                    "MCP server '{}' was lost and could not be started again: {text}",
                    self.name
                )))
            }
        }
    }
}

/// The notifications of one connection, handed to its server (weakly: the connection does
/// not keep the server alive).
struct Notifications {
    shared: Weak<Shared>,
    epoch: u64,
}

impl Listener for Notifications {
    fn progress(&self, params: ProgressNotificationParam) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let key = (self.epoch, params.progress_token.clone());
        let progress = shared
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(call) = progress.get(&key) {
            let _ = call.send(params);
        }
    }

    fn tools_changed(&self, peer: Peer<RoleClient>) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        tracing::debug!(server = %shared.name, "notifications/tools/list_changed");
        tokio::spawn(async move {
            let _ = shared.relist(peer).await;
        });
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
        self.shared.state()
    }

    /// A stdio server's process id, once it was started (the newest process after a
    /// restart).
    pub fn pid(&self) -> Option<u32> {
        *self
            .shared
            .pid
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists the server's tools again now and updates the registry, as
    /// `notifications/tools/list_changed` does: for a connection the host made
    /// ([`McpServer::with_peer`]), whose notifications go to the host's handler. Returns
    /// whether this listing was applied (`false` when a listing started later was applied
    /// first, or the source was not added to a registry).
    ///
    /// # Errors
    ///
    /// [`McpError::List`] when the listing fails (the tools stay as they were; the registry
    /// also gets a warning naming the server).
    pub async fn refresh_tools(&self) -> Result<bool, McpError> {
        let Some(live) = self.shared.live() else {
            return Ok(false);
        };
        self.shared.relist(live.peer).await
    }

    /// Stops the server (a stdio server's process is ended); its tools then answer with an
    /// error and it is not started again.
    pub async fn shutdown(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.set_state(McpServerState::Stopped);
        self.shared
            .live
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
/// server that fails to start, or does not start and list within `startup_timeout` (a
/// process that never answers `initialize`), is reported as
/// `Async tool source failed: MCP server 'NAME': …`; the other sources go on.
///
/// While it runs:
/// - `notifications/tools/list_changed` lists its tools again and replaces its tools in the
///   registry in one step ([`Registrar::replace`]): new tools added, gone ones removed,
///   changed ones replaced; a conversation's globs see them on their next evaluation. Each
///   listing takes a ticket when it starts, and its result is discarded when a listing that
///   started later was applied first, so a slow listing never restores an older list. A
///   listing that fails is a warning naming the server, and the tools stay as they were.
/// - A lost connection (the process exited or was killed) makes the server
///   [`McpServerState::Lost`]; its tools stay registered, and the next call starts it again
///   (listing its tools again) once [`restart_backoff`] has passed since the loss: 0.5 s
///   after the first loss, doubling with each further loss or failed restart up to 30 s; a
///   call that gets an answer resets the count. A connection the host made is not restarted.
pub struct McpServer {
    shared: Arc<Shared>,
    /// A connection the host made itself ([`McpServer::with_peer`]).
    given: Option<Peer<RoleClient>>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A source for `config` (not started until added to a registry).
    pub fn new(config: McpServerConfig) -> Self {
        Self::make(config, None)
    }

    fn make(config: McpServerConfig, given: Option<Peer<RoleClient>>) -> Self {
        let shared = Arc::new(Shared {
            name: config.name().to_owned(),
            config,
            given: given.is_some(),
            state: RwLock::new(McpServerState::Starting),
            live: RwLock::new(None),
            epochs: AtomicU64::new(0),
            pid: RwLock::new(None),
            client: tokio::sync::Mutex::new(None),
            registrar: Mutex::new(None),
            listings: Listings::default(),
            progress: Mutex::new(HashMap::new()),
            failures: AtomicU32::new(0),
            lost_at: Mutex::new(None),
            restart: tokio::sync::Mutex::new(()),
            stopped: AtomicBool::new(false),
        });
        Self { shared, given }
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
    /// and ends it. Its notifications reach the host's handler, not flemma: the host calls
    /// [`McpServerHandle::refresh_tools`] on `notifications/tools/list_changed`; progress
    /// does not reset the calls' `tool_timeout`, and a lost connection is not restarted.
    pub fn with_peer(config: McpServerConfig, peer: Peer<RoleClient>) -> Self {
        Self::make(config, Some(peer))
    }
}

#[async_trait::async_trait]
impl ToolSource for McpServer {
    fn name(&self) -> &str {
        self.shared.config.name()
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.shared.config.startup_timeout + REGISTRY_GRACE)
    }

    async fn resolve(
        &self,
        registrar: Registrar,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        *self
            .shared
            .registrar
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(registrar);
        let ticket = self.shared.listings.begin();
        let (client, live, tools) = match self.shared.start(self.given.as_ref()).await {
            Ok(started) => started,
            Err(error) => {
                let text = chain(&error);
                self.shared.set_state(McpServerState::Failed(text.clone()));
                return Err(text.into());
            }
        };
        self.shared.install(client, live).await;
        self.shared.apply_listing(ticket, &tools);
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
/// as the arguments, and maps the result ([`tool_output`](crate::tool_output)).
///
/// - The output (a success's text or JSON text, a failure's message) goes through the
///   execution context's [`truncate_with_overflow`](ExecutionContext::truncate_with_overflow)
///   from the head with the default limits (2,000 lines, 50 KB; spec §10.5, §12.9): a longer
///   one keeps its first lines and the notice `[Showing lines 1-N of M. Full output: PATH]`,
///   the full text is written to the result store, and a JSON result that is cut becomes
///   text (pretty-printed, so the kept lines are whole members).
/// - The request carries a progress token: each `notifications/progress` for it restarts
///   the call's `tool_timeout` and is reported through
///   [`ExecutionContext::report_progress`] (the executor's
///   [`Event::ToolProgress`](flemma_tools::Event::ToolProgress)).
/// - The call ends with an error result when `tool_timeout` passes without an answer or a
///   progress notification, when the server is gone, and when it closes the connection
///   during the call (the server is then restarted on the next call, see [`McpServer`]).
/// - The call's timeout, the executor's cancel, and a call future dropped before its answer
///   send `notifications/cancelled` for the request.
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

/// A request waiting for its answer: its progress channel is registered, and dropping it
/// before the answer sends `notifications/cancelled`.
struct Pending<'a> {
    shared: &'a Shared,
    key: (u64, ProgressToken),
    peer: Peer<RoleClient>,
    /// `None` once answered or cancelled.
    id: Option<RequestId>,
}

impl Pending<'_> {
    fn answered(&mut self) {
        self.id = None;
    }

    /// Sends `notifications/cancelled` for the request now.
    async fn cancel(&mut self, reason: &str) {
        if let Some(id) = self.id.take() {
            let _ = tokio::time::timeout(
                CANCEL_SEND,
                self.peer.send_notification(cancelled(id, reason)),
            )
            .await;
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.shared
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        if let Some(id) = self.id.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let peer = self.peer.clone();
            runtime.spawn(async move {
                let notice = cancelled(id, "the call was abandoned");
                let _ = tokio::time::timeout(CANCEL_SEND, peer.send_notification(notice)).await;
            });
        }
    }
}

fn cancelled(id: RequestId, reason: &str) -> ClientNotification {
    ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(Some(id), Some(reason.to_owned())),
    ))
}

impl McpTool {
    fn server(&self) -> &str {
        &self.shared.name
    }

    async fn call(
        &self,
        live: Live,
        arguments: serde_json::Map<String, Value>,
        ctx: &ExecutionContext,
    ) -> ToolOutput {
        let params = CallToolRequestParams::new(self.server_tool.clone()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = live
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await;
        let mut handle = match sent {
            Ok(handle) => handle,
            Err(error) => return self.failed(live.epoch, error),
        };
        let (sender, mut progress) = mpsc::unbounded_channel();
        let key = (live.epoch, handle.progress_token.clone());
        self.shared
            .progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), sender);
        let mut pending = Pending {
            shared: &self.shared,
            key,
            peer: live.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let idle = tokio::time::sleep(self.timeout);
        tokio::pin!(idle);
        loop {
            tokio::select! {
                biased;
                answer = &mut handle.rx => {
                    pending.answered();
                    return match answer {
                        Ok(Ok(result)) => {
                            self.shared.failures.store(0, Ordering::SeqCst);
                            match call_result(result) {
                                Some(result) => crate::tool_output(&result),
                                None => ToolOutput::error(format!(
                                    "MCP server '{}' answered the call with something other than a tool result",
                                    self.server()
                                )),
                            }
                        }
                        Ok(Err(error)) => self.failed(live.epoch, error),
                        Err(_) => self.failed(live.epoch, rmcp::ServiceError::TransportClosed),
                    };
                }
                () = ctx.cancellation().cancelled() => {
                    pending.cancel("cancelled by the user").await;
                    return ToolOutput::error(ABORTED);
                }
                () = &mut idle => {
                    pending.cancel("timed out").await;
                    return ToolOutput::error(format!(
                        "MCP tool '{}' of server '{}' timed out after {}s",
                        self.server_tool,
                        self.server(),
                        self.timeout.as_secs_f64()
                    ));
                }
                Some(step) = progress.recv() => {
                    idle.as_mut().reset(Instant::now() + self.timeout);
                    let mut report = ToolProgress::new(step.progress);
                    if let Some(total) = step.total {
                        report = report.with_total(total);
                    }
                    if let Some(message) = step.message {
                        report = report.with_message(message);
                    }
                    ctx.report_progress(report);
                }
            }
        }
    }

    fn failed(&self, epoch: u64, error: rmcp::ServiceError) -> ToolOutput {
        match error {
            rmcp::ServiceError::TransportClosed => {
                self.shared.lost(
                    epoch,
                    format!(
                        "MCP server '{}' closed the connection during a call",
                        self.server()
                    ),
                );
                ToolOutput::error(format!(
                    "MCP server '{}' closed the connection during the call (did it exit?)",
                    self.server()
                ))
            }
            rmcp::ServiceError::McpError(error) => {
                // An answer: the server works.
                self.shared.failures.store(0, Ordering::SeqCst);
                ToolOutput::error(format!(
                    "MCP server '{}' refused the call: {} (error {})",
                    self.server(),
                    error.message,
                    error.code.0
                ))
            }
            error => ToolOutput::error(format!(
                "MCP server '{}': the call failed: {}",
                self.server(),
                chain(&error)
            )),
        }
    }
}

/// A `tools/call` answer as a tool result: a result without `content` decodes as an empty
/// result.
fn call_result(result: ServerResult) -> Option<CallToolResult> {
    match result {
        ServerResult::CallToolResult(result) => Some(result),
        ServerResult::EmptyResult(_) => Some(CallToolResult::success(Vec::new())),
        _ => None,
    }
}

/// `output` cut by the context's truncation (spec §10.5): the full text to the store.
fn truncated(output: ToolOutput, ctx: &ExecutionContext) -> ToolOutput {
    let cut = |text: &str| {
        let overflow = ctx.truncate_with_overflow(text, Direction::Head, Limits::default());
        overflow.truncated.then_some(overflow.content)
    };
    match output {
        ToolOutput::Success(Output::Text(text)) => match cut(&text) {
            Some(content) => ToolOutput::text(content),
            None => ToolOutput::text(text),
        },
        ToolOutput::Success(Output::Json(value)) => {
            let limits = Limits::default();
            let compact = value.to_string();
            if compact.len() <= limits.max_bytes {
                return ToolOutput::json(value);
            }
            let pretty = serde_json::to_string_pretty(&value).unwrap_or(compact);
            match cut(&pretty) {
                Some(content) => ToolOutput::text(content),
                None => ToolOutput::json(value),
            }
        }
        ToolOutput::Failure {
            error,
            partial_output,
        } => {
            let error = cut(&error).unwrap_or(error);
            ToolOutput::Failure {
                error,
                partial_output,
            }
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let arguments = match input {
            Value::Object(arguments) => arguments,
            Value::Null => serde_json::Map::new(),
            other => {
                return ToolOutput::error(format!("The input must be a JSON object, got {other}"));
            }
        };
        let output = match self.shared.connection(ctx).await {
            Ok(live) => self.call(live, arguments, ctx).await,
            Err(output) => output,
        };
        truncated(output, ctx)
    }

    fn time_limit(&self, _input: &Value, _ctx: &ExecutionContext) -> Option<Duration> {
        // The call times itself out after `tool_timeout` without an answer or progress (and
        // tells the server); progress may keep it running longer, so the executor sets no
        // limit of its own.
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_started_before_one_applied_is_discarded() {
        let listings = Listings::default();
        let older = listings.begin();
        let newer = listings.begin();
        // The newer one finishes first and is applied; the older one, finishing last, is
        // discarded: it cannot restore the older list.
        assert_eq!(listings.apply(newer, || "new"), Some("new"));
        assert_eq!(listings.apply(older, || "old"), None);
        // A listing started after that one was applied is applied.
        let later = listings.begin();
        assert_eq!(listings.apply(later, || "later"), Some("later"));
        // In start order, both are applied, the later last.
        let a = listings.begin();
        let b = listings.begin();
        assert_eq!(listings.apply(a, || "a"), Some("a"));
        assert_eq!(listings.apply(b, || "b"), Some("b"));
    }

    #[test]
    fn the_restart_backoff_doubles_up_to_its_cap() {
        let schedule: Vec<f64> = (0..9).map(|n| restart_backoff(n).as_secs_f64()).collect();
        assert_eq!(schedule, [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]);
        assert_eq!(restart_backoff(u32::MAX), RESTART_BACKOFF_MAX);
    }
}
