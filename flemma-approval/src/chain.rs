//! The resolver chain: priority order, the first decision wins, and an explain trace.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures_util::FutureExt as _;
use serde::{Serialize, Serializer};

use crate::bash_rules::BashRulesResolver;
use crate::builtin::{Builtin, CatchAllResolver, ConfigResolver, SandboxResolver};
use crate::error::{ApprovalError, ResolverError};
use crate::resolver::{ApprovalContext, Decision, Resolver, ToolCall, Verdict};

/// The name of a registered resolver (`urn:flemma:approval:config`, `my_plugin.policy`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResolverName(String);

impl ResolverName {
    /// Validates a name: non-empty, no whitespace or control characters.
    ///
    /// # Errors
    ///
    /// [`ApprovalError::InvalidName`].
    pub fn new(name: impl Into<String>) -> Result<Self, ApprovalError> {
        let name = name.into();
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ApprovalError::InvalidName { name });
        }
        Ok(Self(name))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ResolverName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ResolverName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Name of the resolver evaluating `tools.auto_approve`.
pub const CONFIG_RESOLVER: &str = "urn:flemma:approval:config";
/// Name of the resolver of the command rules on `bash` calls (`tools.bash.allow`, `ask`,
/// `deny`).
pub const BASH_RULES_RESOLVER: &str = "urn:flemma:approval:bash-rules";
/// Name of the resolver approving sandboxed tools.
pub const SANDBOX_RESOLVER: &str = "urn:flemma:approval:sandbox";
/// Name of the resolver approving everything when `tools.require_approval` is off.
pub const CATCH_ALL_RESOLVER: &str = "urn:flemma:approval:catch-all";
/// The default priority of a resolver, in the [`priority`] band below the
/// options: a conversation's `tools.auto_approve` decides before it (only its deny still
/// wins). A host's own policy goes in [`priority::HOST`].
pub const DEFAULT_PRIORITY: i32 = 50;

/// The bands of the chain's priorities, highest first. The first decision wins (a deny of
/// any resolver wins over it), so a resolver's band says what may override its approval or
/// its ask:
///
/// | band | priority | resolvers |
/// | --- | --- | --- |
/// | [`HOST`](priority::HOST) | 300 | the host's own policy: nothing the conversation says (its frontmatter's `tools.auto_approve`, a hook's allow) comes before it |
/// | hooks | 200 | the `PreToolUse` hooks (`urn:flemma:approval:hooks`) |
/// | [`COMMAND_RULES`](priority::COMMAND_RULES) | 150 | the command rules on `bash` calls (`urn:flemma:approval:bash-rules`): their ask comes before `tools.auto_approve` and the sandbox's approval |
/// | MCP | 110–120 | a narrowed MCP tool (deny), a destructive one (ask) |
/// | [`OPTIONS`](priority::OPTIONS) | 100 | `tools.auto_approve` of the host's options and the conversation's frontmatter (`urn:flemma:approval:config`) |
/// | [`DEFAULT_PRIORITY`] | 50 | tool modules' resolvers, an MCP server's read-only hint |
/// | [`SANDBOX`](priority::SANDBOX) | 25 | tools safe under an active sandbox (`urn:flemma:approval:sandbox`) |
/// | [`FALLBACK`](priority::FALLBACK) | 0 | everything when `tools.require_approval` is off (`urn:flemma:approval:catch-all`) |
///
/// ```
/// use flemma_approval::{Chain, Verdict, priority, resolver_fn};
///
/// let mut chain = Chain::with_builtins();
/// // The host's policy: no frontmatter approves what it asks about.
/// chain.register("app.policy", priority::HOST, resolver_fn(|_, _| Verdict::pass()))?;
/// assert_eq!(chain.get_all()[0].name.as_str(), "app.policy");
/// # Ok::<(), flemma_approval::ApprovalError>(())
/// ```
pub mod priority {
    /// The host's own resolvers.
    pub const HOST: i32 = 300;
    /// The command rules on `bash` calls.
    pub const COMMAND_RULES: i32 = 150;
    /// The options' resolver (`tools.auto_approve`).
    pub const OPTIONS: i32 = 100;
    /// The sandbox resolver.
    pub const SANDBOX: i32 = 25;
    /// The catch-all.
    pub const FALLBACK: i32 = 0;
}

/// A registered resolver.
#[derive(Clone)]
pub struct Registration {
    /// Its name.
    pub name: ResolverName,
    /// Higher runs first.
    pub priority: i32,
    /// What it does, for listings.
    pub description: Option<String>,
    resolver: Slot,
}

