//! Spec §4.2-4.3 and §5.1: registration, asynchronous sources, the conversation's tool set.

use std::time::Duration;

use flemma_config::{Config, Layer};
use flemma_core::{FnTool, ToolDefinition, ToolOutput, tool_fn};
use flemma_runtime::{Registrar, RegistryWarning, ToolRegistry, ToolSource};
use flemma_schema::Capability;
use serde_json::json;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn tool(name: &str) -> FnTool {
    named(ToolDefinition::builder(name, "A test tool.").unwrap())
}

fn named(builder: flemma_core::ToolDefinitionBuilder) -> FnTool {
    tool_fn(builder.build().unwrap(), |_, ctx| {
        ToolOutput::text(ctx.tool_name().to_string())
    })
}

fn names(registry: &ToolRegistry, options: &flemma_config::Options) -> Vec<String> {
    registry
        .tool_set(options)
        .iter()
        .map(|t| t.definition().name().to_string())
        .collect()
}

#[test]
fn registering_again_replaces_with_a_warning() {
    let registry = ToolRegistry::new();
    assert_eq!(registry.register(tool("calc")), None);
    let warning = registry.register(tool("calc")).unwrap();
    assert_eq!(
        warning.to_string(),
        "tool 'calc' redefined (previously registered, now overwritten)"
    );
    assert_eq!(registry.take_warnings(), [warning]);
    assert!(registry.take_warnings().is_empty());
    assert_eq!(registry.names(), ["calc"]);
}

/// The revision moves with every change of the tool set, in every clone, and never with a
/// read: a cache keyed by it (the transcript's evaluated options) sees a tool replaced by
/// another, even one that got the first one's address.
#[test]
fn the_revision_moves_with_every_change_of_the_tool_set() {
    let registry = ToolRegistry::new();
    let clone = registry.clone();
    let start = registry.revision();
    registry.register(tool("calc"));
    let registered = registry.revision();
    assert_ne!(registered, start);
    let _ = (registry.list(), registry.names(), registry.get("calc"));
    assert_eq!(registry.revision(), registered);
    // Dropped, and another under the same name.
    drop(registry.unregister("calc"));
    let removed = clone.revision();
    assert_ne!(removed, registered);
    clone.register(tool("calc"));
    assert_ne!(registry.revision(), removed);
    assert_ne!(registry.revision(), registered);
    // Removing what is not there changes nothing.
    let now = registry.revision();
    assert!(registry.unregister("missing").is_none());
    assert_eq!(registry.revision(), now);
    registry.clear();
    assert_ne!(registry.revision(), now);
}

#[test]
fn unregister_get_and_executable() {
    let registry = ToolRegistry::new();
    registry.register(tool("b"));
    registry.register(named(
        ToolDefinition::builder("a.x", "offered only")
            .unwrap()
            .executable(false),
    ));
    assert_eq!(registry.names(), ["a.x", "b"]);
    assert!(registry.is_executable("b"));
    assert!(!registry.is_executable("a.x"));
    assert!(!registry.is_executable("missing"));
    assert!(registry.unregister("b").is_some());
    assert!(registry.unregister("b").is_none());
    assert!(registry.get("b").is_none());
}

#[test]
fn capabilities_feed_the_approval_traits() {
    use flemma_approval::ToolTraits as _;
    let registry = ToolRegistry::new();
    registry.register(named(
        ToolDefinition::builder("sh", "shell")
            .unwrap()
            .capability(Capability::AutoApprovesIfSandboxed),
    ));
    registry.register(tool("calc"));
    assert!(registry.auto_approves_if_sandboxed(&"sh".parse().unwrap()));
    assert!(!registry.auto_approves_if_sandboxed(&"calc".parse().unwrap()));
    assert!(!registry.auto_approves_if_sandboxed(&"nope".parse().unwrap()));
}

