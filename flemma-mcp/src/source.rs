//! [`McpServer`]: one server as a [`ToolSource`], and [`McpServerHandle`], its state.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use flemma_ids::ToolName;
use flemma_runtime::{Registrar, RegistryError, ToolRegistry, ToolSource};
use rmcp::service::{Peer, RoleClient};

use crate::config::McpServerConfig;
use crate::error::McpError;
use crate::hints::ToolHints;
use crate::shared::{Listings, McpServerState, REGISTRY_GRACE, Relists, Shared};

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

    /// The hints the server sent with the registered tool `tool` (its `annotations`), as of
    /// the listing applied last; `None` when `tool` is not one of this server's registered
    /// tools. A tool sent without annotations has [`ToolHints::default`].
    pub fn hints(&self, tool: &ToolName) -> Option<ToolHints> {
        self.shared.hints(tool)
    }

    /// Whether the host trusts the server's annotations
    /// ([`McpServerConfig::trusted`](crate::McpServerConfig::trusted)).
    pub fn is_trusted(&self) -> bool {
        self.shared.config.trusted
    }

    /// The server's own name for its registered tool `tool` (what `include`, `exclude` and
    /// [`McpOptions::allows`](flemma_config::McpOptions::allows) match); `None` when `tool`
    /// is not one of this server's registered tools.
    pub fn original(&self, tool: &ToolName) -> Option<String> {
        self.shared.original(tool)
    }

    /// The hints of each of the server's registered tools, sorted by registered name.
    pub fn tool_hints(&self) -> Vec<(ToolName, ToolHints)> {
        self.shared.tool_hints()
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
/// use: a request waits for its tools like for every asynchronous source, so
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
///   (listing its tools again) once [`restart_backoff`](crate::restart_backoff) has passed since the loss: 0.5 s
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
            hints: RwLock::new(HashMap::new()),
            relists: Relists::default(),
            relist_peer: Mutex::new(None),
            undecodable: Mutex::new(HashMap::new()),
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
                let text = flemma_ids::error_chain(&error);
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
/// The servers' annotations take part in approval only once the handles are given to
/// [`register_hint_resolvers`](crate::register_hint_resolvers), with every server of the
/// registry in one call (`registry.update_approval_chain(|chain|
/// flemma_mcp::register_hint_resolvers(chain, &handles))`), as `flemma` does.
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
