//! The `PreToolUse` hooks' place in the approval chain: one resolver answering with their
//! combined decision.

use async_trait::async_trait;
use flemma_approval::{ApprovalContext, Resolver, ResolverError, ToolCall, Verdict};
use flemma_ids::ToolUseId;

use super::registration::Hooks;
use flemma_core::hooks::{HookContext, Permission, PreToolUseInput};

/// The name of the resolver the `PreToolUse` hooks decide through.
pub const HOOKS_RESOLVER: &str = "urn:flemma:approval:hooks";
/// Its priority: above `tools.auto_approve` (100), so a hook's denial or `ask` binds, as in
/// Claude Code.
pub const HOOKS_PRIORITY: i32 = 200;

/// The verdict of the hooks' combined decision (`None`: no opinion).
pub(crate) fn verdict_of(decision: Option<&(Permission, String, Option<String>)>) -> Verdict {
    let Some((permission, hook, reason)) = decision else {
        return Verdict::pass();
    };
    let reason = reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
    let because = match reason {
        Some(reason) => format!("hook `{hook}`: {reason}"),
        None => format!("hook `{hook}`"),
    };
    match permission {
        Permission::Allow => Verdict::approve(),
        Permission::Ask => Verdict::require_approval(),
        Permission::Deny => Verdict::deny(Some(match reason {
            Some(reason) => format!("Hook `{hook}`: {reason}"),
            None => format!("Denied by hook `{hook}`."),
        })),
    }
    .because(because)
}

/// The chain's resolver for the hooks: they run now. A cycle has run them once already for
/// the call (Phase 1) and hands their verdict to the chain as a known one
/// ([`flemma_approval::KnownVerdicts`]), so this runs only for a chain asked outside a cycle,
/// as `flemma approval explain` does.
pub(crate) struct HooksResolver(pub(crate) Hooks);

#[async_trait]
impl Resolver for HooksResolver {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        let id = match call.id {
            Some(id) => id.clone(),
            None => ToolUseId::new("explain")
                .map_err(|e| ResolverError::with_source("no call id", e))?,
        };
        let cwd = std::env::current_dir().unwrap_or_default();
        let event = PreToolUseInput::new(
            HookContext::new("", cwd),
            call.name.clone(),
            id,
            call.input.clone(),
        );
        // The conversation's own hooks, where its frontmatter added some.
        let conversation = super::config::from_frontmatter(ctx.config)
            .map_err(|e| ResolverError::with_source("the frontmatter's hooks", e))?;
        let outcome = self
            .0
            .with_conversation(&conversation.hooks)
            .pre_tool_use(&event)
            .await;
        Ok(verdict_of(outcome.decision.as_ref()))
    }
}
