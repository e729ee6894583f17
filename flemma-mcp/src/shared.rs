//! What a server's tools, its handle and its connections share: the connection, its
//! restarts with backoff, and the listings that keep the registry's tools current.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use flemma_config::GlobList;
use flemma_core::{ExecutionContext, Tool, ToolDefinition, ToolOutput};
use flemma_ids::ToolName;
use flemma_runtime::Registrar;
use flemma_schema::InputSchema;
use rmcp::model::{ProgressNotificationParam, ProgressToken, RequestId};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::call::McpTool;
use crate::config::McpServerConfig;
use crate::connect::{Client, Handler, Listener, connect};
use crate::error::McpError;
use crate::hints::ToolHints;
use crate::naming::{Assigned, MAX_WIRE_NAME, assign};
use crate::undecodable::DecodeError;
use flemma_ids::visible::line as shown;

/// What a cancelled call answers (the `tool.aborted` text).
pub(crate) const ABORTED: &str = "User aborted tool execution.";

/// Extra time the registry gives a source past its `startup_timeout`, so that the server's
/// own timeout (which names the server) is the one reported.
pub(crate) const REGISTRY_GRACE: Duration = Duration::from_secs(2);

/// How long sending `notifications/cancelled` may take before the call gives up on it.
pub(crate) const CANCEL_SEND: Duration = Duration::from_secs(1);

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
    /// Stopped by [`McpServerHandle::shutdown`](crate::McpServerHandle::shutdown): its tools answer with an error.
    Stopped,
}

/// One connection: its number (a restart makes a new one) and its peer.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) epoch: u64,
    pub(crate) peer: Peer<RoleClient>,
}

/// Which listing may still change the registry: a listing takes a ticket when it starts,
/// and its result is applied only when no listing that started later was applied before it
/// (a listing in flight never restores an older list).
#[derive(Default)]
pub(crate) struct Listings {
    pub(crate) started: AtomicU64,
    pub(crate) applied: Mutex<u64>,
}

impl Listings {
    /// The ticket of a listing starting now.
    pub(crate) fn begin(&self) -> u64 {
        self.started.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Runs `apply` unless a listing with a later ticket was applied already; `None` when
    /// the result was discarded. Applying is serialised, so the registry follows the order of
    /// the tickets.
    pub(crate) fn apply<R>(&self, ticket: u64, apply: impl FnOnce() -> R) -> Option<R> {
        let mut applied = self.applied.lock().unwrap_or_else(PoisonError::into_inner);
        if ticket <= *applied {
            return None;
        }
        *applied = ticket;
        Some(apply())
    }
}

/// The relistings `notifications/tools/list_changed` asks for, coalesced: at most one in
/// flight, and at most one more owed for the notifications that came during it, however
/// many they were (a burst of them is one task and one or two listings, not one each).
#[derive(Default)]
pub(crate) struct Relists {
    running: AtomicBool,
    owed: AtomicBool,
}

impl Relists {
    /// A notification came: whether the caller must start the relisting loop (none runs).
    pub(crate) fn notified(&self) -> bool {
        self.owed.store(true, Ordering::SeqCst);
        !self.running.swap(true, Ordering::SeqCst)
    }

    /// A listing starts: it answers every notification so far.
    pub(crate) fn begin(&self) {
        self.owed.store(false, Ordering::SeqCst);
    }

    /// A listing ended: whether the loop lists again (a notification came since it
    /// began, and no other loop took it).
    pub(crate) fn again(&self) -> bool {
        self.running.store(false, Ordering::SeqCst);
        self.owed.load(Ordering::SeqCst) && !self.running.swap(true, Ordering::SeqCst)
    }
}

/// What a server's tools, its handle and its connections' handlers share.
pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) config: McpServerConfig,
    /// The host made the connection ([`McpServer::with_peer`]): it is not restarted.
    pub(crate) given: bool,
    pub(crate) state: RwLock<McpServerState>,
    pub(crate) live: RwLock<Option<Live>>,
    /// The number of the next connection.
    pub(crate) epochs: AtomicU64,
    /// A stdio server's process id, once started.
    pub(crate) pid: RwLock<Option<u32>>,
    /// Keeps the connection (and the child process) alive; dropped with the last handle.
    pub(crate) client: tokio::sync::Mutex<Option<Client>>,
    /// Where the tools go, kept for listings after the first (it does not keep the registry
    /// alive).
    pub(crate) registrar: Mutex<Option<Registrar>>,
    pub(crate) listings: Listings,
    /// The calls waiting for progress, by connection and progress token.
    pub(crate) progress:
        Mutex<HashMap<(u64, ProgressToken), mpsc::UnboundedSender<ProgressNotificationParam>>>,
    /// Losses and failed restarts since a call last got an answer.
    pub(crate) failures: AtomicU32,
    /// When the connection was last lost or a restart last failed.
    pub(crate) lost_at: Mutex<Option<Instant>>,
    /// One restart at a time.
    pub(crate) restart: tokio::sync::Mutex<()>,
    pub(crate) stopped: AtomicBool,
    /// The hints of the registered tools, by registered name, as the applied listing sent
    /// them (replaced whole with each listing).
    pub(crate) hints: RwLock<HashMap<ToolName, (String, ToolHints)>>,
    /// The relistings asked for by `notifications/tools/list_changed`.
    pub(crate) relists: Relists,
    /// The connection whose notification asked last.
    pub(crate) relist_peer: Mutex<Option<Peer<RoleClient>>>,
    /// Why the answer to a request could not be decoded, by connection and request id,
    /// until its call reads it.
    pub(crate) undecodable: Mutex<HashMap<(u64, RequestId), DecodeError>>,
}

