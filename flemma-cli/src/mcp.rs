//! The MCP servers of `[mcp.servers.NAME]` in the options files as the command's tool
//! sources, and `flemma mcp list [FILE]`.
//!
//! Only the servers of the options files run (`flemma.toml`, `--config`): a transcript is not
//! the model's or its sender's way to start a process, so a conversation chooses among the
//! configured servers' tools with its tool globs (`flemma.opt.tools:append("fs.*")`) and
//! never names a command. The servers start when the command builds its tool registry (the
//! start overlaps the command's own work; a request waits for their tools) and stop when the
//! command ends ([`stop_servers`]).

use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use flemma::config::Config;
use flemma::mcp::{McpServerHandle, McpServerState, McpTransport};
use flemma::tools::ToolRegistry;
use serde_json::json;

use crate::failure::{Failure, failed};
use crate::options::Settings;

/// The servers this command started, to list and to stop.
static SERVERS: Mutex<Vec<Started>> = Mutex::new(Vec::new());

/// A started server and how it is reached, as `flemma mcp list` shows it.
#[derive(Clone)]
struct Started {
    handle: McpServerHandle,
    transport: String,
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

/// Stops every server this command started (a stdio server's process is ended).
pub(crate) async fn stop_servers() {
    let started = std::mem::take(&mut *SERVERS.lock().unwrap_or_else(PoisonError::into_inner));
    for server in started {
        let _ = tokio::time::timeout(STOP, server.handle.shutdown()).await;
    }
}

/// One line of state: `running`, `starting`, `failed: ERROR`, `lost: ERROR (…)`, `stopped`.
fn state_text(state: &McpServerState) -> (&'static str, Option<String>) {
    match state {
        McpServerState::Starting => ("starting", None),
        McpServerState::Running { .. } => ("running", None),
        McpServerState::Failed(error) => ("failed", Some(error.clone())),
        McpServerState::Lost { error, .. } => ("lost", Some(error.clone())),
        McpServerState::Stopped => ("stopped", None),
        _ => ("unknown", None),
    }
}

/// `flemma mcp list [FILE] [--json]`: each configured server (by name), how it is reached,
/// its state once it started (or failed), and its tools by their registered names with the
/// first line of their description; with FILE, whether the conversation offers each.
pub(crate) fn list(
    out: &mut impl Write,
    file: Option<&Path>,
    json: bool,
    settings: &Settings,
) -> Result<u8, Failure> {
    let config = settings.load()?;
    let registry = crate::tools::ready_registry(&config)?;
    let offered: Option<Vec<String>> = match file {
        Some(file) => Some(
            crate::tools::specs_of(file, config, &registry)?
                .into_iter()
                .map(|s| s.name.to_string())
                .collect(),
        ),
        None => None,
    };
    let started = SERVERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut listed = Vec::new();
    for server in &started {
        let state = server.handle.state();
        let (word, error) = state_text(&state);
        let names = match &state {
            McpServerState::Running { tools } => tools.clone(),
            _ => Vec::new(),
        };
        let tools: Vec<serde_json::Value> = names
            .iter()
            .map(|name| {
                let description = registry
                    .get(name.as_str())
                    .map(|t| t.definition().spec().description.clone())
                    .unwrap_or_default();
                let hints = server.handle.hints(name).unwrap_or_default();
                let mut tool = json!({
                    "name": name.as_str(),
                    "description": description,
                    "hints": hints.describe(),
                });
                if let Some(offered) = &offered {
                    tool["offered"] = json!(offered.iter().any(|o| o == name.as_str()));
                }
                tool
            })
            .collect();
        listed.push(json!({
            "name": server.handle.name(),
            "transport": server.transport,
            "state": word,
            "error": error,
            "tools": tools,
        }));
    }
    if json {
        crate::render::json(out, &listed)?;
        return Ok(0);
    }
    if listed.is_empty() {
        writeln!(
            out,
            "no MCP servers are configured (`[mcp.servers.NAME]` in flemma.toml)"
        )?;
    }
    for server in &listed {
        let tools = server["tools"].as_array().map_or(0, Vec::len);
        let name = server["name"].as_str().unwrap_or_default();
        let transport = server["transport"].as_str().unwrap_or_default();
        let state = server["state"].as_str().unwrap_or_default();
        // A server's words (its name is the host's; its errors and tools are the server's).
        let name = crate::visible::line(name);
        match server["error"].as_str() {
            Some(error) => writeln!(
                out,
                "{name} ({transport}): {state}: {}",
                crate::visible::line(error)
            )?,
            None if state == "running" => {
                let plural = if tools == 1 { "" } else { "s" };
                writeln!(out, "{name} ({transport}): running, {tools} tool{plural}")?;
            }
            None => writeln!(out, "{name} ({transport}): {state}")?,
        }
        for tool in server["tools"].as_array().into_iter().flatten() {
            let summary = tool["description"]
                .as_str()
                .and_then(|d| d.lines().next())
                .unwrap_or_default();
            let not_offered = if tool["offered"] == json!(false) {
                "  (not offered)"
            } else {
                ""
            };
            writeln!(
                out,
                "  {}  {}  [{}]{not_offered}",
                crate::visible::line(tool["name"].as_str().unwrap_or_default()),
                crate::visible::line(summary),
                crate::visible::line(tool["hints"].as_str().unwrap_or_default())
            )?;
        }
    }
    Ok(0)
}
