//! [`ToolRegistry`]: the tools a host offers, registered directly or by asynchronous
//! [`ToolSource`]s, and the tool set of one conversation.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use flemma_config::Options;
use flemma_ids::ToolName;
use flemma_schema::ToolSpec;
use tokio::sync::watch;

use flemma_core::Tool;
use flemma_schema::Capability;

/// Something the registry noticed that a host may want to show (the library prints nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryWarning {
    /// A tool was registered under a name already in use: `tool '<name>' redefined
    /// (previously registered, now overwritten)`.
    Redefined(ToolName),
    /// An asynchronous source failed (or timed out): `Async tool source failed: <err>`.
    SourceFailed {
        /// The source's name.
        source: String,
        /// Its error (`Timed out after <n>s` for a timeout).
        error: String,
    },
    /// Something a source noticed while registering (a tool it skipped, a name it had to
    /// change): `<source>: <message>`, from [`Registrar::warn`].
    Source {
        /// The source's name.
        source: String,
        /// What it noticed.
        message: String,
    },
}

impl fmt::Display for RegistryWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryWarning::Redefined(name) => write!(
                f,
                "tool '{name}' redefined (previously registered, now overwritten)"
            ),
            RegistryWarning::SourceFailed { error, .. } => {
                write!(f, "Async tool source failed: {error}")
            }
            RegistryWarning::Source { source, message } => write!(f, "{source}: {message}"),
        }
    }
}

/// Errors of the registry itself.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A resolver name the approval chain refuses.
    #[error("cannot register the approval resolver")]
    Approval(#[from] flemma_approval::ApprovalError),
    /// [`ToolRegistry::add_source`] needs a tokio runtime to run the source on.
    #[error("tool source '{source_name}' needs a tokio runtime")]
    NoRuntime {
        /// The source's name.
        source_name: String,
    },
}

/// The tools a host offers. Cheap to clone: clones share one registry, so a source started on
/// one handle registers into all.
///
/// ```
/// use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
/// use flemma_runtime::ToolRegistry;
///
/// let registry = ToolRegistry::new();
/// registry.register(tool_fn(ToolDefinition::builder("now", "The time.")?.build()?, |_, _| ToolOutput::text("noon")));
/// assert!(registry.is_executable("now"));
/// assert_eq!(registry.names(), ["now"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct ToolRegistry {
    shared: Arc<Shared>,
}

struct Shared {
    state: RwLock<State>,
    warnings: Mutex<Vec<RegistryWarning>>,
    /// The approval chain: the built-in resolvers, the hosts' and the modules'. Replaced
    /// whole on change, so a decision in flight keeps the chain it started with.
    approval: RwLock<Arc<flemma_approval::Chain>>,
    /// Which tools each module registered.
    modules: Mutex<BTreeMap<String, Vec<ToolName>>>,
    /// The hooks (`PreToolUse` ones decide through the chain's hooks resolver).
    hooks: crate::hooks::Hooks,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            state: RwLock::default(),
            warnings: Mutex::default(),
            approval: RwLock::new(Arc::new(flemma_approval::Chain::with_builtins())),
            modules: Mutex::default(),
            hooks: crate::hooks::Hooks::default(),
        }
    }
}

/// The registered tools, and a revision that changes with every registration or removal (what
/// a cache of anything computed from the tool set is keyed by; the tools' addresses would not
/// do: a tool dropped and another registered may share an address).
#[derive(Default)]
struct Tools {
    map: BTreeMap<ToolName, Arc<dyn Tool>>,
    revision: u64,
}

impl Tools {
    fn insert(&mut self, name: ToolName, tool: Arc<dyn Tool>) -> Option<Arc<dyn Tool>> {
        self.revision += 1;
        self.map.insert(name, tool)
    }

    fn remove(&mut self, name: &str) -> Option<Arc<dyn Tool>> {
        let removed = self.map.remove(name);
        if removed.is_some() {
            self.revision += 1;
        }
        removed
    }

    fn clear(&mut self) {
        self.revision += 1;
        self.map.clear();
    }

    fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.map.get(name)
    }

    fn contains_key(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    fn values(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.map.values()
    }

    fn keys(&self) -> impl Iterator<Item = &ToolName> {
        self.map.keys()
    }
}

struct State {
    tools: Tools,
    /// Bumped by [`ToolRegistry::clear`]: sources of an older generation can no longer
    /// register or complete.
    generation: u64,
    /// Sources started and not yet done; readiness is `pending == 0`.
    pending: usize,
    ready: watch::Sender<bool>,
    /// The tools each source registered through its [`Registrar`], by the source's id, so
    /// [`Registrar::replace`] removes only its own.
    sources: BTreeMap<u64, BTreeMap<ToolName, Arc<dyn Tool>>>,
    /// The id the next source gets.
    next_source: u64,
}

impl Default for State {
    fn default() -> Self {
        Self {
            tools: Tools::default(),
            generation: 0,
            pending: 0,
            ready: watch::Sender::new(true),
            sources: BTreeMap::new(),
            next_source: 0,
        }
    }
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.shared
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.shared
            .state
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn warn(&self, warning: RegistryWarning) {
        tracing::warn!(%warning, "tool registry");
        self.shared
            .warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(warning);
    }

    /// Registers a tool under its definition's name; a tool already registered under that
    /// name is replaced, with a [`RegistryWarning::Redefined`] (also returned).
    pub fn register(&self, tool: impl Tool) -> Option<RegistryWarning> {
        self.register_arc(Arc::new(tool))
    }

    /// [`register`](Self::register) for a shared tool.
    pub fn register_arc(&self, tool: Arc<dyn Tool>) -> Option<RegistryWarning> {
        let name = tool.definition().name().clone();
        let replaced = self.write().tools.insert(name.clone(), tool).is_some();
        replaced.then(|| {
            let warning = RegistryWarning::Redefined(name);
            self.warn(warning.clone());
            warning
        })
    }

    /// Removes a tool; returns it when it was registered.
    pub fn unregister(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.write().tools.remove(name)
    }

