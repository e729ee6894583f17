//! The approval table: presets, globs, frontmatter intent, each sandbox condition, the
//! catch-all, closure policies, failing and panicking resolvers and priority ties.

use flemma_approval::{ApprovalContext, Chain, ResolverError, ToolCall, Verdict, resolver_fn};
use flemma_config::{AutoApprovePolicy, Config, Layer, PolicyDecision};
use flemma_ids::{ToolName, ToolUseId};
use serde_json::{Value, json};

/// One row of the table.
struct Case {
    name: &'static str,
    /// `flemma.toml` text (SETUP layer).
    toml: &'static str,
    /// JSON frontmatter (FRONTMATTER layer).
    frontmatter: &'static str,
    /// RUNTIME sets.
    runtime: &'static [(&'static str, bool)],
    tool: &'static str,
    /// The tool declares `auto_approves_if_sandboxed`.
    sandbox_safe: bool,
    /// A sandbox backend is available.
    backend: bool,
    /// Extra setup on the config and chain.
    extra: Extra,
    expect: &'static str,
    by: &'static str,
}

#[derive(Clone, Copy)]
enum Extra {
    None,
    RemoveWriteInFrontmatter,
    Policy(fn(&str, &Value) -> PolicyDecision),
    PanickingPolicy,
    Resolver(&'static str, i32, fn(&str) -> Verdict),
    PanickingResolver(i32),
    FailingResolver(i32),
}

const BASE: Case = Case {
    name: "",
    toml: "",
    frontmatter: "",
    runtime: &[],
    tool: "read",
    sandbox_safe: false,
    backend: false,
    extra: Extra::None,
    expect: "approve",
    by: "urn:flemma:approval:config",
};

const CONFIG: &str = "urn:flemma:approval:config";
const SANDBOX: &str = "urn:flemma:approval:sandbox";
const CATCH_ALL: &str = "urn:flemma:approval:catch-all";
const DEFAULT: &str = "default";

#[expect(clippy::too_many_lines, reason = "a table of cases")]
fn cases() -> Vec<Case> {
    let ask = |name, tool| Case {
        name,
        tool,
        expect: "require_approval",
        by: DEFAULT,
        ..BASE
    };
    let sandboxed = |name| Case {
        name,
        tool: "bash",
        sandbox_safe: true,
        backend: true,
        expect: "approve",
        by: SANDBOX,
        ..BASE
    };
    vec![
        // The default $standard preset.
        Case {
            name: "standard: read",
            tool: "read",
            ..BASE
        },
        Case {
            name: "standard: write",
            tool: "write",
            ..BASE
        },
        Case {
            name: "standard: edit",
            tool: "edit",
            ..BASE
        },
        Case {
            name: "standard: find",
            tool: "find",
            ..BASE
        },
        Case {
            name: "standard: grep",
            tool: "grep",
            ..BASE
        },
        Case {
            name: "standard: ls",
            tool: "ls",
            ..BASE
        },
        Case {
            name: "standard: flemma.* glob",
            tool: "flemma.jobs.status",
            ..BASE
        },
        ask("standard: bash is not in it", "bash"),
        ask("standard: flemma alone does not match flemma.*", "flemma"),
        // Presets chosen in setup and frontmatter.
        Case {
            name: "setup $readonly: read",
            toml: "[tools]\nauto_approve = [\"$readonly\"]",
            tool: "read",
            ..BASE
        },
        Case {
            name: "setup $readonly: edit asks",
            toml: "[tools]\nauto_approve = [\"$readonly\"]",
            ..ask("", "edit")
        },
        Case {
            name: "frontmatter $readonly: write asks",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["$readonly"]}}}"#,
            ..ask("", "write")
        },
        Case {
            name: "user preset $ci",
            toml: "[tools]\nauto_approve = [\"$ci\"]\n[presets.\"$ci\"]\nauto_approve = [\"bash\"]",
            tool: "bash",
            ..BASE
        },
        Case {
            name: "user preset $ci: read no longer approved",
            toml: "[tools]\nauto_approve = [\"$ci\"]\n[presets.\"$ci\"]\nauto_approve = [\"bash\"]",
            ..ask("", "read")
        },
        Case {
            name: "user $standard overrides the built-in",
            toml: "[presets.\"$standard\"]\nauto_approve = [\"read\"]",
            ..ask("", "write")
        },
        Case {
            name: "unknown preset approves nothing",
            toml: "[tools]\nauto_approve = [\"$nope\"]",
            ..ask("", "read")
        },
        // Removing a tool that came from a preset.
        Case {
            name: "frontmatter [$standard, !write]: write asks",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["$standard","!write"]}}}"#,
            ..ask("", "write")
        },
        Case {
            name: "frontmatter [$standard, !write]: edit stays",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["$standard","!write"]}}}"#,
            tool: "edit",
            ..BASE
        },
        Case {
            name: "frontmatter :remove(write)",
            extra: Extra::RemoveWriteInFrontmatter,
            ..ask("", "write")
        },
        Case {
            name: "frontmatter +bash appends",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["+bash"]}}}"#,
            tool: "bash",
            ..BASE
        },
        Case {
            name: "frontmatter ^bash prepends",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["^bash"]}}}"#,
            tool: "bash",
            ..BASE
        },
        Case {
            name: "frontmatter +bash keeps read",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["+bash"]}}}"#,
            tool: "read",
            ..BASE
        },
        // Globs and exact names.
        Case {
            name: "glob mcp.*",
            toml: "[tools]\nauto_approve = [\"+mcp.*\"]",
            tool: "mcp.fs.read",
            ..BASE
        },
        Case {
            name: "glob mcp.* does not match mcpx.read",
            toml: "[tools]\nauto_approve = [\"+mcp.*\"]",
            ..ask("", "mcpx.read")
        },
        Case {
            name: "glob * matches everything",
            toml: "[tools]\nauto_approve = [\"*\"]",
            tool: "anything-at-all",
            ..BASE
        },
        Case {
            name: "exact deploy",
            toml: "[tools]\nauto_approve = [\"deploy\"]",
            tool: "deploy",
            ..BASE
        },
        Case {
            name: "exact deploy is not deploy2",
            toml: "[tools]\nauto_approve = [\"deploy\"]",
            ..ask("", "deploy2")
        },
        Case {
            name: "? is literal",
            toml: "[tools]\nauto_approve = [\"a?\"]",
            ..ask("", "ab")
        },
        // The sandbox resolver, one condition at a time.
        sandboxed("sandbox: all six conditions hold"),
        Case {
            name: "sandbox: auto_approve_sandboxed = false",
            toml: "[tools]\nauto_approve_sandboxed = false",
            ..ask("", "bash")
        }
        .sandbox(true, true),
        Case {
            name: "sandbox: tool lacks the capability",
            ..ask("", "bash")
        }
        .sandbox(false, true),
        Case {
            name: "sandbox: frontmatter removes bash",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["!bash"]}}}"#,
            ..ask("", "bash")
        }
        .sandbox(true, true),
        Case {
            name: "sandbox: frontmatter sets auto_approve",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["read"]}}}"#,
            ..ask("", "bash")
        }
        .sandbox(true, true),
        Case {
            name: "sandbox: frontmatter set still approves read by config",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["read"]}}}"#,
            tool: "read",
            ..BASE
        }
        .sandbox(true, true),
        Case {
            name: "sandbox: frontmatter appending keeps the sandbox rule",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["+grep"]}}}"#,
            ..sandboxed("")
        },
        Case {
            name: "sandbox: disabled in setup",
            toml: "sandbox = false",
            ..ask("", "bash")
        }
        .sandbox(true, true),
        // A frontmatter cannot widen the sandbox (issue 34): its `enabled = false` is not
        // taken, the sandbox stays on, and bash is approved as sandboxed.
        Case {
            name: "sandbox: disabled in frontmatter stays on",
            frontmatter: r#"{"flemma":{"sandbox":{"enabled":false}}}"#,
            ..sandboxed("")
        },
        Case {
            name: "sandbox: runtime disable beats frontmatter enable",
            frontmatter: r#"{"flemma":{"sandbox":{"enabled":true}}}"#,
            runtime: &[("sandbox.enabled", false)],
            ..ask("", "bash")
        }
        .sandbox(true, true),
        Case {
            name: "sandbox: runtime enable beats frontmatter disable",
            frontmatter: r#"{"flemma":{"sandbox":{"enabled":false}}}"#,
            runtime: &[("sandbox.enabled", true)],
            ..sandboxed("")
        },
        Case {
            name: "sandbox: no backend",
            ..ask("", "bash")
        }
        .sandbox(true, false),
        // The catch-all.
        Case {
            name: "catch-all: require_approval = false",
            toml: "[tools]\nrequire_approval = false",
            tool: "deploy",
            by: CATCH_ALL,
            ..BASE
        },
        Case {
            name: "catch-all: frontmatter turns approval back on",
            toml: "[tools]\nrequire_approval = false",
            frontmatter: r#"{"flemma":{"tools":{"require_approval":true}}}"#,
            ..ask("", "deploy")
        },
        Case {
            name: "catch-all: config still decides first",
            toml: "[tools]\nrequire_approval = false",
            tool: "read",
            ..BASE
        },
        // Closure policies.
        Case {
            name: "policy approves bash",
            extra: Extra::Policy(|t, _| {
                if t == "bash" {
                    PolicyDecision::Approve
                } else {
                    PolicyDecision::Pass
                }
            }),
            tool: "bash",
            ..BASE
        },
        Case {
            name: "policy denies rm",
            extra: Extra::Policy(|_, i| {
                if i["command"].as_str().is_some_and(|c| c.contains("rm ")) {
                    PolicyDecision::Deny(Some("no rm".into()))
                } else {
                    PolicyDecision::Pass
                }
            }),
            tool: "bash",
            expect: "deny",
            ..BASE
        },
        Case {
            name: "policy passes to the list",
            extra: Extra::Policy(|_, _| PolicyDecision::Pass),
            tool: "read",
            ..BASE
        },
        Case {
            name: "policy asks even for listed tools",
            extra: Extra::Policy(|_, _| PolicyDecision::RequireApproval),
            tool: "read",
            expect: "require_approval",
            ..BASE
        },
        Case {
            name: "a panicking policy fails closed",
            extra: Extra::PanickingPolicy,
            tool: "read",
            expect: "require_approval",
            ..BASE
        },
        // Application resolvers, priorities and ties.
        Case {
            name: "resolver at 200 denies before config",
            extra: Extra::Resolver("app.guard", 200, |_| Verdict::deny(Some("frozen".into()))),
            tool: "read",
            expect: "deny",
            by: "app.guard",
            ..BASE
        },
        Case {
            name: "tie at 100: a.first sorts before urn:",
            extra: Extra::Resolver("a.first", 100, |_| Verdict::require_approval()),
            tool: "read",
            expect: "require_approval",
            by: "a.first",
            ..BASE
        },
        Case {
            name: "tie at 100: zz.last sorts after urn:",
            extra: Extra::Resolver("zz.last", 100, |_| Verdict::require_approval()),
            tool: "read",
            ..BASE
        },
        // Deny wins over allow (issue 34): a resolver after the deciding one still denies.
        Case {
            name: "a deny after an approval wins",
            extra: Extra::Resolver("zz.last", 100, |_| Verdict::deny(None)),
            tool: "read",
            expect: "deny",
            by: "zz.last",
            ..BASE
        },
        Case {
            name: "resolver at 50 decides what config passed",
            extra: Extra::Resolver("app.mid", 50, |t| {
                if t == "deploy" {
                    Verdict::approve()
                } else {
                    Verdict::pass()
                }
            }),
            tool: "deploy",
            by: "app.mid",
            ..BASE
        },
        Case {
            name: "resolver at 10 comes after the sandbox",
            extra: Extra::Resolver("app.low", 10, |_| Verdict::require_approval()),
            ..sandboxed("")
        },
        // A host's resolver in its band: a frontmatter that approves the tool comes after it.
        Case {
            name: "a host resolver's ask is not overridden by the frontmatter",
            frontmatter: r#"{"flemma":{"tools":{"auto_approve":["+deploy"]}}}"#,
            extra: Extra::Resolver("app.policy", flemma_approval::priority::HOST, |_| {
                Verdict::require_approval()
            }),
            tool: "deploy",
            expect: "require_approval",
            by: "app.policy",
            ..BASE
        },
        Case {
            name: "a deny below the sandbox's approval wins",
            extra: Extra::Resolver("app.low", 10, |_| Verdict::deny(None)),
            expect: "deny",
            by: "app.low",
            ..sandboxed("")
        },
        Case {
            name: "a panicking resolver is skipped",
            extra: Extra::PanickingResolver(150),
            tool: "read",
            ..BASE
        },
        Case {
            name: "a failing resolver is skipped",
            extra: Extra::FailingResolver(150),
            tool: "read",
            ..BASE
        },
        Case {
            name: "a failing resolver is skipped down to the default",
            extra: Extra::FailingResolver(150),
            ..ask("", "deploy")
        },
    ]
}

