//! The layered option store: four layers of operation logs, replayed on read.

pub(crate) mod builder;
mod diagnostics;
mod lists;
mod policy;
mod typed;

use std::path::{Path, PathBuf};

use flemma_ids::ToolName;
use serde_json::Value;

use crate::diagnostic::Origin;
use crate::error::ConfigError;
use crate::layer::Layer;
use crate::listops::{ListOp, OpKind, parse_list, strings};
use crate::locator::Locator;
use crate::presets::Presets;
use crate::schema::{OPTIONS, OptionKind, default_of, is_table_path, resolve_path};

pub use policy::{AutoApprovePolicy, PolicyContext, PolicyDecision};

/// The option that takes a function.
const AUTO_APPROVE: &str = "tools.auto_approve";

/// The next state stamp (see [`Config::generation`]).
pub(crate) fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// One logged write.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    /// A scalar (or table) value.
    Scalar { path: String, value: Value },
    /// A whole list as written (items may carry operators and `$presets`).
    ListWrite { path: String, items: Vec<String> },
    /// One list operation.
    ListOp { path: String, op: ListOp },
    /// A function as the value of `tools.auto_approve`: replaces the list like a set (and
    /// takes ownership), then decides before what later list operations add.
    Function {
        path: String,
        policy: AutoApprovePolicy,
    },
}

impl Entry {
    fn path(&self) -> &str {
        match self {
            Entry::Scalar { path, .. }
            | Entry::ListWrite { path, .. }
            | Entry::ListOp { path, .. }
            | Entry::Function { path, .. } => path,
        }
    }
}

/// A resolved list and which layers shaped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedList {
    /// The items.
    pub items: Vec<String>,
    /// The contributing layers, lowest first (`"D+F"`).
    pub source: String,
}

impl ResolvedList {
    /// Whether a layer above the defaults contributed (for `tools`: the conversation chose
    /// its tools, so exactly those are offered, an empty list meaning none).
    pub fn is_explicit(&self) -> bool {
        self.source.chars().any(|c| c != 'D' && c != '+')
    }
}

