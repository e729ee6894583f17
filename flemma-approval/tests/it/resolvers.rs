//! Resolvers that fail, panic or await; contexts held across `.await`; the compiled-list cache.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use flemma_approval::{
    ApprovalContext, CONFIG_RESOLVER, Chain, ConfigResolver, Decision, Resolver, ResolverError,
    ToolCall, Verdict, async_resolver_fn, resolver_fn,
};
use flemma_config::{Config, Layer, Options};
use flemma_ids::ToolName;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// One conversation's options, with nothing sandbox-safe and no backend.
struct Conversation {
    config: Config,
    options: Options,
}

impl Conversation {
    fn new(auto_approve: &[&str]) -> Self {
        let mut config = Config::new();
        config
            .set(Layer::Setup, "tools.auto_approve", json!(auto_approve))
            .unwrap();
        let options = config.options().unwrap();
        Self { config, options }
    }

    fn ctx(&self) -> ApprovalContext<'_> {
        ApprovalContext::new(&self.config, &self.options)
            .with_tools(&|_: &ToolName| false)
            .with_sandbox(&false)
    }
}

fn call<'a>(name: &'a ToolName, input: &'a Value) -> ToolCall<'a> {
    ToolCall {
        name,
        input,
        id: None,
    }
}

/// An error with a cause, as a resolver calling a service would return.
struct Unreachable;

#[async_trait]
impl Resolver for Unreachable {
    async fn resolve(
        &self,
        _call: &ToolCall<'_>,
        _ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        tokio::task::yield_now().await;
        let cause = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        Err(ResolverError::with_source(
            "policy service unreachable",
            cause,
        ))
    }
}

#[tokio::test]
async fn a_failing_resolver_is_an_error_in_the_trace_and_the_next_one_decides() {
    let conversation = Conversation::new(&["read"]);
    let ctx = conversation.ctx();
    let mut chain = Chain::with_builtins();
    chain.register("app.remote", 150, Unreachable).unwrap();
    let name = ToolName::new("read").unwrap();
    let input = json!({});

    let explained = chain.explain(&call(&name, &input), &ctx).await;
    assert_eq!(
        serde_json::to_value(&explained).unwrap(),
        json!({
            "decision": "approve",
            "resolver": CONFIG_RESOLVER,
            "trace": [
                {"resolver": "app.remote", "priority": 150, "result": "error", "detail": "policy service unreachable: refused"},
                {"resolver": "urn:flemma:approval:bash-rules", "priority": 150, "result": "pass"},
                {"resolver": CONFIG_RESOLVER, "priority": 100, "result": "approve", "detail": "matched auto_approve entry \"read\""},
                // Asked whether they deny (deny wins over allow).
                {"resolver": "urn:flemma:approval:sandbox", "priority": 25, "result": "pass", "detail": "the tool does not declare auto_approves_if_sandboxed"},
                {"resolver": "urn:flemma:approval:catch-all", "priority": 0, "result": "pass"}
            ]
        })
    );

    let outcome = chain.decide(&call(&name, &input), &ctx).await;
    assert_eq!(outcome.decision, Decision::Approve);
    assert_eq!(outcome.resolver.unwrap().as_str(), CONFIG_RESOLVER);
    assert_eq!(outcome.failures.len(), 1);
    assert_eq!(outcome.failures[0].resolver.as_str(), "app.remote");
    assert_eq!(
        outcome.failures[0].error.message(),
        "policy service unreachable"
    );
    let cause = std::error::Error::source(&outcome.failures[0].error).unwrap();
    assert_eq!(cause.to_string(), "refused");
}