impl Case {
    fn sandbox(mut self, safe: bool, backend: bool) -> Self {
        self.sandbox_safe = safe;
        self.backend = backend;
        self
    }
}

async fn run(case: &Case) -> (String, String) {
    let mut config = Config::new();
    if !case.toml.is_empty() {
        config
            .load_toml_str(case.toml, "flemma.toml".as_ref())
            .unwrap();
    }
    for (path, value) in case.runtime {
        config.set(Layer::Runtime, path, *value).unwrap();
    }
    if !case.frontmatter.is_empty() {
        config
            .apply_frontmatter("json", case.frontmatter, 2)
            .unwrap();
    }
    let mut chain = Chain::with_builtins();
    match case.extra {
        Extra::None => {}
        Extra::RemoveWriteInFrontmatter => config
            .remove(Layer::Frontmatter, "tools.auto_approve", "write")
            .unwrap(),
        Extra::Policy(f) => config.set_auto_approve_policy(Some(AutoApprovePolicy::new(
            move |name: &ToolName, input: &Value| f(name.as_str(), input),
        ))),
        Extra::PanickingPolicy => config
            .set_auto_approve_policy(Some(AutoApprovePolicy::new(|_, _| panic!("policy bug")))),
        Extra::Resolver(name, priority, f) => {
            chain
                .register(
                    name,
                    priority,
                    resolver_fn(move |call, _| f(call.name.as_str())),
                )
                .unwrap();
        }
        Extra::PanickingResolver(priority) => {
            chain
                .register(
                    "app.buggy",
                    priority,
                    resolver_fn(|_, _| -> Verdict { panic!("resolver bug") }),
                )
                .unwrap();
        }
        Extra::FailingResolver(priority) => {
            chain
                .register(
                    "app.offline",
                    priority,
                    resolver_fn(|_, _| -> Result<Verdict, ResolverError> {
                        Err(ResolverError::new("the policy service is offline"))
                    }),
                )
                .unwrap();
        }
    }
    let options = config.options().unwrap();
    let safe = case.sandbox_safe;
    let tools = move |_: &ToolName| safe;
    let ctx = ApprovalContext::new(&config, &options)
        .with_tools(&tools)
        .with_sandbox(&case.backend);
    let input = json!({"command": "rm -rf build", "path": "a.rs"});
    let name = ToolName::new(case.tool).unwrap();
    let id = ToolUseId::new("toolu_01").unwrap();
    let call = ToolCall {
        name: &name,
        input: &input,
        id: Some(&id),
    };
    let explained = chain.explain(&call, &ctx).await;
    let outcome = chain.decide(&call, &ctx).await;
    assert_eq!(
        (&outcome.decision, outcome.resolver.map(ToString::to_string)),
        (&explained.decision, explained.resolver.clone()),
        "{}: decide and explain agree",
        case.name
    );
    (
        explained.decision.as_str().to_owned(),
        explained.resolver.unwrap_or_else(|| "default".to_owned()),
    )
}