/// How the chain calls a resolver.
#[derive(Clone)]
enum Slot {
    /// A built-in of [`Chain::with_builtins`], called directly: the default chain decides
    /// without boxing a future per resolver.
    Builtin(Arc<dyn Builtin>),
    /// Any resolver, awaited.
    Resolver(Arc<dyn Resolver>),
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// Resolvers in priority order (descending, ties by name ascending).
///
/// Deciding is asynchronous because resolvers may be; with only synchronous resolvers (the
/// built-ins, [`resolver_fn`](crate::resolver_fn)) the future is ready at once, so any
/// executor, or `now_or_never`, runs it.
///
/// ```
/// use flemma_approval::{ApprovalContext, Chain, Decision, ToolCall};
/// use flemma_ids::ToolName;
/// use flemma_config::{Config, Layer};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut config = Config::new();
/// config.append(Layer::Setup, "tools.auto_approve", "bash")?;
/// let options = config.options()?;
/// let ctx = ApprovalContext::new(&config, &options);
/// let chain = Chain::with_builtins();
///
/// let input = serde_json::json!({"command": "ls"});
/// let call = ToolCall { name: &ToolName::new("bash")?, input: &input, id: None };
/// let outcome = chain.decide(&call, &ctx).await;
/// assert_eq!(outcome.decision, Decision::Approve);
/// assert_eq!(outcome.resolver.map(|r| r.as_str()), Some("urn:flemma:approval:config"));
/// let explained = chain.explain(&call, &ctx).await;
/// assert_eq!(explained.resolver.as_deref(), Some("urn:flemma:approval:config"));
///
/// let other = ToolCall { name: &ToolName::new("deploy")?, input: &input, id: None };
/// assert_eq!(chain.decide(&other, &ctx).await.decision, Decision::RequireApproval);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Chain {
    entries: Vec<Registration>,
}

/// One resolver's answer in an [`Explanation`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceEntry {
    /// The resolver.
    pub resolver: ResolverName,
    /// Its priority.
    pub priority: i32,
    /// What it said.
    pub result: TraceResult,
    /// Why, when it said (the matched `auto_approve` entry, the failed sandbox condition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a resolver said, in a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceResult {
    /// Approved.
    Approve,
    /// Asked for approval.
    RequireApproval,
    /// Denied.
    Deny,
    /// No opinion.
    Pass,
    /// Failed (returned an error or panicked); skipped. The entry's `detail` holds the
    /// message.
    Error,
}

/// What [`Chain::decide`] found: the decision, who made it, and the resolvers that failed on
/// the way.
#[derive(Debug)]
pub struct Outcome<'c> {
    /// The decision.
    pub decision: Decision,
    /// The deciding resolver; `None` when none decided (the default: require approval).
    pub resolver: Option<&'c ResolverName>,
    /// The resolvers that failed before one decided, in order, and the config resolver's
    /// policy when it failed and the resolver asked for approval because of it (empty almost
    /// always; nothing is allocated then).
    pub failures: Vec<Failure<'c>>,
}

/// A resolver that failed while the chain decided; the chain asked the next one.
#[derive(Debug)]
pub struct Failure<'c> {
    /// The resolver.
    pub resolver: &'c ResolverName,
    /// Why it could not decide (a panic shows as `panicked: …`).
    pub error: ResolverError,
}

/// Verdicts already given for one call by resolvers that ran before the chain was asked (the
/// `PreToolUse` hooks run once per call and feed their edits to the call before it is
/// decided): [`Chain::decide_knowing`] takes a known verdict in its resolver's place, in its
/// resolver's turn, instead of asking the resolver again.
///
/// ```
/// use flemma_approval::{KnownVerdicts, Verdict};
///
/// let known = KnownVerdicts::new().with("my.hooks", Verdict::deny(Some("not on Fridays".into())));
/// assert!(known.get("my.hooks").is_some());
/// assert!(known.get("other").is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct KnownVerdicts {
    verdicts: Vec<(String, Verdict)>,
}

impl KnownVerdicts {
    /// None known: [`Chain::decide_knowing`] asks every resolver, as [`Chain::decide`] does.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the verdict the resolver named `resolver` gave (a later one for the same name
    /// replaces it).
    #[must_use]
    pub fn with(mut self, resolver: impl Into<String>, verdict: Verdict) -> Self {
        let resolver = resolver.into();
        self.verdicts.retain(|(name, _)| *name != resolver);
        self.verdicts.push((resolver, verdict));
        self
    }

    /// The verdict known for the resolver named `resolver`.
    pub fn get(&self, resolver: &str) -> Option<&Verdict> {
        self.verdicts
            .iter()
            .find(|(name, _)| name == resolver)
            .map(|(_, verdict)| verdict)
    }
}

