//! List options: `append`, `prepend`, `remove` and the replay of every layer's operations.

use flemma_ids::ToolName;

use super::{Config, Entry, ResolvedList, next_generation};
use crate::error::ConfigError;
use crate::glob::GlobList;
use crate::layer::Layer;
use crate::listops::{ListOp, expand_op, parse_list};
use crate::schema::{OptionKind, resolve_path};

impl Config {
    pub(super) fn list_path(path: &str) -> Result<String, ConfigError> {
        let resolved = resolve_path(path, false)?;
        if resolved.kind == OptionKind::List {
            Ok(resolved.path)
        } else {
            Err(ConfigError::NotAList {
                path: path.to_owned(),
            })
        }
    }

    pub(super) fn list_op(
        &mut self,
        layer: Layer,
        path: &str,
        op: ListOp,
    ) -> Result<(), ConfigError> {
        let resolved = Self::list_path(path)?;
        self.push(layer, Entry::ListOp { path: resolved, op }, path);
        Ok(())
    }

    /// Appends an item to a list option (moving it to the end if present).
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownOption`] or [`ConfigError::NotAList`].
    pub fn append(&mut self, layer: Layer, path: &str, item: &str) -> Result<(), ConfigError> {
        self.list_op(layer, path, ListOp::Append(item.to_owned()))
    }

    /// Prepends an item to a list option (moving it to the front if present).
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownOption`] or [`ConfigError::NotAList`].
    pub fn prepend(&mut self, layer: Layer, path: &str, item: &str) -> Result<(), ConfigError> {
        self.list_op(layer, path, ListOp::Prepend(item.to_owned()))
    }

    /// Removes the first equal item from a list option.
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownOption`] or [`ConfigError::NotAList`].
    pub fn remove(&mut self, layer: Layer, path: &str, item: &str) -> Result<(), ConfigError> {
        self.list_op(layer, path, ListOp::Remove(item.to_owned()))
    }

    /// Forgets everything a layer says (a conversation's frontmatter is re-evaluated whole).
    pub fn clear_layer(&mut self, layer: Layer) {
        self.layers[layer.index()].clear();
        self.origins[layer.index()].clear();
        if layer == Layer::Frontmatter {
            self.frontmatter_hooks = None;
            self.stray_option = None;
        }
        self.generation = next_generation();
    }

    /// The operations a layer holds for a list path, presets expanded.
    pub(super) fn layer_ops(&self, layer: Layer, path: &str) -> Vec<ListOp> {
        let expand = |name: &str| self.presets.expand(name, path);
        let mut ops = Vec::new();
        for entry in self.layers[layer.index()]
            .iter()
            .filter(|e| e.path() == path)
        {
            match entry {
                Entry::ListWrite { items, .. } => {
                    for op in parse_list(path, items, &expand).unwrap_or_default() {
                        ops.extend(expand_op(&op, &expand));
                    }
                }
                Entry::ListOp { op, .. } => ops.extend(expand_op(op, &expand)),
                // A function replaces the list (spec §5.2 "takes ownership").
                Entry::Function { .. } => ops.push(ListOp::Set(Vec::new())),
                Entry::Scalar { .. } => {}
            }
        }
        ops
    }

    /// Replays a list option through every layer.
    pub fn list(&self, path: &str) -> ResolvedList {
        self.list_with_tools(path, &[])
    }

    /// Replays a list option, expanding globs in `tools` against the registered tool names.
    pub fn list_with_tools(&self, path: &str, registered: &[ToolName]) -> ResolvedList {
        let path = resolve_path(path, false).map_or_else(|_| path.to_owned(), |r| r.path);
        let mut items: Vec<String> = Vec::new();
        let mut contributors: Vec<Layer> = Vec::new();
        let expand_globs = path == "tools" && !registered.is_empty();
        for layer in Layer::ALL {
            for op in self.layer_ops(layer, &path) {
                let values = |v: &str| -> Vec<String> {
                    if expand_globs && v.contains('*') {
                        // Compiled once per pattern, not once per registered name.
                        let glob = GlobList::new([v]);
                        let mut matched: Vec<String> = registered
                            .iter()
                            .filter(|n| glob.is_match(n.as_str()))
                            .map(|n| n.as_str().to_owned())
                            .collect();
                        matched.sort();
                        if !matched.is_empty() {
                            return matched;
                        }
                    }
                    vec![v.to_owned()]
                };
                let contributed = match op {
                    ListOp::Set(set) => {
                        items = set.iter().flat_map(|v| values(v)).collect();
                        contributors.clear();
                        true
                    }
                    ListOp::Append(v) => {
                        for v in values(&v) {
                            items.retain(|i| *i != v);
                            items.push(v);
                        }
                        true
                    }
                    ListOp::Prepend(v) => {
                        for v in values(&v) {
                            items.retain(|i| *i != v);
                            items.insert(0, v);
                        }
                        true
                    }
                    ListOp::Remove(v) => {
                        let mut removed = false;
                        for v in values(&v) {
                            if let Some(at) = items.iter().position(|i| *i == v) {
                                items.remove(at);
                                removed = true;
                            }
                        }
                        removed
                    }
                };
                if contributed && !contributors.contains(&layer) {
                    contributors.push(layer);
                }
            }
        }
        let source = contributors
            .iter()
            .map(|l| l.letter().to_string())
            .collect::<Vec<_>>()
            .join("+");
        ResolvedList { items, source }
    }
}
