//! The `Resolver` trait, decisions and what a resolver is given.

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use async_trait::async_trait;
use flemma_config::{Config, Options};
use flemma_ids::{ToolName, ToolUseId};
use serde::Serialize;
use serde_json::Value;

use crate::error::ResolverError;

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
///
/// `Send + Sync`, like everything an [`ApprovalContext`] holds, so a context can live across
/// an `.await` in a task on any thread.
pub trait ToolTraits: Send + Sync {
    /// Whether the tool declares the `auto_approves_if_sandboxed` capability.
    fn auto_approves_if_sandboxed(&self, tool: &ToolName) -> bool;
}

/// Whether a sandbox backend can run commands right now (`validate_backend` succeeds).
pub trait SandboxStatus: Send + Sync {
    /// The backend is available.
    fn backend_available(&self) -> bool;
}

impl<F: Fn(&ToolName) -> bool + Send + Sync> ToolTraits for F {
    fn auto_approves_if_sandboxed(&self, tool: &ToolName) -> bool {
        self(tool)
    }
}

impl SandboxStatus for bool {
    fn backend_available(&self) -> bool {
        *self
    }
}

/// Where a conversation's commands run, for the command rules
/// ([`BashRulesResolver`](crate::BashRulesResolver)): the directory they start in, the project
/// whose `.claude/settings.json` may hold rules, and which paths a redirection may write
/// without asking. Every method has a default that knows nothing: no directory, no project,
/// nothing writable (so every redirection to a file asks).
pub trait Workspace: Send + Sync {
    /// The directory `bash` starts commands in (relative redirection targets are taken
    /// against it).
    fn cwd(&self) -> Option<&Path> {
        None
    }

    /// The conversation's project.
    fn project(&self) -> Option<&Path> {
        None
    }

    /// Whether a command may write `path` (absolute, without `.` or `..`) without asking:
    /// the conversation's writable set.
    fn may_write(&self, path: &Path) -> bool {
        let _ = path;
        false
    }
}

/// Knows nothing of where commands run.
impl Workspace for () {}

/// Everything a resolver may consult about the conversation.
///
/// `Send + Sync` (checked at compile time), so a resolver may hold it across an `.await`.
/// Build one with [`ApprovalContext::new`] and the `with_*` methods; the fields stay public to
/// read.
///
/// ```
/// use flemma_approval::ApprovalContext;
/// use flemma_config::Config;
/// use flemma_ids::ToolName;
///
/// let config = Config::new();
/// let options = config.options()?;
/// let sandboxed = |name: &ToolName| name == "bash";
/// let ctx = ApprovalContext::new(&config, &options).with_tools(&sandboxed).with_sandbox(&true);
/// assert!(ctx.sandbox.backend_available());
/// # Ok::<(), flemma_config::ConfigError>(())
/// ```
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct ApprovalContext<'a> {
    /// The conversation's layered options (for intent queries on the op logs).
    pub config: &'a Config,
    /// The same options, resolved.
    pub options: &'a Options,
    /// Tool capabilities.
    pub tools: &'a dyn ToolTraits,
    /// Sandbox backend availability.
    pub sandbox: &'a dyn SandboxStatus,
    /// Where commands run.
    pub workspace: &'a dyn Workspace,
}

/// No tool declares a capability.
fn no_traits(_: &ToolName) -> bool {
    false
}

impl<'a> ApprovalContext<'a> {
    /// A context of these options: no tool declares a capability, no sandbox backend is
    /// available, nothing is known of where commands run.
    pub fn new(config: &'a Config, options: &'a Options) -> Self {
        ApprovalContext {
            config,
            options,
            tools: &no_traits,
            sandbox: &false,
            workspace: &(),
        }
    }

    /// With the tools' capabilities.
    #[must_use]
    pub fn with_tools(mut self, tools: &'a dyn ToolTraits) -> Self {
        self.tools = tools;
        self
    }

    /// With the sandbox backend's availability.
    #[must_use]
    pub fn with_sandbox(mut self, sandbox: &'a dyn SandboxStatus) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// With where commands run.
    #[must_use]
    pub fn with_workspace(mut self, workspace: &'a dyn Workspace) -> Self {
        self.workspace = workspace;
        self
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<ApprovalContext<'static>>();
    send_sync::<ToolCall<'static>>();
};

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
/// decision in priority order wins. Resolving is asynchronous, so a resolver can ask a remote
/// policy service or a person; the chain awaits each in turn. A resolver that returns an
/// error or panics is skipped: the chain records it (`error` in an explanation, with the
/// message) and asks the next one.
///
/// Implement it with `#[async_trait]` (the `async-trait` crate; the facade re-exports it as
/// `flemma::async_trait`), or
/// wrap a closure: [`resolver_fn`] for a synchronous one, [`async_resolver_fn`] for one that
/// awaits.
///
/// ```
/// use async_trait::async_trait;
/// use flemma_approval::{ApprovalContext, Resolver, ResolverError, ToolCall, Verdict};
///
/// /// Asks a (here, imaginary) policy service.
/// struct Remote;
///
/// #[async_trait]
/// impl Resolver for Remote {
///     async fn resolve(&self, call: &ToolCall<'_>, _ctx: &ApprovalContext<'_>) -> Result<Verdict, ResolverError> {
///         let allowed = async { call.name != "deploy" }.await;
///         Ok(if allowed { Verdict::pass() } else { Verdict::deny(Some("not here".into())) })
///     }
/// }
/// ```
#[async_trait]
pub trait Resolver: Send + Sync {
    /// Looks at one call: a [`Verdict`] (which may pass), or why it could not decide.
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError>;
}

#[async_trait]
impl<R: Resolver + ?Sized> Resolver for std::sync::Arc<R> {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        (**self).resolve(call, ctx).await
    }
}

#[async_trait]
impl<R: Resolver + ?Sized> Resolver for Box<R> {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        (**self).resolve(call, ctx).await
    }
}