#[tokio::test]
async fn approval_table() {
    let cases = cases();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let got = run(case).await;
        let expected = (case.expect.to_owned(), case.by.to_owned());
        if got != expected {
            failures.push(format!("{}: expected {expected:?}, got {got:?}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn the_panicking_resolver_shows_as_an_error_in_the_trace() {
    let config = Config::new();
    let options = config.options().unwrap();
    let ctx = ApprovalContext::new(&config, &options)
        .with_tools(&|_: &ToolName| false)
        .with_sandbox(&false);
    let mut chain = Chain::with_builtins();
    chain
        .register(
            "app.buggy",
            150,
            resolver_fn(|_, _| -> Verdict { panic!("resolver bug") }),
        )
        .unwrap();
    let input = json!({});
    let explained = chain
        .explain(
            &ToolCall {
                name: &ToolName::new("read").unwrap(),
                input: &input,
                id: None,
            },
            &ctx,
        )
        .await;
    let json = serde_json::to_value(&explained).unwrap();
    assert_eq!(
        json,
        json!({
            "decision": "approve",
            "resolver": CONFIG,
            "trace": [
                {"resolver": "app.buggy", "priority": 150, "result": "error", "detail": "panicked: resolver bug"},
                {"resolver": "urn:flemma:approval:bash-rules", "priority": 150, "result": "pass"},
                {"resolver": CONFIG, "priority": 100, "result": "approve", "detail": "matched auto_approve entry \"read\" of the default $standard"},
                {"resolver": "urn:flemma:approval:sandbox", "priority": 25, "result": "pass", "detail": "the tool does not declare auto_approves_if_sandboxed"},
                {"resolver": "urn:flemma:approval:catch-all", "priority": 0, "result": "pass"}
            ]
        })
    );
}
