//! Registration, ordering and the explain contract.

use flemma_approval::{ApprovalContext, ApprovalError, Chain, ToolCall, Verdict, resolver_fn};
use flemma_config::Config;
use flemma_ids::ToolName;
use pretty_assertions::assert_eq;
use serde_json::json;

#[test]
fn registration_orders_by_priority_then_name_and_replaces_by_name() {
    let mut chain = Chain::with_builtins();
    chain
        .register("b.mid", 50, resolver_fn(|_, _| Verdict::pass()))
        .unwrap();
    chain
        .register("a.mid", 50, resolver_fn(|_, _| Verdict::pass()))
        .unwrap();
    chain
        .register_module(
            "my_plugin.security",
            None,
            resolver_fn(|_, _| Verdict::pass()),
        )
        .unwrap();
    let order: Vec<(&str, i32)> = chain
        .get_all()
        .iter()
        .map(|r| (r.name.as_str(), r.priority))
        .collect();
    assert_eq!(
        order,
        [
            ("urn:flemma:approval:bash-rules", 150),
            ("urn:flemma:approval:config", 100),
            ("a.mid", 50),
            ("b.mid", 50),
            ("my_plugin.security", 50),
            ("urn:flemma:approval:sandbox", 25),
            ("urn:flemma:approval:catch-all", 0),
        ]
    );
    assert_eq!(
        chain
            .get("my_plugin.security")
            .unwrap()
            .description
            .as_deref(),
        Some("Module approval resolver from my_plugin.security")
    );
    let replaced = chain
        .register("a.mid", 300, resolver_fn(|_, _| Verdict::pass()))
        .unwrap();
    assert!(replaced.is_some());
    assert_eq!(chain.get_all()[0].name.as_str(), "a.mid");
    assert_eq!(chain.count(), 7);
    assert!(chain.unregister("b.mid"));
    assert!(!chain.unregister("b.mid"));
    assert_eq!(chain.count(), 6);
    assert!(matches!(
        chain.register("has space", 1, resolver_fn(|_, _| Verdict::pass())),
        Err(ApprovalError::InvalidName { .. })
    ));
    assert!(matches!(
        chain.register("", 1, resolver_fn(|_, _| Verdict::pass())),
        Err(ApprovalError::InvalidName { .. })
    ));
    chain.clear();
    assert_eq!(chain.count(), 0);
}

#[tokio::test]
async fn nothing_deciding_means_require_approval_from_the_default() {
    let config = Config::new();
    let options = config.options().unwrap();
    let ctx = ApprovalContext::new(&config, &options)
        .with_tools(&|_: &ToolName| true)
        .with_sandbox(&false);
    let input = json!({});
    let explained = Chain::with_builtins()
        .explain(
            &ToolCall {
                name: &ToolName::new("bash").unwrap(),
                input: &input,
                id: None,
            },
            &ctx,
        )
        .await;
    assert_eq!(
        serde_json::to_value(&explained).unwrap(),
        json!({
            "decision": "require_approval",
            "resolver": "default",
            "trace": [
                {"resolver": "urn:flemma:approval:bash-rules", "priority": 150, "result": "pass", "detail": "no tools.bash.allow, ask or deny rules"},
                {"resolver": "urn:flemma:approval:config", "priority": 100, "result": "pass"},
                {"resolver": "urn:flemma:approval:sandbox", "priority": 25, "result": "pass", "detail": "no sandbox backend is available"},
                {"resolver": "urn:flemma:approval:catch-all", "priority": 0, "result": "pass"}
            ]
        })
    );
    assert!(
        Chain::new()
            .explain(
                &ToolCall {
                    name: &ToolName::new("bash").unwrap(),
                    input: &input,
                    id: None
                },
                &ctx
            )
            .await
            .trace
            .is_empty()
    );
}

#[tokio::test]
async fn deny_reasons_reach_the_json() {
    let config = Config::new();
    let options = config.options().unwrap();
    let ctx = ApprovalContext::new(&config, &options)
        .with_tools(&|_: &ToolName| false)
        .with_sandbox(&false);
    let mut chain = Chain::new();
    chain
        .register(
            "guard",
            1,
            resolver_fn(|_, _| Verdict::deny(Some("frozen".into())).because("release freeze")),
        )
        .unwrap();
    let input = json!({});
    let json = serde_json::to_value(
        chain
            .explain(
                &ToolCall {
                    name: &ToolName::new("x").unwrap(),
                    input: &input,
                    id: None,
                },
                &ctx,
            )
            .await,
    )
    .unwrap();
    assert_eq!(json["decision"], "deny");
    assert_eq!(json["reason"], "frozen");
    assert_eq!(json["trace"][0]["detail"], "release freeze");
}