    /// The tool registered under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.read().tools.get(name).cloned()
    }

    /// Whether a tool is registered under `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.read().tools.contains_key(name)
    }

    /// The registered tools, sorted by name.
    pub fn list(&self) -> Vec<Arc<dyn Tool>> {
        self.read().tools.values().cloned().collect()
    }

    /// A number that changes whenever a tool is registered, replaced or removed (in this
    /// registry and its clones): what a cache of anything computed from the tool set is
    /// keyed by.
    pub fn revision(&self) -> u64 {
        self.read().tools.revision
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<ToolName> {
        self.read().tools.keys().cloned().collect()
    }

    /// Whether `name` is registered and executable.
    pub fn is_executable(&self, name: &str) -> bool {
        self.read()
            .tools
            .get(name)
            .is_some_and(|t| t.definition().is_executable())
    }

    /// Whether the tool `name` declares `capability` (false for unknown tools).
    pub fn has_capability(&self, name: &str, capability: Capability) -> bool {
        self.read()
            .tools
            .get(name)
            .is_some_and(|t| t.definition().has_capability(capability))
    }

    /// The approval chain calls of these tools go through: the built-in resolvers plus those
    /// registered here and by modules. A snapshot: later registrations make a new chain.
    pub fn approval_chain(&self) -> Arc<flemma_approval::Chain> {
        Arc::clone(
            &self
                .shared
                .approval
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// Changes the approval chain (register or remove resolvers).
    ///
    /// # Errors
    ///
    /// Whatever `change` returns; the chain is unchanged then.
    pub fn update_approval_chain<E>(
        &self,
        change: impl FnOnce(&mut flemma_approval::Chain) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut slot = self
            .shared
            .approval
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut chain = (**slot).clone();
        change(&mut chain)?;
        *slot = Arc::new(chain);
        Ok(())
    }

    /// The hooks registered here (shared by every clone of the registry).
    pub fn hooks(&self) -> &crate::hooks::Hooks {
        &self.shared.hooks
    }

    /// Registers a hook (replacing one of the same name). The first hook listening to
    /// `PreToolUse` puts the hooks resolver ([`HOOKS_RESOLVER`](crate::hooks::HOOKS_RESOLVER),
    /// at [`HOOKS_PRIORITY`](crate::hooks::HOOKS_PRIORITY)) into the approval chain.
    ///
    /// # Errors
    ///
    /// None today; [`RegistryError::Approval`] is kept for a chain that refuses the resolver.
    pub fn register_hook(&self, hook: crate::hooks::HookRegistration) -> Result<(), RegistryError> {
        let decides = hook.listens_to(crate::hooks::HookEvent::PreToolUse);
        self.shared.hooks.register(hook);
        if decides
            && self
                .approval_chain()
                .get(crate::hooks::HOOKS_RESOLVER)
                .is_none()
        {
            let resolver = crate::hooks::resolver_for(&self.shared.hooks);
            self.update_approval_chain(|chain| {
                chain
                    .register(
                        crate::hooks::HOOKS_RESOLVER,
                        crate::hooks::HOOKS_PRIORITY,
                        resolver,
                    )
                    .map(drop)
            })?;
        }
        Ok(())
    }

    /// Removes the hook `name`; returns whether there was one. (The hooks resolver stays in
    /// the chain: with no `PreToolUse` hook it has no opinion.)
    pub fn unregister_hook(&self, name: &str) -> bool {
        self.shared.hooks.unregister(name)
    }

    /// Registers a module's tools and its approval resolver, under the module's name; a module
    /// registered again replaces the previous one.
    ///
    /// # Errors
    ///
    /// [`RegistryError::Approval`] when the module's name is not a valid resolver name.
    pub fn register_module(&self, module: crate::ToolModule) -> Result<(), RegistryError> {
        let crate::ToolModule {
            name,
            tools,
            resolver,
        } = module;
        self.update_approval_chain(|chain| {
            chain.unregister(&name);
            match resolver {
                Some((priority, resolver)) => {
                    chain.register_module(&name, priority, resolver).map(drop)
                }
                None => Ok(()),
            }
        })?;
        self.unregister_module_tools(&name);
        let names = tools
            .iter()
            .map(|t| t.definition().name().clone())
            .collect();
        for tool in tools {
            self.register_arc(tool);
        }
        self.shared
            .modules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name, names);
        Ok(())
    }

    /// Removes a module: its tools and its resolver. Returns whether it was registered.
    pub fn unregister_module(&self, name: &str) -> bool {
        let mut removed = false;
        let _ = self.update_approval_chain(|chain| {
            removed |= chain.unregister(name);
            Ok::<(), std::convert::Infallible>(())
        });
        removed | self.unregister_module_tools(name)
    }

    fn unregister_module_tools(&self, name: &str) -> bool {
        let tools = self
            .shared
            .modules
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
        let Some(tools) = tools else {
            return false;
        };
        let mut state = self.write();
        for tool in tools {
            state.tools.remove(tool.as_str());
        }
        true
    }

    /// Removes every tool and forgets running sources: their later registrations and
    /// completions are ignored.
    pub fn clear(&self) {
        let mut state = self.write();
        state.tools.clear();
        state.sources.clear();
        state.generation += 1;
        state.pending = 0;
        state.ready.send_replace(true);
    }

    /// The warnings noticed since the last call.
    pub fn take_warnings(&self) -> Vec<RegistryWarning> {
        std::mem::take(
            &mut *self
                .shared
                .warnings
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The tools one conversation offers: those its `tools` list names when a
    /// layer above the defaults shaped it (disabled ones included), else every enabled tool;
    /// never one [unavailable](flemma_core::ToolDefinitionBuilder::available_when) under `options`.
    /// Sorted by name; names that no tool has are skipped (read `options` from
    /// [`evaluate`](Self::evaluate), which sets the list's defaults and reports such names).
    pub fn tool_set(&self, options: &Options) -> Vec<Arc<dyn Tool>> {
        let state = self.read();
        if options.tools.list_is_explicit {
            let mut named: Vec<Arc<dyn Tool>> = options
                .tools
                .list
                .iter()
                .filter_map(|name| state.tools.get(name.as_str()).cloned())
                .filter(|t| t.definition().is_available(options))
                .collect();
            named.sort_by(|a, b| a.definition().name().cmp(b.definition().name()));
            named.dedup_by(|a, b| a.definition().name() == b.definition().name());
            named
        } else {
            state
                .tools
                .values()
                .filter(|t| t.definition().is_enabled(options))
                .filter(|t| t.definition().is_available(options))
                .cloned()
                .collect()
        }
    }

    /// The specs of [`tool_set`](Self::tool_set), sorted by name, harness parameters
    /// included: what a request offers the model.
    pub fn specs_for_prompt(&self, options: &Options) -> Vec<ToolSpec> {
        self.tool_set(options)
            .iter()
            .map(|t| t.definition().spec().clone())
            .collect()
    }

    /// [`specs_for_prompt`](Self::specs_for_prompt) once every source is done (the tool list is
    /// part of the prompt-cache prefix, so a request waits for it).
    pub async fn specs_when_ready(&self, options: &Options) -> Vec<ToolSpec> {
        self.ready().await;
        self.specs_for_prompt(options)
    }

    /// Whether no source is still loading.
    pub fn is_ready(&self) -> bool {
        self.read().pending == 0
    }

    /// Resolves when every source started so far is done; building a prompt
    /// waits on it, because the tool list is part of the prompt-cache prefix.
    pub async fn ready(&self) {
        let mut receiver = self.read().ready.subscribe();
        // The sender lives in the registry, which `self` keeps alive.
        let _ = receiver.wait_for(|ready| *ready).await;
    }

    /// Starts an asynchronous source on the current tokio runtime. Its
    /// registrations land as they come; it counts as done when `resolve` returns (an error
    /// or a panic becomes a [`RegistryWarning::SourceFailed`]), when it calls
    /// [`Registrar::done`], or after its timeout (`default_timeout` when it names none),
    /// whichever is first.
    ///
    /// # Errors
    ///
    /// [`RegistryError::NoRuntime`] outside a tokio runtime.
    pub fn add_source(
        &self,
        source: impl ToolSource,
        default_timeout: Duration,
    ) -> Result<(), RegistryError> {
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|_| RegistryError::NoRuntime {
                source_name: source.name().to_owned(),
            })?;
        let (generation, id) = {
            let mut state = self.write();
            state.pending += 1;
            state.ready.send_replace(false);
            state.next_source += 1;
            (state.generation, state.next_source)
        };
        let registrar = Registrar {
            registry: Arc::downgrade(&self.shared),
            generation,
            id,
            source: source.name().to_owned(),
            done: Arc::new(AtomicBool::new(false)),
        };
        let timeout = source.timeout().unwrap_or(default_timeout);
        let source = Arc::new(source);
        runtime.spawn(async move {
            let mut task = {
                let registrar = registrar.clone();
                let source = Arc::clone(&source);
                tokio::spawn(async move { source.resolve(registrar).await })
            };
            let result = tokio::time::timeout(timeout, &mut task).await;
            let error = match result {
                Ok(Ok(Ok(()))) => None,
                Ok(Ok(Err(error))) => Some(error.to_string()),
                Ok(Err(join_error)) => Some(panic_text(join_error)),
                Err(_) => {
                    task.abort();
                    Some(format!("Timed out after {}s", timeout.as_secs()))
                }
            };
            registrar.done(error);
        });
        Ok(())
    }

    fn source_done(&self, generation: u64, source: &str, error: Option<String>) {
        {
            let mut state = self.write();
            if state.generation != generation {
                return;
            }
            state.pending = state.pending.saturating_sub(1);
            if state.pending == 0 {
                state.ready.send_replace(true);
            }
        }
        if let Some(error) = error {
            self.warn(RegistryWarning::SourceFailed {
                source: source.to_owned(),
                error,
            });
        }
    }
}

fn panic_text(error: tokio::task::JoinError) -> String {
    match error.try_into_panic() {
        Ok(payload) => panic_payload_text(payload.as_ref()),
        Err(error) => error.to_string(),
    }
}

/// The message of a panic.
pub(crate) fn panic_payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "the tool panicked".to_owned())
}

