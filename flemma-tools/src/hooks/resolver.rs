//! The `PreToolUse` hooks' place in the approval chain: one resolver answering with their
//! combined decision.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use flemma_approval::{ApprovalContext, Resolver, ResolverError, ToolCall, Verdict};
use flemma_ids::ToolUseId;

use super::Hooks;
use super::event::{HookContext, Permission, PreToolUseInput};

/// The name of the resolver the `PreToolUse` hooks decide through.
pub const HOOKS_RESOLVER: &str = "urn:flemma:approval:hooks";
/// Its priority: above `tools.auto_approve` (100), so a hook's denial or `ask` binds, as in
/// Claude Code.
pub const HOOKS_PRIORITY: i32 = 200;

/// The verdicts Phase 1 computed (the hooks ran once per call), by call id, until the chain
/// reads them.
#[derive(Debug, Default)]
pub(crate) struct Decided(Mutex<HashMap<ToolUseId, Verdict>>);

impl Decided {
    pub(crate) fn put(&self, id: ToolUseId, verdict: Verdict) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, verdict);
    }

    pub(crate) fn take(&self, id: &ToolUseId) -> Option<Verdict> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.is_empty() {
            return None;
        }
        map.remove(id)
    }
}

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

/// The chain's resolver for the hooks: the verdict Phase 1 left for the call, else (a chain
/// asked outside a cycle, as `flemma approval explain` does) the hooks run now.
pub(crate) struct HooksResolver(pub(crate) Hooks);

#[async_trait]
impl Resolver for HooksResolver {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        _ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        if let Some(verdict) = call.id.and_then(|id| self.0.decided.take(id)) {
            return Ok(verdict);
        }
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
        let outcome = self.0.pre_tool_use(&event).await;
        Ok(verdict_of(outcome.decision.as_ref()))
    }
}