#[test]
fn the_tool_set_is_every_enabled_tool_unless_the_conversation_names_its_own() {
    let registry = ToolRegistry::new();
    for name in ["read", "bash", "write"] {
        registry.register(tool(name));
    }
    registry.register(named(
        ToolDefinition::builder("secret", "off by default")
            .unwrap()
            .enabled(false),
    ));
    registry.register(named(
        ToolDefinition::builder("gated", "on when max_concurrent is 1")
            .unwrap()
            .enabled_when(|options| options.tools.max_concurrent == 1),
    ));
    let config = Config::new();
    let options = config.options_with_tools(&registry.names()).unwrap();
    assert_eq!(names(&registry, &options), ["bash", "read", "write"]);

    let mut config = Config::new();
    config
        .set(Layer::Runtime, "tools.max_concurrent", json!(1))
        .unwrap();
    let options = config.options_with_tools(&registry.names()).unwrap();
    assert_eq!(
        names(&registry, &options),
        ["bash", "gated", "read", "write"]
    );

    // A frontmatter list offers exactly what it names, disabled tools included; unknown
    // names are not offered.
    let mut config = Config::new();
    config
        .set(
            Layer::Frontmatter,
            "tools",
            json!(["write", "secret", "nope"]),
        )
        .unwrap();
    let options = config.options_with_tools(&registry.names()).unwrap();
    assert_eq!(names(&registry, &options), ["secret", "write"]);
    let specs = registry.specs_for_prompt(&options);
    assert_eq!(specs.len(), 2);
    assert_eq!(specs[0].name, "secret");
}

struct Source {
    name: &'static str,
    delay: Duration,
    outcome: Outcome,
    timeout: Option<Duration>,
}

#[derive(Clone, Copy)]
enum Outcome {
    Ok,
    Fail,
    Panic,
    DoneEarly,
}

#[async_trait::async_trait]
impl ToolSource for Source {
    fn name(&self) -> &str {
        self.name
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    async fn resolve(&self, registrar: Registrar) -> Result<(), BoxError> {
        if let Outcome::DoneEarly = self.outcome {
            registrar.done(None);
            registrar.done(Some("ignored: done is idempotent".into()));
        }
        tokio::time::sleep(self.delay).await;
        registrar.register(tool(&format!("{}.tool", self.name)));
        match self.outcome {
            Outcome::Ok | Outcome::DoneEarly => Ok(()),
            Outcome::Fail => Err("server refused".into()),
            Outcome::Panic => panic!("source bug"),
        }
    }
}

fn source(name: &'static str, delay_ms: u64, outcome: Outcome) -> Source {
    Source {
        name,
        delay: Duration::from_millis(delay_ms),
        outcome,
        timeout: None,
    }
}

#[tokio::test]
async fn sources_gate_readiness_and_report_failures() {
    let registry = ToolRegistry::new();
    assert!(registry.is_ready());
    registry
        .add_source(source("ok", 20, Outcome::Ok), Duration::from_secs(5))
        .unwrap();
    registry
        .add_source(source("bad", 10, Outcome::Fail), Duration::from_secs(5))
        .unwrap();
    registry
        .add_source(source("boom", 10, Outcome::Panic), Duration::from_secs(5))
        .unwrap();
    assert!(!registry.is_ready());
    registry.ready().await;
    assert!(registry.is_ready());
    assert_eq!(registry.names(), ["bad.tool", "boom.tool", "ok.tool"]);
    let mut warnings: Vec<String> = registry
        .take_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "Async tool source failed: server refused",
            "Async tool source failed: source bug"
        ]
    );
}

#[tokio::test]
async fn a_slow_source_times_out_and_an_early_done_counts_once() {
    let registry = ToolRegistry::new();
    let mut slow = source("slow", 5_000, Outcome::Ok);
    slow.timeout = Some(Duration::from_secs(1));
    registry.add_source(slow, Duration::from_secs(30)).unwrap();
    registry
        .add_source(
            source("early", 3_000, Outcome::DoneEarly),
            Duration::from_secs(30),
        )
        .unwrap();
    let started = std::time::Instant::now();
    registry.ready().await;
    // The early source is done at once, the slow one after its own 1 s timeout.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        registry.take_warnings(),
        [RegistryWarning::SourceFailed {
            source: "slow".into(),
            error: "Timed out after 1s".into()
        }]
    );
    // The timed-out source was stopped: it never registers.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!registry.contains("slow.tool"));
}

#[tokio::test]
async fn clear_forgets_running_sources() {
    let registry = ToolRegistry::new();
    registry
        .add_source(source("late", 100, Outcome::Ok), Duration::from_secs(5))
        .unwrap();
    registry.register(tool("kept_until_clear"));
    registry.clear();
    assert!(registry.is_ready());
    assert!(registry.names().is_empty());
    // A new source after the clear counts; the old one's completion does not.
    registry
        .add_source(source("fresh", 300, Outcome::Ok), Duration::from_secs(5))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!registry.is_ready(), "the old source's done must not count");
    assert!(
        !registry.contains("late.tool"),
        "old generation registrations are dropped"
    );
    registry.ready().await;
    assert_eq!(registry.names(), ["fresh.tool"]);
}