/// A decision with the resolvers consulted to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The decision.
    pub decision: Decision,
    /// The deciding resolver; `None` when none decided (the default: require approval).
    pub resolver: Option<String>,
    /// Every resolver consulted, in order: all of them, or up to the first that denies.
    pub trace: Vec<TraceEntry>,
}

impl Serialize for Explanation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("decision", self.decision.as_str())?;
        if let Decision::Deny {
            reason: Some(reason),
        } = &self.decision
        {
            map.serialize_entry("reason", reason)?;
        }
        map.serialize_entry("resolver", self.resolver.as_deref().unwrap_or("default"))?;
        map.serialize_entry("trace", &self.trace)?;
        map.end()
    }
}

impl Chain {
    /// An empty chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in resolvers: config (100), sandbox (25), catch-all (0; approves only when
    /// `tools.require_approval` is off).
    pub fn with_builtins() -> Self {
        let mut chain = Self::new();
        let builtins: [(&str, i32, &str, Arc<dyn Builtin>); 4] = [
            (
                BASH_RULES_RESOLVER,
                priority::COMMAND_RULES,
                "tools.bash.allow, ask and deny on each simple command of a bash call",
                Arc::new(BashRulesResolver::default()),
            ),
            (
                CONFIG_RESOLVER,
                priority::OPTIONS,
                "tools.auto_approve: the closure policy, the function, names and globs",
                Arc::new(ConfigResolver::default()),
            ),
            (
                SANDBOX_RESOLVER,
                priority::SANDBOX,
                "approves sandbox-safe tools while a sandbox is active",
                Arc::new(SandboxResolver),
            ),
            (
                CATCH_ALL_RESOLVER,
                priority::FALLBACK,
                "approves everything when tools.require_approval is false",
                Arc::new(CatchAllResolver),
            ),
        ];
        for (name, priority, description, resolver) in builtins {
            chain.insert(Registration {
                name: ResolverName(name.to_owned()),
                priority,
                description: Some(description.to_owned()),
                resolver: Slot::Builtin(resolver),
            });
        }
        chain
    }

    fn insert(&mut self, registration: Registration) -> Option<Registration> {
        let replaced = self
            .entries
            .iter()
            .position(|e| e.name == registration.name)
            .map(|i| self.entries.remove(i));
        let at = self.entries.partition_point(|e| {
            (std::cmp::Reverse(e.priority), &e.name)
                < (std::cmp::Reverse(registration.priority), &registration.name)
        });
        self.entries.insert(at, registration);
        replaced
    }

    /// Registers a resolver, replacing one with the same name (returned).
    ///
    /// # Errors
    ///
    /// [`ApprovalError::InvalidName`].
    pub fn register(
        &mut self,
        name: &str,
        priority: i32,
        resolver: impl Resolver + 'static,
    ) -> Result<Option<Registration>, ApprovalError> {
        Ok(self.insert(Registration {
            name: ResolverName::new(name)?,
            priority,
            description: None,
            resolver: Slot::Resolver(Arc::new(resolver)),
        }))
    }

    /// Registers the resolver a tool module bundles, under the module's name, with the
    /// default description `Module approval resolver from <module>`.
    ///
    /// # Errors
    ///
    /// [`ApprovalError::InvalidName`].
    pub fn register_module(
        &mut self,
        module: &str,
        priority: Option<i32>,
        resolver: impl Resolver + 'static,
    ) -> Result<Option<Registration>, ApprovalError> {
        Ok(self.insert(Registration {
            name: ResolverName::new(module)?,
            priority: priority.unwrap_or(DEFAULT_PRIORITY),
            description: Some(format!("Module approval resolver from {module}")),
            resolver: Slot::Resolver(Arc::new(resolver)),
        }))
    }

