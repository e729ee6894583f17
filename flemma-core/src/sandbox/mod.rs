//! The sandbox seen by tools: a backend that wraps command lines, and the resolved
//! policy that says which paths a sandboxed call may write.
//!
//! This module holds the [`SandboxBackend`] trait, the [`PassThrough`] backend (commands run as
//! given), the registry that selects a backend ([`SandboxBackends`]), the [`Sandbox`] a call runs
//! in and the resolution of `sandbox.policy` ([`SandboxPolicy`]). The bubblewrap backend is crate
//! flemma-builtins' `Bwrap`.

mod backend;
mod backends;
mod confined;
mod policy;

pub use backend::{PassThrough, SandboxBackend, SandboxError};
pub use backends::{DEFAULT_PRIORITY, SandboxBackends};
pub use confined::Sandbox;
pub(crate) use policy::normalize;
pub use policy::{PolicyInputs, SandboxPolicy, protected_paths};
pub use policy::{expand_path, expand_tilde};
