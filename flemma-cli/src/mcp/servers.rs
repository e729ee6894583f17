//! The MCP servers of `[mcp.servers.NAME]` in the options files as the command's tool
//! sources: started by [`add_servers`] (from [`crate::setup::registry`]), listed by `flemma
//! mcp list` ([`started`]), stopped by [`stop_servers`] (from [`crate::runtime::finish`]).
//!
//! Only the servers of the options files run (`flemma.toml`, `--config`): a transcript is not
//! the model's or its sender's way to start a process, so a conversation chooses among the
//! configured servers' tools with its tool globs (`flemma.opt.tools:append("fs.*")`) and
//! never names a command. The servers start when the command builds its tool registry (the
//! start overlaps the command's own work; a request waits for their tools) and stop when the
//! command ends ([`stop_servers`]).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use flemma::config::Config;
use flemma::mcp::{McpServerHandle, McpTransport};
use flemma::runtime::ToolRegistry;

use crate::failure::{Failure, failed};

/// The servers this command started, to list and to stop.
static SERVERS: Mutex<Vec<Started>> = Mutex::new(Vec::new());

/// A started server and how it is reached, as `flemma mcp list` shows it.
#[derive(Clone)]
pub(crate) struct Started {
    pub(crate) handle: McpServerHandle,
    pub(crate) transport: String,
}

/// How long stopping one server may take when the command ends.
const STOP: Duration = Duration::from_secs(2);

/// Starts the enabled servers of `config`'s `[mcp.servers]` as sources of `registry` (in the
/// current runtime).
///
/// # Errors
///
/// A usage failure (exit 2) naming the options file when `[mcp]` is not as flemma-mcp reads
/// it.
pub(crate) fn add_servers(registry: &ToolRegistry, config: &Config) -> Result<(), Failure> {
    let servers = flemma::mcp::servers_of(config).map_err(|e| {
        let file = config
            .section_origin("mcp")
            .map_or_else(|| "options".to_owned(), |p| p.display().to_string());
        Failure::usage(anyhow::Error::new(e).context(file))
    })?;
    let described: Vec<(String, String)> = servers
        .iter()
        .filter(|s| s.enabled)
        .map(|s| (s.name().to_owned(), transport(&s.transport)))
        .collect();
    let handles = flemma::mcp::add_servers(registry, servers).map_err(|e| {
        Failure::usage(anyhow::Error::new(e).context("cannot start the MCP servers"))
    })?;
    // The servers' annotations in the approval chain: read-only tools ride on the read-only
    // preset, destructive ones wait unless `tools.auto_approve` names them exactly. Without a
    // server the chain stays the built-ins'.
    if !handles.is_empty() {
        registry
            .update_approval_chain(|chain| flemma::mcp::register_hint_resolvers(chain, &handles))
            .map_err(|e| failed(anyhow::Error::new(e).context("cannot start the MCP servers")))?;
    }
    let mut started = SERVERS.lock().unwrap_or_else(PoisonError::into_inner);
    for handle in handles {
        let transport = described
            .iter()
            .find(|(name, _)| name == handle.name())
            .map(|(_, t)| t.clone())
            .unwrap_or_default();
        started.push(Started { handle, transport });
    }
    Ok(())
}

/// `stdio: COMMAND ARGS…` or `http: URL`.
fn transport(transport: &McpTransport) -> String {
    match transport {
        McpTransport::Stdio { command, args, .. } => {
            let mut text = format!("stdio: {command}");
            for arg in args {
                text.push(' ');
                text.push_str(arg);
            }
            text
        }
        McpTransport::Http { url, .. } => format!("http: {url}"),
        _ => "other".to_owned(),
    }
}

/// The servers this command started so far, in the order they started.
pub(crate) fn started() -> Vec<Started> {
    SERVERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// Stops every server this command started (a stdio server's process is ended).
pub(crate) async fn stop_servers() {
    let started = std::mem::take(&mut *SERVERS.lock().unwrap_or_else(PoisonError::into_inner));
    for server in started {
        let _ = tokio::time::timeout(STOP, server.handle.shutdown()).await;
    }
}