impl flemma_approval::ToolTraits for ToolRegistry {
    fn auto_approves_if_sandboxed(&self, tool: &ToolName) -> bool {
        self.has_capability(tool.as_str(), Capability::AutoApprovesIfSandboxed)
    }
}

/// What a [`ToolSource`] registers through.
///
/// A source may keep a clone for as long as it runs and register, or
/// [replace](Self::replace) its tools, at any time (an MCP server whose tool list changed).
/// A registrar does not keep the registry alive: once every [`ToolRegistry`] handle is
/// dropped, its calls do nothing (and `register`/`replace` return `false`), so a source
/// that holds its registrar and is held by its tools forms no cycle.
#[derive(Clone)]
pub struct Registrar {
    registry: Weak<Shared>,
    generation: u64,
    /// Tells this source's tools from other sources' (names may repeat).
    id: u64,
    source: String,
    done: Arc<AtomicBool>,
}

impl fmt::Debug for Registrar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registrar")
            .field("source", &self.source)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Registrar {
    /// The registry, while it exists and was not [cleared](ToolRegistry::clear) since the
    /// source started.
    fn current(&self) -> Option<ToolRegistry> {
        let registry = ToolRegistry {
            shared: self.registry.upgrade()?,
        };
        let current = registry.read().generation == self.generation;
        current.then_some(registry)
    }

    /// Registers a tool, unless the registry was [cleared](ToolRegistry::clear) since the
    /// source started or is gone (then it is dropped and `false` returned). A tool already
    /// registered under that name is replaced, with a [`RegistryWarning::Redefined`].
    pub fn register(&self, tool: impl Tool) -> bool {
        self.register_arc(Arc::new(tool))
    }

    /// [`register`](Self::register) for a shared tool.
    pub fn register_arc(&self, tool: Arc<dyn Tool>) -> bool {
        let Some(registry) = self.current() else {
            return false;
        };
        let name = tool.definition().name().clone();
        let replaced = {
            let mut state = registry.write();
            if state.generation != self.generation {
                return false;
            }
            state
                .sources
                .entry(self.id)
                .or_default()
                .insert(name.clone(), Arc::clone(&tool));
            state.tools.insert(name.clone(), tool).is_some()
        };
        if replaced {
            registry.warn(RegistryWarning::Redefined(name));
        }
        true
    }

    /// Replaces the tools this source registered (through this registrar or its clones) with
    /// `tools`, in one step: a reader of the registry sees the old set or the new one, never
    /// a mix. A tool of the old set missing from `tools` is removed, one with the same name
    /// is replaced (no warning: it is the source's own), a new one is added. A new name that
    /// replaces a tool registered otherwise (by the host, another source) gives a
    /// [`RegistryWarning::Redefined`] as [`register`](Self::register) does. A tool of the old
    /// set that was since unregistered or replaced by someone else is left alone.
    ///
    /// Returns `false`, changing nothing, when the registry was
    /// [cleared](ToolRegistry::clear) since the source started or is gone.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use async_trait::async_trait;
    /// use flemma_runtime::{Registrar, ToolSource};
    /// use flemma_core::{Tool, ToolDefinition, ToolOutput, tool_fn};
    ///
    /// fn tool(name: &str) -> Arc<dyn Tool> {
    ///     let def = ToolDefinition::builder(name, "A remote tool.").unwrap().build().unwrap();
    ///     Arc::new(tool_fn(def, |_, _| ToolOutput::text("ok")))
    /// }
    ///
    /// /// Registers two tools, then hands its registrar to the host.
    /// struct Remote(std::sync::Mutex<Option<tokio::sync::oneshot::Sender<Registrar>>>);
    ///
    /// #[async_trait]
    /// impl ToolSource for Remote {
    ///     fn name(&self) -> &str { "remote" }
    ///
    ///     async fn resolve(&self, registrar: Registrar) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    ///         registrar.replace([tool("remote.a"), tool("remote.b")]);
    ///         if let Some(keep) = self.0.lock().unwrap().take() {
    ///             let _ = keep.send(registrar);
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
    /// # runtime.block_on(async {
    /// let registry = flemma_runtime::ToolRegistry::new();
    /// let (keep, kept) = tokio::sync::oneshot::channel();
    /// registry.add_source(Remote(std::sync::Mutex::new(Some(keep))), std::time::Duration::from_secs(5))?;
    /// registry.ready().await;
    /// assert_eq!(registry.names(), ["remote.a", "remote.b"]);
    /// // Later, the source's list changed: `b` is gone, `c` is new.
    /// let registrar = kept.await?;
    /// assert!(registrar.replace([tool("remote.a"), tool("remote.c")]));
    /// assert_eq!(registry.names(), ["remote.a", "remote.c"]);
    /// assert!(registry.take_warnings().is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn replace(&self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> bool {
        let Some(registry) = self.current() else {
            return false;
        };
        let mut redefined = Vec::new();
        {
            let mut state = registry.write();
            if state.generation != self.generation {
                return false;
            }
            let old = state.sources.remove(&self.id).unwrap_or_default();
            for (name, tool) in &old {
                if state
                    .tools
                    .get(name.as_str())
                    .is_some_and(|current| Arc::ptr_eq(current, tool))
                {
                    state.tools.remove(name.as_str());
                }
            }
            let mut new = BTreeMap::new();
            for tool in tools {
                let name = tool.definition().name().clone();
                new.insert(name.clone(), Arc::clone(&tool));
                if state.tools.insert(name.clone(), tool).is_some() {
                    redefined.push(name);
                }
            }
            state.sources.insert(self.id, new);
        }
        for name in redefined {
            registry.warn(RegistryWarning::Redefined(name));
        }
        true
    }

    /// Reports something the source noticed as a [`RegistryWarning::Source`] (traced, and
    /// returned by [`ToolRegistry::take_warnings`]), unless the registry was cleared since
    /// the source started.
    pub fn warn(&self, message: impl Into<String>) {
        if let Some(registry) = self.current() {
            registry.warn(RegistryWarning::Source {
                source: self.source.clone(),
                message: message.into(),
            });
        }
    }

    /// Marks the source done now, with an error to report or none. Only the first call
    /// counts; so does returning from [`ToolSource::resolve`].
    pub fn done(&self, error: Option<String>) {
        if !self.done.swap(true, Ordering::AcqRel)
            && let Some(shared) = self.registry.upgrade()
        {
            ToolRegistry { shared }.source_done(self.generation, &self.source, error);
        }
    }
}