#[tokio::test]
async fn a_panicking_resolver_is_an_error_and_the_next_one_decides() {
    let conversation = Conversation::new(&[]);
    let ctx = conversation.ctx();
    let mut chain = Chain::new();
    // Panics while polled, after an await, not while its future is made.
    chain
        .register(
            "app.buggy",
            20,
            async_resolver_fn(|_, _| {
                Box::pin(async {
                    tokio::task::yield_now().await;
                    panic!("index out of range")
                })
            }),
        )
        .unwrap();
    chain
        .register(
            "app.sync_buggy",
            15,
            resolver_fn(|_, _| -> Verdict { panic!("sync bug") }),
        )
        .unwrap();
    chain
        .register(
            "app.fallback",
            10,
            resolver_fn(|_, _| Verdict::deny(None).because("fallback")),
        )
        .unwrap();
    let name = ToolName::new("bash").unwrap();
    let input = json!({});

    let explained = chain.explain(&call(&name, &input), &ctx).await;
    assert_eq!(
        serde_json::to_value(&explained).unwrap(),
        json!({
            "decision": "deny",
            "resolver": "app.fallback",
            "trace": [
                {"resolver": "app.buggy", "priority": 20, "result": "error", "detail": "panicked: index out of range"},
                {"resolver": "app.sync_buggy", "priority": 15, "result": "error", "detail": "panicked: sync bug"},
                {"resolver": "app.fallback", "priority": 10, "result": "deny", "detail": "fallback"}
            ]
        })
    );
    let outcome = chain.decide(&call(&name, &input), &ctx).await;
    assert_eq!(outcome.decision, Decision::Deny { reason: None });
    let failed: Vec<(&str, &str)> = outcome
        .failures
        .iter()
        .map(|f| (f.resolver.as_str(), f.error.message()))
        .collect();
    assert_eq!(
        failed,
        [
            ("app.buggy", "panicked: index out of range"),
            ("app.sync_buggy", "panicked: sync bug")
        ]
    );
}

/// Asks a "person" (another task) through a channel and awaits the answer.
fn ask_a_person(ask: mpsc::Sender<(String, oneshot::Sender<bool>)>) -> impl Resolver {
    async_resolver_fn(move |call, _ctx| {
        let ask = ask.clone();
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            ask.send((call.name.to_string(), answer))
                .await
                .map_err(|e| ResolverError::with_source("nobody to ask", e))?;
            let yes = answered
                .await
                .map_err(|e| ResolverError::with_source("no answer", e))?;
            Ok(if yes {
                Verdict::approve().because("the person said yes")
            } else {
                Verdict::pass()
            })
        })
    })
}

#[tokio::test]
async fn an_async_resolver_awaits_an_answer_from_another_task() {
    let (ask, mut asked) = mpsc::channel::<(String, oneshot::Sender<bool>)>(1);
    let person = tokio::spawn(async move {
        let mut questions = Vec::new();
        while let Some((tool, answer)) = asked.recv().await {
            // Takes its time, so the resolver really waits.
            tokio::time::sleep(Duration::from_millis(5)).await;
            answer.send(tool == "deploy").unwrap();
            questions.push(tool);
        }
        questions
    });
    let conversation = Conversation::new(&[]);
    let ctx = conversation.ctx();
    let mut chain = Chain::with_builtins();
    chain
        .register("app.person", 200, ask_a_person(ask))
        .unwrap();
    let input = json!({});

    let deploy = ToolName::new("deploy").unwrap();
    let explained = chain.explain(&call(&deploy, &input), &ctx).await;
    assert_eq!(explained.decision, Decision::Approve);
    assert_eq!(explained.resolver.as_deref(), Some("app.person"));
    assert_eq!(
        explained.trace[0].detail.as_deref(),
        Some("the person said yes")
    );
    let bash = ToolName::new("bash").unwrap();
    let outcome = chain.decide(&call(&bash, &input), &ctx).await;
    assert_eq!(outcome.decision, Decision::RequireApproval);
    assert!(outcome.resolver.is_none());
    assert!(outcome.failures.is_empty());

    drop(chain);
    assert_eq!(person.await.unwrap(), ["deploy", "bash"]);
}

#[tokio::test]
async fn a_resolver_whose_person_left_fails_and_the_chain_goes_on() {
    let (ask, asked) = mpsc::channel(1);
    drop(asked);
    let conversation = Conversation::new(&["deploy"]);
    let ctx = conversation.ctx();
    let mut chain = Chain::with_builtins();
    chain
        .register("app.person", 200, ask_a_person(ask))
        .unwrap();
    let deploy = ToolName::new("deploy").unwrap();
    let input = json!({});
    let explained = chain.explain(&call(&deploy, &input), &ctx).await;
    assert_eq!(explained.resolver.as_deref(), Some(CONFIG_RESOLVER));
    assert_eq!(
        explained.trace[0].detail.as_deref(),
        Some("nobody to ask: channel closed")
    );
}

