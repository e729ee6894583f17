//! Presets: named bundles of `tools` and `auto_approve` lists.

use std::collections::BTreeMap;

use flemma_ids::ToolName;
use serde::{Deserialize, Serialize};

use crate::diagnostic::FinalizeIssue;
use crate::error::ConfigError;
use crate::listops::is_preset_ref;

/// A preset: lists spread into `tools` / `tools.auto_approve` by `$name`, and provider settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// Items for `tools.auto_approve` (may carry operators and globs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_approve: Option<Vec<String>>,
    /// Items for `tools` (may carry operators and globs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Provider to switch to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Model to switch to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Provider parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<serde_json::Map<String, serde_json::Value>>,
}

impl Preset {
    /// The preset's list for a path, named by its last segment (`tools.auto_approve` →
    /// `auto_approve`, `tools` → `tools`).
    pub fn field_for(&self, path: &str) -> Option<&Vec<String>> {
        match path.rsplit('.').next() {
            Some("auto_approve") => self.auto_approve.as_ref(),
            Some("tools") => self.tools.as_ref(),
            _ => None,
        }
    }
}

/// The presets in force: the built-ins, overridden by user presets of the same name.
///
/// The built-ins, and what they approve:
///
/// | preset | `auto_approve` | |
/// | --- | --- | --- |
/// | `$standard` | `read`, `write`, `edit`, `find`, `grep`, `ls`, `flemma.*` | the default of `tools.auto_approve`: the file tools run without asking, inside the sandbox's writable set (bubblewrap, or the file tools' own check without a backend); `bash` is approved only as sandboxed |
/// | `$readonly` | `read`, `find`, `grep`, `ls` | nothing that writes |
///
/// ```
/// let presets = flemma_config::Presets::default();
/// let standard = presets.get("$standard").and_then(|p| p.auto_approve.clone()).unwrap();
/// assert_eq!(standard, ["read", "write", "edit", "find", "grep", "ls", "flemma.*"]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Presets {
    presets: BTreeMap<String, Preset>,
}

impl Default for Presets {
    fn default() -> Self {
        let list = |items: &[&str]| Some(items.iter().map(|s| (*s).to_owned()).collect());
        let mut presets = BTreeMap::new();
        presets.insert(
            "$standard".to_owned(),
            Preset {
                auto_approve: list(&["read", "write", "edit", "find", "grep", "ls", "flemma.*"]),
                ..Preset::default()
            },
        );
        presets.insert(
            "$readonly".to_owned(),
            Preset {
                auto_approve: list(&["read", "find", "grep", "ls"]),
                ..Preset::default()
            },
        );
        Self { presets }
    }
}

impl Presets {
    /// Adds or replaces a preset.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidPreset`] when the name is not `$` followed by a lowercase letter.
    pub fn insert(&mut self, name: impl Into<String>, preset: Preset) -> Result<(), ConfigError> {
        let name = name.into();
        if !is_preset_ref(&name) {
            return Err(ConfigError::InvalidPreset {
                name,
                reason: "a preset name is `$` followed by a lowercase letter".to_owned(),
            });
        }
        self.presets.insert(name, preset);
        Ok(())
    }

    /// The preset called `name` (with its `$`).
    pub fn get(&self, name: &str) -> Option<&Preset> {
        self.presets.get(name)
    }

    /// The preset names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.presets.keys().map(String::as_str)
    }

    /// Expands `$name` for a path: the preset's field, or `Some(empty)` when the preset lacks it;
    /// `None` for an unknown preset.
    pub(crate) fn expand(&self, name: &str, path: &str) -> Option<Vec<String>> {
        self.presets
            .get(name)
            .map(|p| p.field_for(path).cloned().unwrap_or_default())
    }

    /// Warnings for tool names the presets' `auto_approve` and `tools` lists name but that are
    /// not registered: operators `+ ^ !` are stripped, `$references` and globs are
    /// skipped. Built-in presets left as shipped are not checked: they name the built-in tools,
    /// which an application may choose not to register.
    pub fn finalize(&self, registered: &[ToolName]) -> Vec<FinalizeIssue> {
        let builtins = Presets::default();
        let mut issues = Vec::new();
        for (name, preset) in &self.presets {
            if builtins.get(name) == Some(preset) {
                continue;
            }
            let fields = [
                ("auto_approve", preset.auto_approve.as_ref()),
                ("tools", preset.tools.as_ref()),
            ];
            for (field, items) in fields {
                for item in items.into_iter().flatten() {
                    let tool = match item.strip_prefix(['+', '^', '!']) {
                        Some(rest) if !rest.is_empty() => rest,
                        _ => item.as_str(),
                    };
                    if is_preset_ref(tool)
                        || tool.contains('*')
                        || registered.iter().any(|r| *r == *tool)
                    {
                        continue;
                    }
                    issues.push(FinalizeIssue::PresetUnknownTool {
                        preset: name.clone(),
                        tool: tool.to_owned(),
                        field,
                    });
                }
            }
        }
        issues
    }
}
