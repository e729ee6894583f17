//! The `Resolver` trait, decisions and what a resolver is given.

use std::fmt;

use flemma_config::{Config, Options};
use flemma_ids::{ToolName, ToolUseId};
use serde::Serialize;
use serde_json::Value;

/// What the chain decides about a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run it without asking.
    Approve,
    /// Ask the user (placeholder status `pending`).
    RequireApproval,
    /// Refuse (placeholder status `denied`, later an error result).
    Deny {
        /// Why, when the resolver says.
        reason: Option<String>,
    },
}

impl Decision {
    /// The decision's word (`approve`, `require_approval`, `deny`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::RequireApproval => "require_approval",
            Decision::Deny { .. } => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a resolver answers: a decision or a pass, and optionally why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `None` passes to the next resolver.
    pub decision: Option<Decision>,
    /// A short explanation for traces (`matched entry "flemma.*"`).
    pub because: Option<String>,
}

impl Verdict {
    /// No opinion.
    pub fn pass() -> Self {
        Self {
            decision: None,
            because: None,
        }
    }

    /// Approve.
    pub fn approve() -> Self {
        Self::decide(Decision::Approve)
    }

    /// Ask the user.
    pub fn require_approval() -> Self {
        Self::decide(Decision::RequireApproval)
    }

    /// Refuse.
    pub fn deny(reason: Option<String>) -> Self {
        Self::decide(Decision::Deny { reason })
    }

    /// A decision.
    pub fn decide(decision: Decision) -> Self {
        Self {
            decision: Some(decision),
            because: None,
        }
    }

    /// Adds an explanation.
    #[must_use]
    pub fn because(mut self, why: impl Into<String>) -> Self {
        self.because = Some(why.into());
        self
    }
}

/// The tool call being decided.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// The tool name (`bash`, `flemma.jobs.status`).
    pub name: &'a ToolName,
    /// The call's input.
    pub input: &'a Value,
    /// The call id, when there is one.
    pub id: Option<&'a ToolUseId>,
}

/// What the tools crate tells the chain about a tool.
pub trait ToolTraits {
    /// Whether the tool declares the `auto_approves_if_sandboxed` capability.
    fn auto_approves_if_sandboxed(&self, tool: &ToolName) -> bool;
}

/// Whether a sandbox backend can run commands right now (`validate_backend` succeeds).
pub trait SandboxStatus {
    /// The backend is available.
    fn backend_available(&self) -> bool;
}

impl<F: Fn(&ToolName) -> bool> ToolTraits for F {
    fn auto_approves_if_sandboxed(&self, tool: &ToolName) -> bool {
        self(tool)
    }
}

impl SandboxStatus for bool {
    fn backend_available(&self) -> bool {
        *self
    }
}

/// Everything a resolver may consult about the conversation.
#[derive(Clone, Copy)]
pub struct ApprovalContext<'a> {
    /// The conversation's layered options (for intent queries on the op logs).
    pub config: &'a Config,
    /// The same options, resolved.
    pub options: &'a Options,
    /// Tool capabilities.
    pub tools: &'a dyn ToolTraits,
    /// Sandbox backend availability.
    pub sandbox: &'a dyn SandboxStatus,
}

impl fmt::Debug for ApprovalContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalContext")
            .field("config_generation", &self.config.generation())
            .field("sandbox_available", &self.sandbox.backend_available())
            .finish_non_exhaustive()
    }
}

/// Decides (or passes on) whether a tool call runs.
///
/// Resolvers are registered in a [`Chain`](crate::Chain) with a name and a priority; the first
/// decision in priority order wins. A resolver that panics is skipped (and shows as `error`
/// in an explanation).
pub trait Resolver: Send + Sync {
    /// Looks at one call.
    fn resolve(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict;
}

impl<R: Resolver + ?Sized> Resolver for std::sync::Arc<R> {
    fn resolve(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        (**self).resolve(call, ctx)
    }
}

impl<R: Resolver + ?Sized> Resolver for Box<R> {
    fn resolve(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        (**self).resolve(call, ctx)
    }
}

/// A resolver made of a closure; see [`resolver_fn`].
pub struct FnResolver<F>(F);

impl<F> fmt::Debug for FnResolver<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnResolver(..)")
    }
}

impl<F> Resolver for FnResolver<F>
where
    F: Fn(&ToolCall<'_>, &ApprovalContext<'_>) -> Verdict + Send + Sync,
{
    fn resolve(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        (self.0)(call, ctx)
    }
}

/// A resolver from a closure.
///
/// ```
/// use flemma_approval::{Verdict, resolver_fn};
/// let deny_rm = resolver_fn(|call, _ctx| {
///     let command = call.input.get("command").and_then(|c| c.as_str()).unwrap_or("");
///     if call.name == "bash" && command.contains("rm -rf") {
///         Verdict::deny(Some("no recursive deletes".into()))
///     } else {
///         Verdict::pass()
///     }
/// });
/// # let _ = deny_rm;
/// ```
pub fn resolver_fn<F>(f: F) -> FnResolver<F>
where
    F: Fn(&ToolCall<'_>, &ApprovalContext<'_>) -> Verdict + Send + Sync,
{
    FnResolver(f)
}
