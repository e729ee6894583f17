//! The sandbox seen by tools (spec §14): a backend that wraps command lines, and the resolved
//! policy that says which paths a sandboxed call may write.
//!
//! This module holds the [`SandboxBackend`] trait, the [`PassThrough`] backend (commands run
//! as given), the bubblewrap backend [`Bwrap`], the registry that selects a backend
//! ([`SandboxBackends`], spec §14.3) and the policy resolution of spec §14.2.

mod backend;
mod backends;
pub(crate) mod bwrap;
mod confined;
mod policy;

pub use backend::{PassThrough, SandboxBackend, SandboxError};
pub use backends::{BWRAP_PRIORITY, DEFAULT_PRIORITY, SandboxBackends};
pub use bwrap::Bwrap;
pub use confined::Sandbox;
pub use policy::{PolicyInputs, SandboxPolicy, protected_paths};
pub(crate) use policy::{expand_path, expand_tilde, normalize};