#[test]
fn a_source_needs_a_runtime() {
    let registry = ToolRegistry::new();
    let err = registry
        .add_source(source("x", 0, Outcome::Ok), Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(err.to_string(), "tool source 'x' needs a tokio runtime");
}

struct Noticing;

#[async_trait::async_trait]
impl ToolSource for Noticing {
    fn name(&self) -> &'static str {
        "noticing"
    }

    async fn resolve(&self, registrar: Registrar) -> Result<(), BoxError> {
        registrar.warn("tool 'a b' registered as 'noticing.a_b'");
        Ok(())
    }
}

#[tokio::test]
async fn a_source_reports_what_it_noticed_under_its_name() {
    let registry = ToolRegistry::new();
    registry
        .add_source(Noticing, Duration::from_secs(5))
        .unwrap();
    registry.ready().await;
    let warnings = registry.take_warnings();
    assert_eq!(
        warnings,
        [RegistryWarning::Source {
            source: "noticing".into(),
            message: "tool 'a b' registered as 'noticing.a_b'".into(),
        }]
    );
    assert_eq!(
        warnings[0].to_string(),
        "noticing: tool 'a b' registered as 'noticing.a_b'"
    );
}

/// A source that registers `first` and hands its registrar out, to replace its tools later.
struct Keeper {
    first: Vec<&'static str>,
    keep: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<Registrar>>>,
}

#[async_trait::async_trait]
impl ToolSource for Keeper {
    fn name(&self) -> &'static str {
        "keeper"
    }

    async fn resolve(&self, registrar: Registrar) -> Result<(), BoxError> {
        let tools: Vec<std::sync::Arc<dyn flemma_core::Tool>> = self
            .first
            .iter()
            .map(|name| std::sync::Arc::new(tool(name)) as _)
            .collect();
        assert!(registrar.replace(tools));
        if let Some(keep) = self.keep.lock().unwrap().take() {
            let _ = keep.send(registrar);
        }
        Ok(())
    }
}

async fn keeper(registry: &ToolRegistry, first: Vec<&'static str>) -> Registrar {
    let (keep, kept) = tokio::sync::oneshot::channel();
    let source = Keeper {
        first,
        keep: std::sync::Mutex::new(Some(keep)),
    };
    registry.add_source(source, Duration::from_secs(5)).unwrap();
    registry.ready().await;
    kept.await.unwrap()
}

fn arcs(names: &[&str]) -> Vec<std::sync::Arc<dyn flemma_core::Tool>> {
    names
        .iter()
        .map(|name| std::sync::Arc::new(tool(name)) as _)
        .collect()
}

#[tokio::test]
async fn a_source_replaces_only_its_own_tools() {
    let registry = ToolRegistry::new();
    registry.register(tool("host"));
    let one = keeper(&registry, vec!["s.a", "s.b"]).await;
    let other = keeper(&registry, vec!["t.a"]).await;
    assert_eq!(registry.names(), ["host", "s.a", "s.b", "t.a"]);
    // `s.b` gone, `s.a` changed, `s.c` new; the host's and the other source's tools stay.
    let before = registry.get("s.a").unwrap();
    assert!(one.replace(arcs(&["s.a", "s.c"])));
    assert_eq!(registry.names(), ["host", "s.a", "s.c", "t.a"]);
    assert!(!std::sync::Arc::ptr_eq(
        &before,
        &registry.get("s.a").unwrap()
    ));
    assert!(registry.take_warnings().is_empty());
    // A tool of the old set unregistered and registered again by the host is not removed.
    registry.unregister("s.c");
    registry.register(tool("s.c"));
    assert!(one.replace(arcs(&[])));
    assert_eq!(registry.names(), ["host", "s.c", "t.a"]);
    // Taking a name registered otherwise is a redefinition.
    assert!(other.replace(arcs(&["t.a", "host"])));
    assert_eq!(
        registry.take_warnings(),
        [RegistryWarning::Redefined("host".parse().unwrap())]
    );
    // After `clear`, a registrar of the earlier generation changes nothing.
    registry.clear();
    assert!(!other.replace(arcs(&["t.z"])));
    assert!(!other.register(tool("t.y")));
    assert!(registry.names().is_empty());
}

#[tokio::test]
async fn a_registrar_does_not_keep_the_registry_alive() {
    let registry = ToolRegistry::new();
    let registrar = keeper(&registry, vec!["s.a"]).await;
    let tool_of = std::sync::Arc::downgrade(&registry.get("s.a").unwrap());
    drop(registry);
    // The registry and its tools are gone although the registrar lives.
    assert!(tool_of.upgrade().is_none());
    assert!(!registrar.replace(arcs(&["s.b"])));
    registrar.warn("nobody listens");
    registrar.done(None);
}
