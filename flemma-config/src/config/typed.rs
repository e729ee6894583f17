//! The typed [`Options`] the layers combine into.

use flemma_ids::ToolName;
use serde_json::{Map, Value};

use super::{Config, Entry};
use crate::error::ConfigError;
use crate::layer::Layer;
use crate::options::Options;
use crate::schema::{OPTIONS, OptionKind};

impl Config {
    /// The typed options (`tools` globs left as written; see [`Config::options_with_tools`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError::Decode`] when the layers combine into a value the option cannot take.
    pub fn options(&self) -> Result<Options, ConfigError> {
        self.options_with_tools(&[])
    }

    /// The typed options, globs in `tools` expanded against the registered tool names.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Decode`] when the layers combine into a value the option cannot take.
    pub fn options_with_tools(&self, registered: &[ToolName]) -> Result<Options, ConfigError> {
        let mut tree = Map::new();
        for def in OPTIONS {
            let value = if def.kind == OptionKind::List {
                Value::from(self.list_with_tools(def.path, registered).items)
            } else {
                self.value_at(def.path)
            };
            let path = if def.path == "tools" {
                "tools.list"
            } else {
                def.path
            };
            insert_path(&mut tree, path, value);
        }
        // Free-form paths (provider parameters, tables of other tools, keyed by full name).
        for layer in Layer::ALL {
            for entry in &self.layers[layer.index()] {
                if let Entry::Scalar { path, .. } = entry
                    && !OPTIONS.iter().any(|d| d.path == path)
                {
                    insert_path(&mut tree, path, self.value_at(path));
                }
            }
        }
        // The lists of the MCP servers a layer narrows (`mcp.servers.<name>.include`).
        for layer in Layer::ALL {
            for entry in &self.layers[layer.index()] {
                if let Entry::ListWrite { path, .. } | Entry::ListOp { path, .. } = entry
                    && path.starts_with("mcp.")
                {
                    insert_path(&mut tree, path, Value::from(self.list(path).items));
                }
            }
        }
        // A frontmatter only narrows the sandbox, the environment and file access: a wider
        // value is the host's (and an error of `Config::diagnostics`).
        for (path, host) in self.widenings() {
            insert_path(&mut tree, path, host);
        }
        let tools = self.list_with_tools("tools", registered);
        let mut options: Options =
            serde_json::from_value(Value::Object(tree)).map_err(|source| ConfigError::Decode {
                what: "options".to_owned(),
                source,
            })?;
        options.tools.list_is_explicit = tools.is_explicit();
        Ok(options)
    }
}

/// Inserts `value` at a resolved path, one tree level per segment (`tools."mcp.fs".cwd` is
/// `tools` → `mcp.fs` → `cwd`).
fn insert_path(tree: &mut Map<String, Value>, path: &str, value: Value) {
    let segments = crate::path::split(path).unwrap_or_default();
    let mut parts = segments.into_iter().peekable();
    let mut node = tree;
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            node.insert(part.to_owned(), value);
            return;
        }
        let child = node
            .entry(part.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !child.is_object() {
            *child = Value::Object(Map::new());
        }
        let Value::Object(next) = child else { return };
        node = next;
    }
}
