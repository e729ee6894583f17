//! MCP calls and discovery (issue 20): `cargo bench -p flemma-mcp --bench mcp`.
//!
//! Servers: server-everything over stdio (`tests/mcp/node_modules`, `npm ci` in `tests/mcp`)
//! and `tests/mcp/hundred-tools.mjs`, a stdio server of 100 tools on the pinned
//! `@modelcontextprotocol/sdk`. Everything runs on one current-thread tokio runtime.
//!
//! - `mcp/call_flemma`: one call of server-everything's `echo` through flemma: the registry's
//!   lookup of `everything.echo`, [`McpTool`](flemma_mcp::McpTool)'s execute (timeout and
//!   cancel race, `tools/call`, the result mapped to a `ToolOutput`), with the server started
//!   by [`flemma_mcp::add_servers`].
//! - `mcp/call_rmcp`: the same call on a second server-everything process, made with rmcp
//!   directly (`Peer::call_tool`), nothing mapped. Target: `call_flemma` ≤ 1.2 × `call_rmcp`.
//! - `mcp/discovery_100_full`: start `node hundred-tools.mjs`, initialize, list its 100 tools,
//!   register them (a fresh registry, `add_servers` then `ready`), then shut it down (the
//!   shutdown is outside the timing). Node's own start-up and the SDK's import are most of it.
//! - `mcp/discovery_100_listing`: on a connection already initialized (rmcp's handshake done
//!   once, outside the timing), `tools/list` of the 100 tools and their registration
//!   ([`McpServer::with_peer`](flemma_mcp::McpServer::with_peer) added to a fresh registry,
//!   then `ready`): flemma's share of discovery. Target: ≤ 50 ms.
//!
//! Before criterion's runs the bench times the two calls alternately
//! (`FLEMMA_BENCH_MCP_PAIRED` pairs, default 2000; 0 skips it) and prints their medians and
//! the ratio on stderr, which the shared machine's changing load disturbs less than
//! criterion's back-to-back windows.
#![allow(
    clippy::expect_used,
    clippy::print_stderr,
    missing_docs,
    reason = "a benchmark binary may abort on setup errors and reports on stderr"
)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use flemma_core::ExecutionContext;
use flemma_ids::{ToolName, ToolUseId};
use flemma_mcp::{McpServer, McpServerConfig};
use flemma_runtime::ToolRegistry;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::{Value, json};
use tokio::runtime::Runtime;

fn repo_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel)
}

fn everything_bin() -> PathBuf {
    let bin = repo_path("tests/mcp/node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run `npm ci` in tests/mcp",
        bin.display()
    );
    bin
}

fn hundred() -> McpServerConfig {
    McpServerConfig::stdio("h", "node")
        .expect("a server name")
        .with_args([repo_path("tests/mcp/hundred-tools.mjs").to_string_lossy()])
        .with_startup_timeout(Duration::from_secs(30))
}

/// A process started with rmcp directly, its stderr dropped.
async fn rmcp_client(program: &str, args: &[String]) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the server starts");
    ().serve(transport).await.expect("the handshake")
}

fn context() -> ExecutionContext {
    ExecutionContext::builder(
        ToolUseId::new("toolu_01").expect("an id"),
        ToolName::new("everything.echo").expect("a name"),
    )
    .build()
    .expect("a context")
}

/// The two ways of making one `echo` call.
struct Calls {
    registry: ToolRegistry,
    ctx: ExecutionContext,
    peer: Peer<RoleClient>,
    input: Value,
    /// The direct connection (dropping it ends the server).
    direct: RunningService<RoleClient, ()>,
    /// flemma's server.
    handles: Vec<flemma_mcp::McpServerHandle>,
}

impl Calls {
    async fn flemma(&self) {
        let tool = self.registry.get("everything.echo").expect("registered");
        let out = tool.execute(self.input.clone(), &self.ctx).await;
        assert!(out.is_success(), "{out:?}");
    }

