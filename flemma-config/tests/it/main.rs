//! Integration tests of flemma-config: layered op logs, list operations, presets, globs,
//! `flemma.toml`, JSON and Lua frontmatter, and the typed options view.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail loudly"
)]

mod frontmatter;
mod globs;
mod hooks;
mod intent;
mod layers;
mod listops;
#[cfg(feature = "lua")]
mod lua;
#[cfg(feature = "lua")]
mod lua_policy;
mod mcp_narrowing;
mod options;
mod presets;
mod reference;
mod selection;
mod toml;
mod tool_tables;

use flemma_config::{Config, Preset};

/// An error and its causes, joined by `: ` (as the `flemma` command prints them).
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        text.push_str(": ");
        text.push_str(&error.to_string());
        cause = error.source();
    }
    text
}

/// Owned strings from string literals.
pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Registered tool names.
pub(crate) fn names(items: &[&str]) -> Vec<flemma_ids::ToolName> {
    items
        .iter()
        .map(|s| flemma_ids::ToolName::new(*s).unwrap())
        .collect()
}

/// A config whose `$standard` is the spec §5.3 example preset: `{read, write, edit}` for both
/// `tools` and `tools.auto_approve`.
pub(crate) fn config_with_small_standard() -> Config {
    let mut config = Config::new();
    config
        .presets_mut()
        .insert(
            "$standard",
            Preset {
                tools: Some(strings(&["read", "write", "edit"])),
                auto_approve: Some(strings(&["read", "write", "edit"])),
                ..Preset::default()
            },
        )
        .unwrap();
    config
}