/// Tools that arrive later: an MCP server's list, a plugin directory being scanned.
///
/// ```
/// use async_trait::async_trait;
/// use flemma_runtime::{Registrar, ToolSource};
/// use flemma_core::{ToolDefinition, ToolOutput, tool_fn};
///
/// struct Remote;
///
/// #[async_trait]
/// impl ToolSource for Remote {
///     fn name(&self) -> &str { "remote" }
///
///     async fn resolve(&self, registrar: Registrar) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///         let def = ToolDefinition::builder("remote.ping", "Ping the server.")?.build()?;
///         registrar.register(tool_fn(def, |_, _| ToolOutput::text("pong")));
///         Ok(())
///     }
/// }
///
/// # let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
/// # runtime.block_on(async {
/// let registry = flemma_runtime::ToolRegistry::new();
/// registry.add_source(Remote, std::time::Duration::from_secs(30))?;
/// registry.ready().await;
/// assert!(registry.contains("remote.ping"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[async_trait::async_trait]
pub trait ToolSource: Send + Sync + 'static {
    /// The source's name, for warnings.
    fn name(&self) -> &str;

    /// How long the source may take; `None` uses the registry's default
    /// (`tools.default_timeout`).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Registers the source's tools. Returning ends the source (an error is reported as
    /// `Async tool source failed: <err>`); a source may also end earlier through
    /// [`Registrar::done`] and keep registering afterwards.
    async fn resolve(
        &self,
        registrar: Registrar,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}
