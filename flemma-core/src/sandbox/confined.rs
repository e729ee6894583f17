//! The sandbox of one conversation, as tools see it.

use std::path::Path;
use std::sync::Arc;

use flemma_config::SandboxOptions;

use super::backend::{SandboxBackend, SandboxError};
use super::policy::SandboxPolicy;

/// The sandbox of one conversation: its backend, options and resolved policy, or none; and
/// the files tools may not write, which hold with or without a sandbox.
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: Option<Arc<Enabled>>,
    /// [`SandboxPolicy::read_only`], kept when the sandbox is off.
    read_only: Arc<SandboxPolicy>,
    /// The policy whose writable set the file tools keep to in process while no backend
    /// confines commands ([`Sandbox::in_process`]).
    files: Option<Arc<SandboxPolicy>>,
}

#[derive(Debug)]
struct Enabled {
    backend: Arc<dyn SandboxBackend>,
    options: SandboxOptions,
    policy: SandboxPolicy,
}

impl Sandbox {
    /// No sandbox: every path is writable and commands run as given.
    pub fn disabled() -> Self {
        Self {
            inner: None,
            read_only: Arc::default(),
            files: None,
        }
    }

    /// No backend to confine commands, but the sandbox is on: `bash` runs unconfined (and is
    /// not approved as sandboxed), while `write`, `edit` and `flemma.save_to` keep to the
    /// policy's writable set in process and refuse its read-only files (the executor's sandbox
    /// when `sandbox.enabled` is on and no backend is available).
    pub fn in_process(policy: SandboxPolicy) -> Self {
        let mut sandbox = Self::unconfined(&policy);
        sandbox.files = Some(Arc::new(policy));
        sandbox
    }

    /// No sandbox, but the policy's [`read_only`](SandboxPolicy::read_only) files are still
    /// refused to `write`, `edit` and `flemma.save_to` (the executor's sandbox when
    /// `sandbox.enabled` is off or no backend is available).
    pub fn unconfined(policy: &SandboxPolicy) -> Self {
        Self {
            inner: None,
            read_only: Arc::new(SandboxPolicy {
                read_only: policy.read_only.clone(),
                ..SandboxPolicy::default()
            }),
            files: None,
        }
    }

    /// A sandbox with this backend and resolved policy.
    pub fn new(
        backend: Arc<dyn SandboxBackend>,
        options: SandboxOptions,
        policy: SandboxPolicy,
    ) -> Self {
        let read_only = Arc::new(SandboxPolicy {
            read_only: policy.read_only.clone(),
            ..SandboxPolicy::default()
        });
        Self {
            inner: Some(Arc::new(Enabled {
                backend,
                options,
                policy,
            })),
            read_only,
            files: None,
        }
    }

    /// Whether commands are confined.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The resolved policy, when sandboxed.
    pub fn policy(&self) -> Option<&SandboxPolicy> {
        self.inner.as_deref().map(|e| &e.policy)
    }

    /// Whether the file tools keep to a writable set: commands are confined, or the sandbox
    /// is on without a backend ([`Sandbox::in_process`]).
    pub fn bounds_files(&self) -> bool {
        self.inner.is_some() || self.files.is_some()
    }

    /// Whether a tool may write `path` (relative paths against `cwd`): not a
    /// [read-only file](Self::read_only_file), and, when sandboxed (or bounded in process),
    /// inside the writable set; any other path when the sandbox is disabled.
    pub fn is_path_writable(&self, path: &Path, cwd: &Path) -> bool {
        let bounds = self
            .inner
            .as_deref()
            .map(|e| &e.policy)
            .or(self.files.as_deref());
        self.read_only_file(path, cwd).is_none()
            && bounds.is_none_or(|policy| policy.allows_write(path, cwd))
    }

    /// The [read-only file](SandboxPolicy::read_only) `path` names, with or without a
    /// sandbox.
    pub fn read_only_file(&self, path: &Path, cwd: &Path) -> Option<&Path> {
        self.read_only.read_only_file(path, cwd)
    }

    /// Whether some file is read-only for tools.
    pub fn has_read_only_files(&self) -> bool {
        !self.read_only.read_only.is_empty()
    }

    /// What `flemma.save_to` checks its destination against
    /// ([`flemma_store::Store::save_to`]): this sandbox when it is on or some file is
    /// read-only, else nothing.
    pub fn save_to_check(&self) -> Option<&dyn flemma_store::WritablePaths> {
        (self.bounds_files() || self.has_read_only_files())
            .then_some(self as &dyn flemma_store::WritablePaths)
    }

    /// The command line to spawn for `argv`: unchanged without a sandbox.
    ///
    /// # Errors
    ///
    /// The backend's [`SandboxError`] (tools report `Sandbox error: <err>`).
    pub fn wrap_command(&self, argv: Vec<String>) -> Result<Vec<String>, SandboxError> {
        match self.inner.as_deref() {
            None => Ok(argv),
            Some(e) => e.backend.wrap(&e.policy, &e.options, argv),
        }
    }
}

/// `flemma.save_to`'s check (paths are absolute there).
impl flemma_store::WritablePaths for Sandbox {
    fn is_writable(&self, path: &Path) -> bool {
        self.is_path_writable(path, Path::new("/"))
    }

    fn is_read_only(&self, path: &Path) -> bool {
        self.read_only_file(path, Path::new("/")).is_some()
    }
}
