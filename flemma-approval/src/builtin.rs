//! The built-in resolvers: config (100), sandbox (25), catch-all (0).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use flemma_config::{Layer, OpKind, PolicyDecision, is_preset_ref};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::chain::panic_message;
use crate::resolver::{ApprovalContext, Decision, Resolver, ToolCall, Verdict};

/// `urn:flemma:approval:config`: the closure policy, then the `tools.auto_approve` list (exact
/// names and `*` globs).
///
/// The list is read from `ctx.config` and compiled once per options state
/// ([`Config::generation`](flemma_config::Config::generation)).
#[derive(Debug, Default)]
pub struct ConfigResolver {
    cache: Mutex<Option<(u64, Arc<CompiledList>)>>,
}

/// An `auto_approve` list compiled for matching.
#[derive(Debug)]
struct CompiledList {
    source: Vec<String>,
    /// Exact name → index in `source`.
    exact: HashMap<String, usize>,
    globs: GlobSet,
    /// Glob index → index in `source`.
    glob_entries: Vec<usize>,
}

impl CompiledList {
    fn compile(list: &[String]) -> Self {
        let mut exact = HashMap::new();
        let mut builder = GlobSetBuilder::new();
        let mut glob_entries = Vec::new();
        for (i, entry) in list.iter().enumerate() {
            if is_preset_ref(entry) {
                continue;
            }
            if entry.contains('*') {
                // Only `*` is special (spec §5.4): escape everything else.
                let pattern = entry
                    .split('*')
                    .map(globset::escape)
                    .collect::<Vec<_>>()
                    .join("*");
                if let Ok(glob) = GlobBuilder::new(&pattern).literal_separator(false).build() {
                    builder.add(glob);
                    glob_entries.push(i);
                }
            } else {
                exact.entry(entry.clone()).or_insert(i);
            }
        }
        let globs = builder.build().unwrap_or_else(|_| GlobSet::empty());
        Self {
            source: list.to_vec(),
            exact,
            globs,
            glob_entries,
        }
    }

    /// An entry matching `name`: the exact name when listed, else the first matching glob.
    fn matching(&self, name: &str) -> Option<&str> {
        if let Some(&index) = self.exact.get(name) {
            return Some(&self.source[index]);
        }
        if !self.globs.is_match(name) {
            return None;
        }
        let index = self
            .globs
            .matches(name)
            .into_iter()
            .map(|g| self.glob_entries[g])
            .min()?;
        Some(&self.source[index])
    }
}

impl ConfigResolver {
    fn compiled(&self, config: &flemma_config::Config) -> Arc<CompiledList> {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        match cache.as_ref() {
            Some((generation, compiled)) if *generation == config.generation() => {
                Arc::clone(compiled)
            }
            _ => {
                let compiled = Arc::new(CompiledList::compile(
                    &config.list("tools.auto_approve").items,
                ));
                *cache = Some((config.generation(), Arc::clone(&compiled)));
                compiled
            }
        }
    }
}

impl Resolver for ConfigResolver {
    fn resolve(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        if let Some(policy) = ctx.config.auto_approve_policy() {
            match catch_unwind(AssertUnwindSafe(|| policy.decide(call.name, call.input))) {
                Ok(PolicyDecision::Approve) => {
                    return Verdict::approve().because("the auto_approve policy approved");
                }
                Ok(PolicyDecision::RequireApproval) => {
                    return Verdict::require_approval()
                        .because("the auto_approve policy asks for approval");
                }
                Ok(PolicyDecision::Deny(reason)) => {
                    return Verdict::deny(reason).because("the auto_approve policy denied");
                }
                Ok(PolicyDecision::Pass) => {}
                // Fail closed.
                Err(panic) => {
                    return Verdict::require_approval().because(format!(
                        "the auto_approve policy {}",
                        panic_message(&*panic)
                    ));
                }
            }
        }
        let compiled = self.compiled(ctx.config);
        match compiled.matching(call.name.as_str()) {
            Some(entry) => {
                Verdict::approve().because(format!("matched auto_approve entry {entry:?}"))
            }
            None => Verdict::pass(),
        }
    }
}

/// `urn:flemma:approval:sandbox`: approves a tool that is safe when sandboxed, while a sandbox is
/// active, unless the conversation's frontmatter took `auto_approve` into its own hands
/// (spec §6.4).
#[derive(Debug, Default, Clone, Copy)]
pub struct SandboxResolver;

impl Resolver for SandboxResolver {
    fn resolve(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        let pass = |why: &str| Verdict::pass().because(why.to_owned());
        if !ctx.options.tools.auto_approve_sandboxed {
            return pass("tools.auto_approve_sandboxed is false");
        }
        if !ctx.tools.auto_approves_if_sandboxed(call.name) {
            return pass("the tool does not declare auto_approves_if_sandboxed");
        }
        // The resolved option already lets a runtime override beat the frontmatter (§14.1).
        if !ctx.options.sandbox.enabled {
            return pass("the sandbox is disabled");
        }
        if !ctx.sandbox.backend_available() {
            return pass("no sandbox backend is available");
        }
        if ctx.config.layer_has_op(
            Layer::Frontmatter,
            OpKind::Remove,
            "tools.auto_approve",
            Some(call.name.as_str()),
        ) {
            return pass("the frontmatter removes the tool from tools.auto_approve");
        }
        if ctx
            .config
            .layer_has_set(Layer::Frontmatter, "tools.auto_approve")
        {
            return pass("the frontmatter sets tools.auto_approve");
        }
        Verdict::approve().because("sandboxed")
    }
}

/// `urn:flemma:approval:catch-all`: approves everything when `tools.require_approval` is
/// `false`, passes otherwise.
#[derive(Debug, Default, Clone, Copy)]
pub struct CatchAllResolver;

impl Resolver for CatchAllResolver {
    fn resolve(&self, _call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Verdict {
        if ctx.options.tools.require_approval {
            Verdict::pass()
        } else {
            Verdict::decide(Decision::Approve).because("tools.require_approval is false")
        }
    }
}