    async fn rmcp(&self) {
        let Value::Object(arguments) = self.input.clone() else {
            unreachable!("an object")
        };
        let params = CallToolRequestParams::new("echo").with_arguments(arguments);
        let result = self.peer.call_tool(params).await.expect("the call");
        assert!(result.is_error != Some(true), "{result:?}");
    }
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn paired(rt: &Runtime, calls: &Calls) {
    let pairs: usize = std::env::var("FLEMMA_BENCH_MCP_PAIRED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    if pairs == 0 {
        return;
    }
    let (mut flemma, mut direct) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    rt.block_on(async {
        for _ in 0..pairs {
            let start = Instant::now();
            calls.flemma().await;
            flemma.push(start.elapsed());
            let start = Instant::now();
            calls.rmcp().await;
            direct.push(start.elapsed());
        }
    });
    let (f, d) = (median(&mut flemma), median(&mut direct));
    eprintln!(
        "mcp paired ({pairs} alternating pairs): call_flemma median {f:?}, call_rmcp median {d:?}, ratio {:.3}",
        f.as_secs_f64() / d.as_secs_f64()
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let everything = everything_bin().to_string_lossy().into_owned();

    let calls = rt.block_on(async {
        let registry = ToolRegistry::new();
        let server = McpServerConfig::stdio("everything", &everything)
            .expect("a server name")
            .with_args(["stdio"])
            .with_startup_timeout(Duration::from_secs(30));
        let handles = flemma_mcp::add_servers(&registry, [server]).expect("a runtime");
        registry.ready().await;
        assert!(registry.contains("everything.echo"));
        let direct = rmcp_client(&everything, &["stdio".to_owned()]).await;
        let peer = direct.peer().clone();
        Calls {
            registry,
            ctx: context(),
            peer,
            input: json!({"message": "hello from the bench"}),
            direct,
            handles,
        }
    });
    // Warm both paths.
    rt.block_on(async {
        for _ in 0..200 {
            calls.flemma().await;
            calls.rmcp().await;
        }
    });
    paired(&rt, &calls);

    let mut c = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    {
        let mut group = c.benchmark_group("mcp");
        group.bench_function("call_flemma", |b| b.iter(|| rt.block_on(calls.flemma())));
        group.bench_function("call_rmcp", |b| b.iter(|| rt.block_on(calls.rmcp())));
        group.finish();
    }

    discovery(&mut c, &rt);
    rt.block_on(async {
        for handle in &calls.handles {
            handle.shutdown().await;
        }
        let _ = calls.direct.cancel().await;
    });
    c.final_summary();
}

/// `mcp/discovery_100_full` and `mcp/discovery_100_listing`.
fn discovery(c: &mut Criterion, rt: &Runtime) {
    let mut group = c.benchmark_group("mcp");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("discovery_100_full", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let registry = ToolRegistry::new();
                    let start = Instant::now();
                    let handles =
                        flemma_mcp::add_servers(&registry, [hundred()]).expect("a runtime");
                    registry.ready().await;
                    total += start.elapsed();
                    assert_eq!(registry.names().len(), 100);
                    for handle in handles {
                        handle.shutdown().await;
                    }
                }
                total
            })
        });
    });

    let script = repo_path("tests/mcp/hundred-tools.mjs")
        .to_string_lossy()
        .into_owned();
    let connection = rt.block_on(rmcp_client("node", &[script]));
    let peer = connection.peer().clone();
    group.bench_function("discovery_100_listing", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let registry = ToolRegistry::new();
                    let start = Instant::now();
                    registry
                        .add_source(
                            McpServer::with_peer(hundred(), peer.clone()),
                            Duration::from_secs(30),
                        )
                        .expect("a runtime");
                    registry.ready().await;
                    total += start.elapsed();
                    assert_eq!(registry.names().len(), 100);
                }
                total
            })
        });
    });
    group.finish();
    rt.block_on(async {
        let _ = connection.cancel().await;
    });
}