impl Shared {
    pub(crate) fn set_state(&self, state: McpServerState) {
        *self.state.write().unwrap_or_else(PoisonError::into_inner) = state;
    }

    pub(crate) fn state(&self) -> McpServerState {
        self.state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn live(&self) -> Option<Live> {
        self.live
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The hints of the registered tool `tool`.
    pub(crate) fn hints(&self, tool: &ToolName) -> Option<ToolHints> {
        self.hints
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .map(|(_, hints)| *hints)
    }

    /// The server's own name for its registered tool `tool`.
    pub(crate) fn original(&self, tool: &ToolName) -> Option<String> {
        self.hints
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool)
            .map(|(original, _)| original.clone())
    }

    /// The hints of every registered tool, sorted by name.
    pub(crate) fn tool_hints(&self) -> Vec<(ToolName, ToolHints)> {
        let mut all: Vec<(ToolName, ToolHints)> = self
            .hints
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, (_, hints))| (name.clone(), *hints))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    pub(crate) fn registrar(&self) -> Option<Registrar> {
        self.registrar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The handler of a new connection, with its number.
    pub(crate) fn handler(self: &Arc<Self>) -> (u64, Handler) {
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
    pub(crate) async fn start(
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

    pub(crate) async fn list(
        &self,
        peer: &Peer<RoleClient>,
    ) -> Result<Vec<rmcp::model::Tool>, McpError> {
        peer.list_all_tools()
            .await
            .map_err(|source| McpError::List {
                server: self.name.clone(),
                source: Box::new(source),
            })
    }

    /// Makes `live` the connection (`client` owns it when flemma made it).
    pub(crate) async fn install(&self, client: Option<Client>, live: Live) {
        *self.live.write().unwrap_or_else(PoisonError::into_inner) = Some(live);
        let old = std::mem::replace(&mut *self.client.lock().await, client);
        if let Some(mut old) = old {
            let _ = tokio::time::timeout(CANCEL_SEND, old.close()).await;
        }
    }

    /// Applies the listing `ticket` found: the registry's tools of this server become
    /// `tools` (unless a later listing was applied already). Returns whether it was applied.
    pub(crate) fn apply_listing(
        self: &Arc<Self>,
        ticket: u64,
        tools: &[rmcp::model::Tool],
    ) -> bool {
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
    pub(crate) async fn relist(self: &Arc<Self>, peer: Peer<RoleClient>) -> Result<bool, McpError> {
        let ticket = self.listings.begin();
        match self.list(&peer).await {
            Ok(tools) => Ok(self.apply_listing(ticket, &tools)),
            Err(error) => {
                if let Some(registrar) = self.registrar() {
                    registrar.warn(format!(
                        "the tools were not listed again: {}",
                        shown(&flemma_ids::error_chain(&error))
                    ));
                }
                Err(error)
            }
        }
    }

    /// The registry's tools of this server become those `include`/`exclude` keep of `tools`
    /// (in one step); returns their names.
    pub(crate) fn register(
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
        let mut hints = HashMap::new();
        let mut set: Vec<Arc<dyn Tool>> = Vec::new();
        for assigned in assign(self.config.name(), &names) {
            if let Some(note) = &assigned.note {
                registrar.warn(shown(note).into_owned());
            }
            let Some(tool_def) = kept.iter().find(|t| t.name == assigned.original.as_str()) else {
                continue;
            };
            match self.tool(tool_def, &assigned) {
                Ok(tool) => {
                    // Offered, a longer name would make the provider refuse every request of
                    // the conversation: the tool is not registered.
                    let wire = tool.definition.spec().wire_name().len();
                    if wire > MAX_WIRE_NAME {
                        registrar.warn(format!(
                            "tool '{}' skipped: its name '{}' is {wire} characters on the wire, and providers accept at most {MAX_WIRE_NAME}",
                            shown(&assigned.original),
                            assigned.name
                        ));
                        continue;
                    }
                    let tool_hints = tool_def
                        .annotations
                        .as_ref()
                        .map(ToolHints::from)
                        .unwrap_or_default();
                    hints.insert(
                        assigned.name.clone(),
                        (assigned.original.clone(), tool_hints),
                    );
                    registered.push(assigned.name.clone());
                    set.push(Arc::new(tool));
                }
                Err(reason) => registrar.warn(format!(
                    "tool '{}' skipped: its input schema cannot be used: {}",
                    shown(&assigned.original),
                    shown(&reason)
                )),
            }
        }
        // The hints first: a tool is never registered without its hints.
        *self.hints.write().unwrap_or_else(PoisonError::into_inner) = hints;
        registrar.replace(set);
        registered.sort();
        registered
    }

    pub(crate) fn tool(
        self: &Arc<Self>,
        tool: &rmcp::model::Tool,
        assigned: &Assigned,
    ) -> Result<McpTool, String> {
        let mut schema = Value::Object((*tool.input_schema).clone());
        if let Some(kind) = schema.get("type")
            && kind != "object"
        {
            return Err(format!("its type is {kind}, not \"object\""));
        }
        if let Some(inlined) = crate::refs::inline_pointers(&schema).map_err(|e| e.to_string())? {
            schema = inlined;
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
        // A conversation's options may take the tool away (`mcp.servers.<name>` in a
        // frontmatter), matched by the server's own name for it as `include` is.
        let server = self.config.name().to_owned();
        let original = assigned.original.clone();
        let builder = builder.available_when(move |options| options.mcp.allows(&server, &original));
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
    pub(crate) fn lost(&self, epoch: u64, error: String) {
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
    pub(crate) fn failed_again(&self, error: String) {
        let failures = self.failures.fetch_add(1, Ordering::SeqCst) + 1;
        *self.lost_at.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        tracing::warn!(server = %self.name, error = %shown(&error), failures, "MCP server lost");
        if !self.stopped.load(Ordering::SeqCst) {
            self.set_state(McpServerState::Lost {
                error,
                failures,
                backoff: restart_backoff(failures),
            });
        }
    }

    pub(crate) fn not_running(&self) -> ToolOutput {
        ToolOutput::error(format!("MCP server '{}' is not running", self.name))
    }

    /// The connection for a call: the live one, else a new one once the backoff since the
    /// loss has passed (one restart at a time; the others wait for it).
    pub(crate) async fn connection(
        self: &Arc<Self>,
        ctx: &ExecutionContext,
    ) -> Result<Live, ToolOutput> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(self.not_running());
        }
        if let Some(live) = self.live() {
            if !live.peer.is_transport_closed() {
                return Ok(live);
            }
            self.lost(
                live.epoch,
                format!("MCP server '{}' closed the connection", self.name),
            );
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
                let text = flemma_ids::error_chain(&error);
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
pub(crate) struct Notifications {
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
        *shared
            .relist_peer
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(peer);
        if !shared.relists.notified() {
            return;
        }
        tokio::spawn(async move {
            loop {
                shared.relists.begin();
                let peer = shared
                    .relist_peer
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                if let Some(peer) = peer {
                    let _ = shared.relist(peer).await;
                }
                if !shared.relists.again() {
                    return;
                }
            }
        });
    }

    fn undecodable(&self, id: RequestId, cause: DecodeError) {
        if let Some(shared) = self.shared.upgrade() {
            shared
                .undecodable
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert((self.epoch, id), cause);
        }
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
    fn a_burst_of_notifications_is_one_listing_in_flight_and_one_more() {
        let relists = Relists::default();
        // The first starts the loop; the rest, during its listing, only owe one more.
        assert!(relists.notified());
        relists.begin();
        for _ in 0..200_000 {
            assert!(!relists.notified());
        }
        assert!(relists.again());
        relists.begin();
        // Nothing came during the second listing: the loop ends, and the next
        // notification starts a new one.
        assert!(!relists.again());
        assert!(relists.notified());
        relists.begin();
        assert!(!relists.again());
    }

    #[test]
    fn the_restart_backoff_doubles_up_to_its_cap() {
        let schedule: Vec<f64> = (0..9).map(|n| restart_backoff(n).as_secs_f64()).collect();
        assert_eq!(schedule, [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]);
        assert_eq!(restart_backoff(u32::MAX), RESTART_BACKOFF_MAX);
    }
}