#[test]
fn contexts_calls_and_chains_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ApprovalContext<'static>>();
    send_sync::<ToolCall<'static>>();
    send_sync::<Chain>();
    send_sync::<Box<dyn Resolver>>();
    // Object safety: a boxed resolver is a resolver.
    let boxed: Box<dyn Resolver> = Box::new(resolver_fn(|_, _| Verdict::pass()));
    Chain::new().register("boxed", 1, boxed).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_is_held_across_an_await_in_a_spawned_task() {
    let chain = Arc::new(Chain::with_builtins());
    let task = tokio::spawn({
        let chain = Arc::clone(&chain);
        async move {
            let conversation = Conversation::new(&["read"]);
            let tools = |name: &ToolName| *name == "bash";
            let ctx = ApprovalContext::new(&conversation.config, &conversation.options)
                .with_tools(&tools)
                .with_sandbox(&true);
            tokio::time::sleep(Duration::from_millis(1)).await;
            let input = json!({});
            let read = ToolName::new("read").unwrap();
            let first = chain.decide(&call(&read, &input), &ctx).await.decision;
            tokio::task::yield_now().await;
            let bash = ToolName::new("bash").unwrap();
            let second = chain.explain(&call(&bash, &input), &ctx).await;
            (first, second.decision, second.resolver)
        }
    });
    assert_eq!(
        task.await.unwrap(),
        (
            Decision::Approve,
            Decision::Approve,
            Some("urn:flemma:approval:sandbox".to_owned())
        )
    );
}

#[tokio::test]
async fn alternating_conversations_compile_each_list_once() {
    let resolver = Arc::new(ConfigResolver::default());
    let mut chain = Chain::new();
    chain
        .register(CONFIG_RESOLVER, 100, Arc::clone(&resolver))
        .unwrap();
    let conversations: Vec<Conversation> = (0..4)
        .map(|i| Conversation::new(&[&format!("tool_{i}"), "mcp.*"]))
        .collect();
    let input = json!({});
    let names: Vec<ToolName> = (0..4)
        .map(|i| ToolName::new(format!("tool_{i}")).unwrap())
        .collect();
    for round in 0..50 {
        for (i, conversation) in conversations.iter().enumerate() {
            let ctx = conversation.ctx();
            let own = chain.decide(&call(&names[i], &input), &ctx).await;
            assert_eq!(own.decision, Decision::Approve, "round {round}, #{i}");
            let other = &names[(i + 1) % 4];
            let theirs = chain.decide(&call(other, &input), &ctx).await;
            assert_eq!(theirs.decision, Decision::RequireApproval);
        }
    }
    assert_eq!(resolver.compiled_lists(), 4);

    // A change makes a new options state: its list is compiled once more.
    let mut changed = Conversation::new(&["tool_0"]);
    changed
        .config
        .append(Layer::Runtime, "tools.auto_approve", "tool_9")
        .unwrap();
    changed.options = changed.config.options().unwrap();
    for _ in 0..3 {
        let nine = ToolName::new("tool_9").unwrap();
        let outcome = chain.decide(&call(&nine, &input), &changed.ctx()).await;
        assert_eq!(outcome.decision, Decision::Approve);
    }
    assert_eq!(resolver.compiled_lists(), 5);
}

#[test]
fn a_chain_of_synchronous_resolvers_is_ready_at_once() {
    use futures_util::FutureExt as _;
    let conversation = Conversation::new(&["read"]);
    let read = ToolName::new("read").unwrap();
    let input = json!({});
    let outcome = Chain::with_builtins()
        .decide(&call(&read, &input), &conversation.ctx())
        .now_or_never()
        .map(|o| o.decision);
    assert_eq!(outcome, Some(Decision::Approve));
}

