//! `flemma mcp list [FILE]`: the MCP servers the command started ([`servers`]), their state
//! and their tools.

use std::io::Write;
use std::path::Path;

use flemma::mcp::McpServerState;
use serde_json::json;

use crate::failure::Failure;
use crate::options::Settings;

pub(crate) mod servers;

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
    let registry = crate::setup::ready_registry(&config)?;
    let offered: Option<Vec<String>> = match file {
        Some(file) => Some(
            crate::setup::specs_of(file, config, &registry)?
                .into_iter()
                .map(|s| s.name.to_string())
                .collect(),
        ),
        None => None,
    };
    let started = servers::started();
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
