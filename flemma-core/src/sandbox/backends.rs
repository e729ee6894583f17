//! The backend registry and selection.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use flemma_config::SandboxOptions;

use super::backend::{SandboxBackend, SandboxError};
use super::confined::Sandbox;
use super::policy::SandboxPolicy;

/// The priority of a backend registered without one.
pub const DEFAULT_PRIORITY: i32 = 50;

/// The sandbox backends a host knows, with their priorities, and the choice among them that
/// `sandbox.backend` asks for.
///
/// * `auto` and `required`: the first available backend by priority (highest first, then
///   by name). With none, commands run unsandboxed: quietly for `auto`; `required` logs one
///   warning (`tracing`, once per registry).
/// * any other name: that backend, which must be registered (`Unknown sandbox backend:
///   <name>`) and available (its own message); otherwise every wrapped command fails with
///   `Sandbox error: <message>`.
///
/// The choice is cached until a backend is registered or `sandbox.backend` /
/// `sandbox.backends` change.
///
/// ```
/// use std::sync::Arc;
/// use flemma_core::sandbox::{DEFAULT_PRIORITY, PassThrough, SandboxBackends};
///
/// let mut options = flemma_config::Config::new().options()?.sandbox;
/// options.backend = "firejail".into();
/// let mut backends = SandboxBackends::new();
/// assert_eq!(backends.select(&options).unwrap_err().to_string(), "Unknown sandbox backend: firejail");
///
/// options.backend = "auto".into();
/// assert!(backends.select(&options)?.is_none()); // auto, and no backend: unsandboxed
/// backends.register(Arc::new(PassThrough), DEFAULT_PRIORITY)?;
/// assert_eq!(backends.select(&options)?.map(|b| b.name().to_owned()), Some("none".to_owned()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SandboxBackends {
    entries: Vec<Entry>,
    cache: Mutex<Option<Cached>>,
    warned: AtomicBool,
}

#[derive(Clone)]
struct Entry {
    priority: i32,
    backend: Arc<dyn SandboxBackend>,
}

type Selection = Result<Option<Arc<dyn SandboxBackend>>, SandboxError>;

struct Cached {
    backend: String,
    backends: flemma_config::SandboxBackends,
    selection: Selection,
}

impl fmt::Debug for SandboxBackends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.entries
                    .iter()
                    .map(|e| (e.backend.name().to_owned(), e.priority)),
            )
            .finish()
    }
}

impl Clone for SandboxBackends {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
            cache: Mutex::new(None),
            warned: AtomicBool::new(false),
        }
    }
}

impl Default for SandboxBackends {
    /// No backend at all: every call runs unsandboxed.
    fn default() -> Self {
        Self::new()
    }
}

impl SandboxBackends {
    /// A registry without backends.
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
            cache: Mutex::new(None),
            warned: AtomicBool::new(false),
        }
    }

    /// Registers `backend` at `priority` ([`DEFAULT_PRIORITY`] is the usual one).
    ///
    /// # Errors
    ///
    /// `Sandbox backend already registered: <name>` for a second backend of one name.
    pub fn register(
        &mut self,
        backend: Arc<dyn SandboxBackend>,
        priority: i32,
    ) -> Result<(), SandboxError> {
        if self.get(backend.name()).is_some() {
            return Err(SandboxError::new(format!(
                "Sandbox backend already registered: {}",
                backend.name()
            )));
        }
        self.entries.push(Entry { priority, backend });
        *self.cache.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
        Ok(())
    }

    /// The backend registered as `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn SandboxBackend>> {
        self.entries
            .iter()
            .find(|e| e.backend.name() == name)
            .map(|e| &e.backend)
    }

    /// The registered names with their priorities, in selection order.
    pub fn names(&self) -> Vec<(String, i32)> {
        self.ordered()
            .map(|e| (e.backend.name().to_owned(), e.priority))
            .collect()
    }

    fn ordered(&self) -> impl Iterator<Item = &Entry> {
        let mut entries: Vec<&Entry> = self.entries.iter().collect();
        entries.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.backend.name().cmp(b.backend.name()))
        });
        entries.into_iter()
    }

    /// The backend `sandbox.backend` selects: `Ok(None)` when `auto` or
    /// `required` find no available backend (commands then run unsandboxed).
    ///
    /// # Errors
    ///
    /// An explicit backend that is not registered (`Unknown sandbox backend: <name>`) or not
    /// available (the backend's message).
    pub fn select(
        &self,
        options: &SandboxOptions,
    ) -> Result<Option<Arc<dyn SandboxBackend>>, SandboxError> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = cache.as_ref()
            && cached.backend == options.backend
            && cached.backends == options.backends
        {
            return cached.selection.clone();
        }
        let selection = self.choose(options);
        *cache = Some(Cached {
            backend: options.backend.clone(),
            backends: options.backends.clone(),
            selection: selection.clone(),
        });
        selection
    }

    fn choose(&self, options: &SandboxOptions) -> Selection {
        match options.backend.as_str() {
            mode @ ("auto" | "required") => {
                let found = self
                    .ordered()
                    .find(|e| e.backend.available(options).is_ok())
                    .map(|e| Arc::clone(&e.backend));
                if found.is_none()
                    && mode == "required"
                    && !self.warned.swap(true, Ordering::Relaxed)
                {
                    tracing::warn!(
                        "sandbox.backend = \"required\" but no sandbox backend is available; tool commands run unsandboxed"
                    );
                }
                Ok(found)
            }
            name => {
                let backend = self
                    .get(name)
                    .ok_or_else(|| SandboxError::new(format!("Unknown sandbox backend: {name}")))?;
                backend.available(options)?;
                Ok(Some(Arc::clone(backend)))
            }
        }
    }

    /// Whether a backend can run commands under `options` (`validate_backend`, the sandbox
    /// approval resolver's last condition).
    pub fn is_available(&self, options: &SandboxOptions) -> bool {
        matches!(self.select(options), Ok(Some(_)))
    }

    /// The sandbox of a conversation with these options and resolved policy: none when
    /// `sandbox.enabled` is off (its [read-only files](SandboxPolicy::read_only) still refused,
    /// [`Sandbox::unconfined`]); commands unconfined but the file tools bounded in process when
    /// no backend is available under `auto`/`required` ([`Sandbox::in_process`]); one whose
    /// `wrap_command` fails with the selection error when an explicit backend cannot be used.
    pub fn sandbox(&self, options: &SandboxOptions, policy: SandboxPolicy) -> Sandbox {
        if !options.enabled {
            return Sandbox::unconfined(&policy);
        }
        match self.select(options) {
            Ok(Some(backend)) => Sandbox::new(backend, options.clone(), policy),
            Ok(None) => Sandbox::in_process(policy),
            Err(error) => Sandbox::new(Arc::new(Broken(error)), options.clone(), policy),
        }
    }
}

/// The backend of a sandbox whose explicit backend cannot be used: every wrap fails.
#[derive(Debug)]
struct Broken(SandboxError);

impl SandboxBackend for Broken {
    fn name(&self) -> &'static str {
        "unavailable"
    }

    fn available(&self, _options: &SandboxOptions) -> Result<(), SandboxError> {
        Err(self.0.clone())
    }

    fn wrap(
        &self,
        _policy: &SandboxPolicy,
        _options: &SandboxOptions,
        _argv: Vec<String>,
    ) -> Result<Vec<String>, SandboxError> {
        Err(self.0.clone())
    }
}