/// Layered options: defaults, setup, runtime and frontmatter op logs, presets and
/// an optional closure policy for `tools.auto_approve`.
///
/// Lists replay every layer bottom-up (`set` replaces and takes ownership, `append`/`prepend`
/// move an item to an end, `remove` drops the first equal item); scalars take the highest
/// layer's last `set`.
///
/// ```
/// use flemma_config::{Config, Layer};
///
/// let mut config = Config::new();
/// config.append(Layer::Setup, "tools.auto_approve", "bash")?;
/// config.set(Layer::Frontmatter, "tools.auto_approve", serde_json::json!(["$standard", "!write"]))?;
/// let list = config.list("tools.auto_approve");
/// assert_eq!(list.items, ["read", "edit", "find", "grep", "ls", "flemma.*"]);
/// assert_eq!(list.source, "F");
/// assert_eq!(config.options()?.tools.max_concurrent, 2);
/// # Ok::<(), flemma_config::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    layers: [Vec<Entry>; 4],
    /// Where each entry of `layers` was written, index for index.
    origins: [Vec<Origin>; 4],
    /// Where the writes being made come from (set by the loaders while they write).
    locator: Locator,
    /// Where the presets loaded from files were defined, by name.
    preset_origins: std::collections::BTreeMap<String, Origin>,
    presets: Presets,
    policy: Option<AutoApprovePolicy>,
    pub(crate) generation: u64,
    /// Files tools may not write: the options files loaded, and those hosts add.
    protected: Vec<PathBuf>,
    /// Host sections of the options files (`[mcp]`), kept for the crates that read them.
    pub(crate) sections: crate::sections::Sections,
    /// The `hooks` a frontmatter wrote, where the host allows it
    /// ([`Config::frontmatter_hooks`]).
    pub(crate) frontmatter_hooks: Option<Value>,
    /// The host's word on frontmatter hooks, over `[hooks] allow_frontmatter`.
    pub(crate) allow_frontmatter_hooks: Option<bool>,
    /// The host's word on frontmatters that widen, over `[frontmatter] may_widen`.
    pub(crate) may_widen: Option<bool>,
    /// The first key of a JSON frontmatter without a `"flemma"` key that names an option
    /// (`"tools"`), with its line: a template variable the user likely meant as an option.
    pub(crate) stray_option: Option<(String, u32)>,
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl Config {
    /// The defaults and the built-in presets.
    pub fn new() -> Self {
        let mut layers: [Vec<Entry>; 4] = Default::default();
        let mut origins: [Vec<Origin>; 4] = Default::default();
        for def in OPTIONS.iter().filter(|d| d.kind == OptionKind::List) {
            let items = strings(def.path, &(def.default)()).unwrap_or_default();
            layers[Layer::Defaults.index()].push(Entry::ListWrite {
                path: def.path.to_owned(),
                items,
            });
            origins[Layer::Defaults.index()].push(Origin::Layer(Layer::Defaults));
        }
        Self {
            layers,
            origins,
            locator: Locator::Layer,
            preset_origins: std::collections::BTreeMap::new(),
            presets: Presets::default(),
            policy: None,
            generation: next_generation(),
            protected: Vec::new(),
            sections: crate::sections::Sections::new(),
            frontmatter_hooks: None,
            allow_frontmatter_hooks: None,
            may_widen: None,
            stray_option: None,
        }
    }

    /// Whether only the built-in defaults say what `path` is (no options file, runtime
    /// setting or frontmatter writes it): `approval explain` names a decision the defaults
    /// made so (`"write" of the default $standard`).
    ///
    /// ```
    /// use flemma_config::{Config, Layer};
    /// let mut config = Config::new();
    /// assert!(config.is_default("tools.auto_approve"));
    /// config.append(Layer::Frontmatter, "tools.auto_approve", "bash")?;
    /// assert!(!config.is_default("tools.auto_approve"));
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn is_default(&self, path: &str) -> bool {
        let path = resolve_path(path, false).map_or_else(|_| path.to_owned(), |r| r.path);
        Layer::ALL
            .iter()
            .filter(|layer| **layer != Layer::Defaults)
            .all(|layer| !self.layers[layer.index()].iter().any(|e| e.path() == path))
    }

    /// Whether the frontmatter layer writes `path` (a resolved option path).
    pub(crate) fn frontmatter_writes(&self, path: &str) -> bool {
        self.layers[Layer::Frontmatter.index()]
            .iter()
            .any(|e| e.path() == path)
    }

    /// Where the frontmatter first wrote `path`.
    pub(crate) fn frontmatter_origin(&self, path: &str) -> Option<Origin> {
        let layer = Layer::Frontmatter.index();
        self.layers[layer]
            .iter()
            .zip(&self.origins[layer])
            .find(|(e, _)| e.path() == path)
            .map(|(_, origin)| origin.clone())
    }

    /// The value of a scalar option as the layers give it (its default when none does).
    pub(crate) fn value_of(&self, path: &str) -> Value {
        self.value_at(path)
    }

    /// The files tools may not write while `sandbox.policy.protect_conversation` is on: every
    /// file [`load_toml_file`](Self::load_toml_file) read, then those added with
    /// [`protect_file`](Self::protect_file), absolute, in that order, without repeats. The
    /// conversation's own file is added by the tools crate.
    pub fn protected_files(&self) -> &[PathBuf] {
        &self.protected
    }

    /// Adds a file tools may not write (an options file the host read itself, a lock file):
    /// made absolute against the working directory; the sandbox resolves its symlinks.
    pub fn protect_file(&mut self, path: &Path) {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
        if !self.protected.contains(&path) {
            self.protected.push(path);
        }
    }

    /// A stamp of the options' state, unique across every `Config` of the process: it changes
    /// on every change, and two configs share it only when one is an unchanged clone of the
    /// other. Caches keyed by it (compiled globs) stay valid until it changes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The presets in force.
    pub fn presets(&self) -> &Presets {
        &self.presets
    }

    /// The presets, to add or override.
    pub fn presets_mut(&mut self) -> &mut Presets {
        self.generation = next_generation();
        &mut self.presets
    }

    /// Where a preset loaded from a file was defined.
    pub(crate) fn preset_origin(&self, name: &str) -> Option<&Origin> {
        self.preset_origins.get(name)
    }

    pub(crate) fn set_preset_origin(&mut self, name: &str, origin: Origin) {
        self.preset_origins.insert(name.to_owned(), origin);
    }

    /// The closure policy for `tools.auto_approve`, if one is set.
    pub fn auto_approve_policy(&self) -> Option<&AutoApprovePolicy> {
        self.policy.as_ref()
    }

    /// Sets the host's closure policy, consulted before the value of `tools.auto_approve` (a
    /// function a layer set, then the list); [`PolicyDecision::Pass`] falls through to it.
    pub fn set_auto_approve_policy(&mut self, policy: Option<AutoApprovePolicy>) {
        self.generation = next_generation();
        self.policy = policy;
    }

    /// Sets `tools.auto_approve` to a function in a layer: what a Lua frontmatter's
    /// `flemma.opt.tools.auto_approve = function(tool_name, input, ctx) … end` writes.
    ///
    /// The function replaces the list like a list `set` (so [`Config::layer_has_set`] is true for
    /// the layer: the conversation owns its policy, and the sandbox resolver stands back); a later
    /// list `set` replaces the function in turn. List operations written after it
    /// (`:append("bash")`) build a list that is consulted when the function passes (returns `nil`).
    /// The config resolver asks the function per call, after the host's closure
    /// ([`Config::set_auto_approve_policy`]) and before that list.
    ///
    /// ```
    /// use flemma_config::{AutoApprovePolicy, Config, Layer, PolicyDecision};
    ///
    /// let mut config = Config::new();
    /// let grep_only = AutoApprovePolicy::new(|tool, _| {
    ///     if tool == "grep" { PolicyDecision::Approve } else { PolicyDecision::Pass }
    /// });
    /// config.set_auto_approve_function(Layer::Frontmatter, "tools.auto_approve", grep_only)?;
    /// assert!(config.auto_approve_function().is_some());
    /// assert!(config.layer_has_set(Layer::Frontmatter, "tools.auto_approve"));
    /// assert_eq!(config.list("tools.auto_approve").items, Vec::<String>::new(), "no $standard");
    ///
    /// let wrong = AutoApprovePolicy::new(|_, _| PolicyDecision::Pass);
    /// let err = config.set_auto_approve_function(Layer::Frontmatter, "tools.max_concurrent", wrong);
    /// assert_eq!(
    ///     err.unwrap_err().to_string(),
    ///     "option `tools.max_concurrent` expects a non-negative integer, got a function"
    /// );
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownOption`] for a path that names no option, [`ConfigError::Type`]
    /// for an option other than `tools.auto_approve` (only it takes a function).
    pub fn set_auto_approve_function(
        &mut self,
        layer: Layer,
        path: &str,
        policy: AutoApprovePolicy,
    ) -> Result<(), ConfigError> {
        let resolved = resolve_path(path, false)?;
        if resolved.path != AUTO_APPROVE {
            let expected = match resolved.kind {
                OptionKind::Any => "a string, number, boolean or table",
                kind => kind.describe(),
            };
            return Err(ConfigError::Type {
                path: resolved.path,
                expected,
                found: "a function".to_owned(),
            });
        }
        self.push(
            layer,
            Entry::Function {
                path: resolved.path,
                policy,
            },
            path,
        );
        Ok(())
    }

    /// The function `tools.auto_approve` holds once every layer is replayed
    /// ([`Config::set_auto_approve_function`]): the last function written, unless a later list
    /// `set` replaced it.
    pub fn auto_approve_function(&self) -> Option<&AutoApprovePolicy> {
        // Asked for every call: without a function in any layer there is nothing to find, and
        // the lists need not be parsed.
        let has_function = self
            .layers
            .iter()
            .flatten()
            .any(|entry| matches!(entry, Entry::Function { path, .. } if path == AUTO_APPROVE));
        if !has_function {
            return None;
        }
        let expand = |name: &str| self.presets.expand(name, AUTO_APPROVE);
        let mut function = None;
        for entry in Layer::ALL
            .iter()
            .flat_map(|layer| &self.layers[layer.index()])
        {
            match entry {
                Entry::Function { path, policy } if path == AUTO_APPROVE => function = Some(policy),
                Entry::ListWrite { path, items } if path == AUTO_APPROVE => {
                    let ops = parse_list(path, items, &expand).unwrap_or_default();
                    if ops.iter().any(|op| op.kind() == OpKind::Set) {
                        function = None;
                    }
                }
                _ => {}
            }
        }
        function
    }

    /// Sets an option in a layer. Tables set each of their keys; a list value may carry list
    /// operations and `$preset` references.
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownOption`] (with a did-you-mean), [`ConfigError::Type`],
    /// [`ConfigError::InvalidListItem`].
    pub fn set(
        &mut self,
        layer: Layer,
        path: &str,
        value: impl Into<Value>,
    ) -> Result<(), ConfigError> {
        let value = value.into();
        if layer == Layer::Frontmatter
            && self.frontmatter_hooks_allowed()
            && self.write_frontmatter_hooks(path, &value)?
        {
            return Ok(());
        }
        let resolved = resolve_path(path, value.is_boolean());
        // An option that cannot be written here is refused whole, tables included.
        if matches!(resolved, Err(ConfigError::Unsupported { .. })) {
            return resolved.map(|_| ());
        }
        let takes_tables = resolved
            .as_ref()
            .is_ok_and(|r| matches!(r.kind, OptionKind::StringMap | OptionKind::Any));
        match value {
            // A table of options: `tools = { max_concurrent = 4, list = ["bash"] }`.
            Value::Object(map) if !map.is_empty() && !takes_tables => {
                for (key, v) in map {
                    self.set(layer, &crate::path::join(path, &key), v)?;
                }
                Ok(())
            }
            // An empty table of options (a `[sandbox]` header whose keys are all commented
            // out) sets nothing.
            Value::Object(map) if map.is_empty() && !takes_tables && is_table_path(path) => Ok(()),
            value => {
                let resolved = resolved?;
                self.set_leaf(layer, path, &resolved.path, resolved.kind, value)
            }
        }
    }

    fn set_leaf(
        &mut self,
        layer: Layer,
        written: &str,
        path: &str,
        kind: OptionKind,
        value: Value,
    ) -> Result<(), ConfigError> {
        let entry = if kind == OptionKind::List {
            let items = strings(path, &value)?;
            // Check the operators now so that errors point at the write, not a later read.
            parse_list(path, &items, &|_| None)?;
            Entry::ListWrite {
                path: path.to_owned(),
                items,
            }
        } else {
            if !value.is_null() && !kind.accepts(&value) {
                return Err(ConfigError::Type {
                    path: path.to_owned(),
                    expected: kind.describe(),
                    found: value.to_string(),
                });
            }
            // A server's `tool_timeout` narrowed by a layer: seconds a `Duration` can hold.
            if path.starts_with("mcp.")
                && path.ends_with(".tool_timeout")
                && value
                    .as_f64()
                    .is_some_and(|s| std::time::Duration::try_from_secs_f64(s).is_err() || s == 0.0)
            {
                return Err(ConfigError::Type {
                    path: path.to_owned(),
                    expected: "a positive number of seconds",
                    found: value.to_string(),
                });
            }
            Entry::Scalar {
                path: path.to_owned(),
                value,
            }
        };
        self.push(layer, entry, written);
        Ok(())
    }

    /// Logs a write made to `written` (the path as written, for its [`Origin`]).
    fn push(&mut self, layer: Layer, entry: Entry, written: &str) {
        let origin = self.locator.origin(layer, written);
        self.layers[layer.index()].push(entry);
        self.origins[layer.index()].push(origin);
        self.generation = next_generation();
    }

    /// Says where the writes that follow come from, until [`Config::locate_writes`] is called
    /// again (the loaders end with [`Locator::Layer`]).
    pub(crate) fn locate_writes(&mut self, locator: Locator) {
        self.locator = locator;
    }

    /// Sets what the DEFAULTS layer says of `tools`: the tools enabled by default, which every
    /// other layer's operations start from (every registered, enabled tool is appended). Replaces
    /// what the layer said before; the registry does this on each evaluation
    /// (`flemma_runtime::ToolRegistry::evaluate`), since tools come and go.
    ///
    /// ```
    /// use flemma_config::{Config, Layer};
    /// use flemma_ids::ToolName;
    ///
    /// let mut config = Config::new();
    /// config.set_tool_defaults(["bash", "read", "write"].map(|n| ToolName::new(n).unwrap()));
    /// config.remove(Layer::Frontmatter, "tools", "write")?;
    /// let list = config.list("tools");
    /// assert_eq!(list.items, ["bash", "read"]);
    /// assert_eq!(list.source, "D+F");
    /// assert!(list.is_explicit());
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    pub fn set_tool_defaults(&mut self, enabled: impl IntoIterator<Item = ToolName>) {
        let defaults = Layer::Defaults.index();
        let (mut layer, mut origins): (Vec<Entry>, Vec<Origin>) =
            std::mem::take(&mut self.layers[defaults])
                .into_iter()
                .zip(std::mem::take(&mut self.origins[defaults]))
                .filter(|(entry, _)| entry.path() != "tools")
                .unzip();
        layer.push(Entry::ListOp {
            path: "tools".to_owned(),
            op: ListOp::Set(enabled.into_iter().map(|n| n.as_str().to_owned()).collect()),
        });
        origins.push(Origin::Layer(Layer::Defaults));
        self.layers[defaults] = layer;
        self.origins[defaults] = origins;
        self.generation = next_generation();
    }

    /// The value of a scalar option: the highest layer's last set, else the default; `null`
    /// for a key of a tool's table that no layer sets.
    ///
    /// The frontmatter is the highest layer, except for `sandbox.enabled`: a RUNTIME setting
    /// beats the frontmatter there.
    ///
    /// ```
    /// use flemma_config::{Config, Layer};
    ///
    /// let mut config = Config::new();
    /// config.set(Layer::Setup, "tools.\"mcp.fs.read\".cwd", "/srv")?;
    /// assert_eq!(config.scalar("tools.\"mcp.fs.read\".cwd")?, "/srv");
    /// assert_eq!(config.scalar("tools.max_concurrent")?, 2);
    /// let typo = config.scalar("tools.max_concurent").unwrap_err();
    /// assert!(typo.to_string().contains("did you mean `tools.max_concurrent`"));
    /// # Ok::<(), flemma_config::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownOption`] (with a did-you-mean) for a path that names no option.
    pub fn scalar(&self, path: &str) -> Result<Value, ConfigError> {
        Ok(self.value_at(&resolve_path(path, false)?.path))
    }

    /// [`Config::scalar`] of a resolved path.
    fn value_at(&self, path: &str) -> Value {
        for layer in Layer::lookup_order(path) {
            let last = self.layers[layer.index()]
                .iter()
                .rev()
                .find_map(|e| match e {
                    Entry::Scalar { path: p, value } if p == path => Some(value),
                    _ => None,
                });
            if let Some(value) = last.filter(|v| !v.is_null()) {
                return value.clone();
            }
        }
        default_of(path)
    }

    /// The last value a layer sets for a scalar path, if it sets one.
    ///
    /// # Errors
    ///
    /// [`ConfigError::UnknownOption`] (with a did-you-mean) for a path that names no option.
    pub fn layer_scalar(&self, layer: Layer, path: &str) -> Result<Option<Value>, ConfigError> {
        let path = resolve_path(path, false)?.path;
        Ok(self.layers[layer.index()]
            .iter()
            .rev()
            .find_map(|e| match e {
                Entry::Scalar { path: p, value } if *p == path && !value.is_null() => {
                    Some(value.clone())
                }
                _ => None,
            }))
    }

    /// Whether a layer sets a path (for lists: a write that replaces the list).
    pub fn layer_has_set(&self, layer: Layer, path: &str) -> bool {
        let path = resolve_path(path, false).map_or_else(|_| path.to_owned(), |r| r.path);
        self.layers[layer.index()]
            .iter()
            .any(|e| matches!(e, Entry::Scalar { path: p, .. } if *p == path))
            || self
                .layer_ops(layer, &path)
                .iter()
                .any(|op| op.kind() == OpKind::Set)
    }

    /// Whether a layer holds an operation of `kind` on a list path, for `value` when given
    /// (presets expanded: removing `$standard` removes `write`).
    pub fn layer_has_op(
        &self,
        layer: Layer,
        kind: OpKind,
        path: &str,
        value: Option<&str>,
    ) -> bool {
        let path = resolve_path(path, false).map_or_else(|_| path.to_owned(), |r| r.path);
        self.layer_ops(layer, &path).iter().any(|op| {
            op.kind() == kind
                && value.is_none_or(|v| match op {
                    ListOp::Set(items) => items.iter().any(|i| i == v),
                    ListOp::Append(i) | ListOp::Prepend(i) | ListOp::Remove(i) => i == v,
                })
        })
    }
}