    /// Removes a resolver; `true` when there was one.
    pub fn unregister(&mut self, name: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.name.as_str() != name);
        self.entries.len() != before
    }

    /// The registration called `name`.
    pub fn get(&self, name: &str) -> Option<&Registration> {
        self.entries.iter().find(|e| e.name.as_str() == name)
    }

    /// Every registration, in evaluation order.
    pub fn get_all(&self) -> &[Registration] {
        &self.entries
    }

    /// How many resolvers are registered.
    pub fn count(&self) -> usize {
        self.entries.len()
    }

    /// Removes every resolver.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Decides a call: the first resolver with a decision wins, except that a deny of any
    /// resolver wins over the decision of a resolver before it (deny wins over allow and over
    /// ask: a hook's allow does not undo a conversation's deny); `RequireApproval` when none
    /// decides. A resolver that fails (or panics) is skipped and reported in
    /// [`Outcome::failures`].
    ///
    /// Unlike the Flemma plugin, which stops at the first decision, this asks the resolvers
    /// after an approval or an ask whether they deny.
    pub async fn decide<'c>(
        &'c self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Outcome<'c> {
        self.decide_knowing(call, ctx, &KnownVerdicts::new()).await
    }

    /// Decides a call as [`decide`](Self::decide) does, taking the verdicts in `known` in
    /// their resolvers' places (those resolvers are not asked; a known verdict's resolver
    /// must be registered for it to count, in its own priority's turn).
    pub async fn decide_knowing<'c>(
        &'c self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
        known: &KnownVerdicts,
    ) -> Outcome<'c> {
        let mut failures = Vec::new();
        let mut first: Option<(Decision, &'c ResolverName)> = None;
        for entry in &self.entries {
            let verdict = match known.get(entry.name.as_str()) {
                Some(verdict) => Ok((verdict.clone(), None)),
                None => consult(entry, call, ctx).await,
            };
            match verdict {
                Ok((verdict, failure)) => {
                    if let Some(error) = failure {
                        failures.push(Failure {
                            resolver: &entry.name,
                            error,
                        });
                    }
                    match verdict.decision {
                        Some(decision @ Decision::Deny { .. }) => {
                            return Outcome {
                                decision,
                                resolver: Some(&entry.name),
                                failures,
                            };
                        }
                        Some(decision) if first.is_none() => {
                            first = Some((decision, &entry.name));
                        }
                        _ => {}
                    }
                }
                Err(error) => failures.push(Failure {
                    resolver: &entry.name,
                    error,
                }),
            }
        }
        match first {
            Some((decision, resolver)) => Outcome {
                decision,
                resolver: Some(resolver),
                failures,
            },
            None => Outcome {
                decision: Decision::RequireApproval,
                resolver: None,
                failures,
            },
        }
    }

    /// Decides a call as [`decide`](Self::decide) does and records every resolver consulted;
    /// a failing one shows as `error` with its message (and causes) as the entry's `detail`.
    pub async fn explain(&self, call: &ToolCall<'_>, ctx: &ApprovalContext<'_>) -> Explanation {
        let mut trace = Vec::new();
        let mut first: Option<(Decision, String)> = None;
        for entry in &self.entries {
            let (result, detail, decision) = match consult(entry, call, ctx).await {
                // A failure the resolver decided on is in its verdict's explanation.
                Ok((verdict, _)) => {
                    let result = match &verdict.decision {
                        None => TraceResult::Pass,
                        Some(Decision::Approve) => TraceResult::Approve,
                        Some(Decision::RequireApproval) => TraceResult::RequireApproval,
                        Some(Decision::Deny { .. }) => TraceResult::Deny,
                    };
                    (result, verdict.because, verdict.decision)
                }
                Err(error) => (TraceResult::Error, Some(error.report()), None),
            };
            trace.push(TraceEntry {
                resolver: entry.name.clone(),
                priority: entry.priority,
                result,
                detail,
            });
            match decision {
                Some(decision @ Decision::Deny { .. }) => {
                    return Explanation {
                        decision,
                        resolver: Some(entry.name.to_string()),
                        trace,
                    };
                }
                Some(decision) if first.is_none() => {
                    first = Some((decision, entry.name.to_string()));
                }
                _ => {}
            }
        }
        match first {
            Some((decision, resolver)) => Explanation {
                decision,
                resolver: Some(resolver),
                trace,
            },
            None => Explanation {
                decision: Decision::RequireApproval,
                resolver: None,
                trace,
            },
        }
    }
}

/// Asks one resolver: its verdict, with the failure it decided on (see
/// [`Builtin::verdict_and_failure`]); a panic, while making its future or while polling it, is
/// its error.
async fn consult(
    entry: &Registration,
    call: &ToolCall<'_>,
    ctx: &ApprovalContext<'_>,
) -> Result<(Verdict, Option<ResolverError>), ResolverError> {
    let resolver = match &entry.resolver {
        Slot::Builtin(builtin) => {
            return catch_unwind(AssertUnwindSafe(|| builtin.verdict_and_failure(call, ctx)))
                .map_err(|panic| ResolverError::panicked(&*panic));
        }
        Slot::Resolver(resolver) => resolver,
    };
    let future = catch_unwind(AssertUnwindSafe(|| resolver.resolve(call, ctx)))
        .map_err(|panic| ResolverError::panicked(&*panic))?;
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(ResolverError::panicked(&*panic)))
        .map(|verdict| (verdict, None))
}