#[tokio::test]
async fn a_panicking_policy_asks_and_is_reported_as_a_failure() {
    let mut conversation = Conversation::new(&["read"]);
    conversation
        .config
        .set_auto_approve_policy(Some(flemma_config::AutoApprovePolicy::new(|_, _| {
            panic!("policy bug")
        })));
    let ctx = conversation.ctx();
    let chain = Chain::with_builtins();
    let name = ToolName::new("read").unwrap();
    let input = json!({});
    let outcome = chain.decide(&call(&name, &input), &ctx).await;
    assert_eq!(outcome.decision, Decision::RequireApproval, "fail closed");
    assert_eq!(outcome.resolver.unwrap().as_str(), CONFIG_RESOLVER);
    let failed: Vec<(&str, &str)> = outcome
        .failures
        .iter()
        .map(|f| (f.resolver.as_str(), f.error.message()))
        .collect();
    assert_eq!(
        failed,
        [(
            CONFIG_RESOLVER,
            "the auto_approve policy panicked: policy bug, so the call waits for approval"
        )]
    );
}

/// A resolver that counts how often it is asked, and denies.
struct Counting(std::sync::atomic::AtomicUsize);

#[async_trait]
impl Resolver for Counting {
    async fn resolve(
        &self,
        _call: &ToolCall<'_>,
        _ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Verdict::deny(Some("asked".into())))
    }
}

/// A verdict known before the chain is asked (the hooks ran once for the call) takes its
/// resolver's turn: the resolver is not asked again, a known approval does not undo a later
/// resolver's deny, a known deny wins over an earlier approval, and a verdict known for a
/// resolver the chain does not have counts for nothing.
#[tokio::test]
async fn a_known_verdict_takes_its_resolvers_turn_and_deny_still_wins() {
    use flemma_approval::KnownVerdicts;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let conversation = Conversation::new(&["read"]);
    let ctx = conversation.ctx();
    let counting = Arc::new(Counting(AtomicUsize::new(0)));
    let mut chain = Chain::with_builtins();
    chain
        .register("app.hooks", 200, Arc::clone(&counting))
        .unwrap();
    let read = ToolName::new("read").unwrap();
    let bash = ToolName::new("bash").unwrap();
    let input = json!({});

    // Known approval in place of the resolver's deny: not asked, config approves too.
    let approve = KnownVerdicts::new().with("app.hooks", Verdict::approve());
    let outcome = chain
        .decide_knowing(&call(&read, &input), &ctx, &approve)
        .await;
    assert_eq!(outcome.decision, Decision::Approve);
    assert_eq!(outcome.resolver.unwrap().as_str(), "app.hooks");
    assert_eq!(counting.0.load(Ordering::SeqCst), 0);

    // A known deny wins, whatever comes after.
    let deny = KnownVerdicts::new().with("app.hooks", Verdict::deny(Some("known".into())));
    let outcome = chain
        .decide_knowing(&call(&read, &input), &ctx, &deny)
        .await;
    assert_eq!(
        outcome.decision,
        Decision::Deny {
            reason: Some("known".into())
        }
    );
    assert_eq!(counting.0.load(Ordering::SeqCst), 0);

    // Known for a resolver the chain has not: the chain's own resolvers decide (and the
    // counting one is asked, and denies).
    let elsewhere = KnownVerdicts::new().with("app.other", Verdict::approve());
    let outcome = chain
        .decide_knowing(&call(&bash, &input), &ctx, &elsewhere)
        .await;
    assert_eq!(
        outcome.decision,
        Decision::Deny {
            reason: Some("asked".into())
        }
    );
    assert_eq!(counting.0.load(Ordering::SeqCst), 1);

    // A later resolver's deny wins over a known approval before it.
    let mut deny_after = Chain::with_builtins();
    deny_after
        .register("app.hooks", 200, resolver_fn(|_, _| Verdict::pass()))
        .unwrap();
    deny_after
        .register("app.policy", 50, resolver_fn(|_, _| Verdict::deny(None)))
        .unwrap();
    let outcome = deny_after
        .decide_knowing(&call(&read, &input), &ctx, &approve)
        .await;
    assert_eq!(outcome.decision, Decision::Deny { reason: None });
    assert_eq!(outcome.resolver.unwrap().as_str(), "app.policy");
}
