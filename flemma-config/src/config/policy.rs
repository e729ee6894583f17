//! `tools.auto_approve` as a policy: what it decides and what it is told.

use std::fmt;
use std::sync::Arc;

use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

use crate::error::PolicyError;

/// What an `auto_approve` policy decides about one call: a closure given to
/// [`ConfigBuilder::auto_approve_policy`](crate::ConfigBuilder::auto_approve_policy), or the
/// function a Lua frontmatter assigns to `tools.auto_approve` (`true`, `false`, `"deny"`, `nil`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Run without asking (Lua `true`).
    Approve,
    /// Ask the user (Lua `false`).
    RequireApproval,
    /// Refuse, with an optional reason (Lua `"deny"`).
    Deny(Option<String>),
    /// No opinion (Lua `nil`): the list, then the later resolvers, decide.
    Pass,
    /// The policy could not decide (the function raised an error, ran too long or returned
    /// something else). The config resolver asks for approval then (fail closed)
    /// and reports the error.
    Failed(PolicyError),
}

/// What an `auto_approve` policy is told about a call besides its tool and input: the `ctx`
/// the Flemma plugin passes (`bufnr` has no equivalent here: there are no buffers).
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct PolicyContext<'a> {
    /// The call's id (`toolu_01…`), when there is one.
    pub tool_id: Option<&'a ToolUseId>,
}

impl<'a> PolicyContext<'a> {
    /// The context of the call `tool_id`.
    pub fn new(tool_id: Option<&'a ToolUseId>) -> Self {
        Self { tool_id }
    }
}

/// A policy deciding `tools.auto_approve` for a call: `(tool name, input, context)`.
///
/// Two kinds share it: the host's closure ([`Config::set_auto_approve_policy`](crate::Config::set_auto_approve_policy), consulted
/// before the option's value), and a function as the option's value
/// ([`Config::set_auto_approve_function`](crate::Config::set_auto_approve_function), what a Lua frontmatter's
/// `flemma.opt.tools.auto_approve = function(tool_name, input, ctx) … end` writes).
///
/// ```
/// use flemma_config::{AutoApprovePolicy, PolicyContext, PolicyDecision};
/// use flemma_ids::ToolName;
/// use flemma_ids::ToolUseId;
///
/// let policy = AutoApprovePolicy::with_context(|tool, _input, ctx| match ctx.tool_id {
///     Some(_) if tool == "grep" => PolicyDecision::Approve,
///     _ => PolicyDecision::Pass,
/// });
/// let id = ToolUseId::new("toolu_01")?;
/// let grep = ToolName::new("grep")?;
/// let input = serde_json::json!({});
/// assert_eq!(policy.decide(&grep, &input, &PolicyContext::new(Some(&id))), PolicyDecision::Approve);
/// assert_eq!(policy.decide(&grep, &input, &PolicyContext::default()), PolicyDecision::Pass);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct AutoApprovePolicy(Arc<PolicyFn>);

/// The closure behind an [`AutoApprovePolicy`].
type PolicyFn = dyn Fn(&ToolName, &Value, &PolicyContext<'_>) -> PolicyDecision + Send + Sync;

impl AutoApprovePolicy {
    /// Wraps a closure of the tool name and input.
    pub fn new(f: impl Fn(&ToolName, &Value) -> PolicyDecision + Send + Sync + 'static) -> Self {
        Self(Arc::new(
            move |tool: &ToolName, input: &Value, _: &PolicyContext<'_>| f(tool, input),
        ))
    }

    /// Wraps a closure of the tool name, input and [`PolicyContext`].
    pub fn with_context(
        f: impl Fn(&ToolName, &Value, &PolicyContext<'_>) -> PolicyDecision + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(f))
    }

    /// Asks the policy about one call.
    pub fn decide(
        &self,
        tool: &ToolName,
        input: &Value,
        ctx: &PolicyContext<'_>,
    ) -> PolicyDecision {
        (self.0)(tool, input, ctx)
    }
}

impl fmt::Debug for AutoApprovePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AutoApprovePolicy(..)")
    }
}

/// Two policies are equal when they are the same closure (clones of one another).
impl PartialEq for AutoApprovePolicy {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