/// What a synchronous resolver closure returns: a [`Verdict`], or a `Result` when it can fail.
pub trait IntoVerdict {
    /// The verdict, or why there is none.
    ///
    /// # Errors
    ///
    /// The resolver's own [`ResolverError`].
    fn into_verdict(self) -> Result<Verdict, ResolverError>;
}

impl IntoVerdict for Verdict {
    fn into_verdict(self) -> Result<Verdict, ResolverError> {
        Ok(self)
    }
}

impl IntoVerdict for Result<Verdict, ResolverError> {
    fn into_verdict(self) -> Result<Verdict, ResolverError> {
        self
    }
}

/// A resolver made of a synchronous closure; see [`resolver_fn`].
pub struct FnResolver<F>(F);

impl<F> fmt::Debug for FnResolver<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnResolver(..)")
    }
}

#[async_trait]
impl<F, V> Resolver for FnResolver<F>
where
    F: Fn(&ToolCall<'_>, &ApprovalContext<'_>) -> V + Send + Sync,
    V: IntoVerdict,
{
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        (self.0)(call, ctx).into_verdict()
    }
}

/// A resolver from a synchronous closure returning a [`Verdict`] (or a
/// `Result<Verdict, ResolverError>` when it can fail).
///
/// ```
/// use flemma_approval::{ResolverError, Verdict, resolver_fn};
/// let deny_rm = resolver_fn(|call, _ctx| {
///     let command = call.input.get("command").and_then(|c| c.as_str()).unwrap_or("");
///     if call.name == "bash" && command.contains("rm -rf") {
///         Verdict::deny(Some("no recursive deletes".into()))
///     } else {
///         Verdict::pass()
///     }
/// });
/// let strict = resolver_fn(|call, _ctx| -> Result<Verdict, ResolverError> {
///     let path = call.input.get("path").and_then(|p| p.as_str());
///     let path = path.ok_or_else(|| ResolverError::new("the call has no path"))?;
///     Ok(if path.starts_with("/etc") { Verdict::deny(None) } else { Verdict::pass() })
/// });
/// # let _ = (deny_rm, strict);
/// ```
pub fn resolver_fn<F, V>(f: F) -> FnResolver<F>
where
    F: Fn(&ToolCall<'_>, &ApprovalContext<'_>) -> V + Send + Sync,
    V: IntoVerdict,
{
    FnResolver(f)
}

/// The future an [`async_resolver_fn`] closure returns: boxed, `Send`, borrowing the call
/// and the context.
pub type ResolveFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Verdict, ResolverError>> + Send + 'a>>;

/// A resolver made of a closure returning a future; see [`async_resolver_fn`].
pub struct AsyncFnResolver<F>(F);

impl<F> fmt::Debug for AsyncFnResolver<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AsyncFnResolver(..)")
    }
}

#[async_trait]
impl<F> Resolver for AsyncFnResolver<F>
where
    F: for<'a> Fn(&'a ToolCall<'a>, &'a ApprovalContext<'a>) -> ResolveFuture<'a> + Send + Sync,
{
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        (self.0)(call, ctx).await
    }
}

/// A resolver from a closure that awaits: it returns its work as `Box::pin(async move { … })`,
/// which may borrow the call and the context.
///
/// ```
/// use flemma_approval::{ResolverError, Verdict, async_resolver_fn};
///
/// let (ask, mut person) = tokio::sync::mpsc::channel::<(String, tokio::sync::oneshot::Sender<bool>)>(1);
/// let ask_a_person = async_resolver_fn(move |call, _ctx| {
///     let ask = ask.clone();
///     Box::pin(async move {
///         let (answer, answered) = tokio::sync::oneshot::channel();
///         ask.send((call.name.to_string(), answer)).await
///             .map_err(|e| ResolverError::with_source("nobody to ask", e))?;
///         let yes = answered.await.map_err(|e| ResolverError::with_source("no answer", e))?;
///         Ok(if yes { Verdict::approve() } else { Verdict::pass() })
///     })
/// });
/// # let _ = (ask_a_person, person.try_recv());
/// ```
pub fn async_resolver_fn<F>(f: F) -> AsyncFnResolver<F>
where
    F: for<'a> Fn(&'a ToolCall<'a>, &'a ApprovalContext<'a>) -> ResolveFuture<'a> + Send + Sync,
{
    AsyncFnResolver(f)
}
