//! Servers that fail: a command that does not exist, a process that never answers
//! `initialize`, a call that outlives `tool_timeout`, a server killed during a call or between
//! calls (and started again with backoff).

use std::time::{Duration, Instant};

use flemma_core::ToolOutput;
use flemma_mcp::{McpServerConfig, McpServerState};
use flemma_runtime::RegistryWarning;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::scratch::Scratch;
use crate::support::{call, everything, python_server, registry_with};

#[tokio::test]
async fn a_server_that_cannot_start_is_a_warning_naming_it_and_the_rest_goes_on() {
    let broken = McpServerConfig::stdio("broken", "/nonexistent/flemma-mcp-test-server").unwrap();
    let (registry, handles) = registry_with(vec![broken, everything()]).await;
    assert!(registry.contains("everything.echo"));
    assert!(
        !registry
            .names()
            .iter()
            .any(|n| n.as_str().starts_with("broken."))
    );
    let warnings = registry.take_warnings();
    let [RegistryWarning::SourceFailed { source, error }] = warnings.as_slice() else {
        panic!("one source failure expected: {warnings:?}");
    };
    assert_eq!(source, "broken");
    assert_eq!(
        error,
        "MCP server 'broken': could not start `/nonexistent/flemma-mcp-test-server`: No such file or directory (os error 2)"
    );
    assert_eq!(
        warnings[0].to_string(),
        format!("Async tool source failed: {error}")
    );
    assert_eq!(handles[0].state(), McpServerState::Failed(error.clone()));
}

#[tokio::test]
async fn a_process_that_never_answers_initialize_times_out_by_its_startup_timeout() {
    // `sleep` reads nothing and writes nothing: the handshake never completes.
    let silent = McpServerConfig::stdio("silent", "sleep")
        .unwrap()
        .with_args(["60"])
        .with_startup_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let (registry, handles) = registry_with(vec![silent]).await;
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    let warnings: Vec<String> = registry
        .take_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            "Async tool source failed: MCP server 'silent': did not start and list its tools within 0.5s"
        ]
    );
    assert!(registry.names().is_empty());
    // The process is ended with the connection it never completed.
    let pid = handles[0].pid().unwrap();
    let gone = async {
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), gone)
        .await
        .unwrap_or_else(|_| panic!("the server process {pid} still runs"));
}

#[tokio::test]
async fn a_call_longer_than_tool_timeout_ends_with_an_error_result() {
    let server = everything().with_tool_timeout(Duration::from_millis(800));
    let (registry, _) = registry_with(vec![server]).await;
    let started = Instant::now();
    let out = call(
        &registry,
        "everything.trigger-long-running-operation",
        json!({"duration": 20, "steps": 4}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        out,
        ToolOutput::error(
            "MCP tool 'trigger-long-running-operation' of server 'everything' timed out after 0.8s"
        )
    );
    // The connection still serves the next call.
    assert_eq!(
        call(&registry, "everything.echo", json!({"message": "after"})).await,
        ToolOutput::text("Echo: after")
    );
}

#[tokio::test]
async fn a_server_killed_during_a_call_gives_an_error_result_and_the_next_call_starts_it_again() {
    let (registry, handles) = registry_with(vec![everything()]).await;
    let pid = handles[0].pid().unwrap();
    let pending = {
        let registry = registry.clone();
        tokio::spawn(async move {
            call(
                &registry,
                "everything.trigger-long-running-operation",
                json!({"duration": 20, "steps": 4}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // This test's own server, by its process id.
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = tokio::time::timeout(Duration::from_secs(10), pending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        ToolOutput::error(
            "MCP server 'everything' closed the connection during the call (did it exit?)"
        )
    );
    let lost_at = Instant::now();
    let McpServerState::Lost {
        error,
        failures,
        backoff,
    } = handles[0].state()
    else {
        panic!("lost expected: {:?}", handles[0].state());
    };
    assert_eq!(
        error,
        "MCP server 'everything' closed the connection during a call"
    );
    assert_eq!((failures, backoff), (1, Duration::from_millis(500)));
    // The next call starts a fresh process once the backoff has passed, and works.
    assert_eq!(
        call(&registry, "everything.echo", json!({"message": "hi"})).await,
        ToolOutput::text("Echo: hi")
    );
    assert!(lost_at.elapsed() >= Duration::from_millis(450));
    let fresh = handles[0].pid().unwrap();
    assert_ne!(fresh, pid);
    assert!(matches!(handles[0].state(), McpServerState::Running { .. }));
    assert_eq!(registry.names().len(), 13);
    assert!(registry.take_warnings().is_empty());
}

#[tokio::test]
async fn a_server_killed_between_calls_is_started_again_by_the_next_call() {
    let (registry, handles) = registry_with(vec![everything()]).await;
    let pid = handles[0].pid().unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Kill it a second time once restarted: the backoff doubles.
    let started = Instant::now();
    loop {
        let out = call(&registry, "everything.echo", json!({"message": "1"})).await;
        if out == ToolOutput::text("Echo: 1") {
            break;
        }
        // The call may find the connection closing only as it sends.
        assert!(started.elapsed() < Duration::from_secs(10), "{out:?}");
    }
    let second = handles[0].pid().unwrap();
    assert_ne!(second, pid);
    let pending = {
        let registry = registry.clone();
        tokio::spawn(async move {
            call(
                &registry,
                "everything.trigger-long-running-operation",
                json!({"duration": 20, "steps": 4}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::process::Command::new("kill")
        .args(["-KILL", &second.to_string()])
        .status()
        .unwrap();
    let out = pending.await.unwrap();
    assert!(!out.is_success());
    // A call got an answer in between (the echo), so the count started again.
    assert!(
        matches!(handles[0].state(), McpServerState::Lost { failures: 1, .. }),
        "{:?}",
        handles[0].state()
    );
    assert_eq!(
        call(&registry, "everything.echo", json!({"message": "2"})).await,
        ToolOutput::text("Echo: 2")
    );
    assert_ne!(handles[0].pid().unwrap(), second);
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_is_a_warning_naming_it_and_the_rest_goes_on() {
    // `silent.py` reads the `initialize` request and never answers.
    let silent =
        python_server("silent", "silent", &[]).with_startup_timeout(Duration::from_millis(1500));
    let started = Instant::now();
    let (registry, handles) = registry_with(vec![silent, everything()]).await;
    assert!(started.elapsed() < Duration::from_secs(15));
    let warnings: Vec<String> = registry
        .take_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            "Async tool source failed: MCP server 'silent': did not start and list its tools within 1.5s"
        ]
    );
    assert_eq!(
        handles[0].state(),
        McpServerState::Failed(
            "MCP server 'silent': did not start and list its tools within 1.5s".to_owned()
        )
    );
    assert!(matches!(handles[1].state(), McpServerState::Running { .. }));
    assert!(registry.contains("everything.echo"));
    assert!(
        registry
            .names()
            .iter()
            .all(|n| !n.as_str().starts_with("silent."))
    );
    assert_eq!(
        call(&registry, "everything.echo", json!({"message": "on"})).await,
        ToolOutput::text("Echo: on")
    );
}

#[tokio::test]
async fn a_restart_that_fails_is_an_error_result_and_backs_off_until_the_server_can_start() {
    // The server runs through a script that can be taken away and put back.
    let dir = Scratch::new(format!("flemma-mcp-restart-{}", std::process::id()));
    let script = dir.join("server.sh");
    let body = format!(
        "#!/bin/sh\nexec {:?} stdio\n",
        crate::support::everything_bin().display().to_string()
    );
    let put_back = || {
        std::fs::write(&script, &body).unwrap();
        std::process::Command::new("chmod")
            .args(["+x", script.to_str().unwrap()])
            .status()
            .unwrap();
    };
    put_back();
    let flaky = McpServerConfig::stdio("flaky", script.to_string_lossy())
        .unwrap()
        .with_startup_timeout(Duration::from_secs(30));
    let (registry, handles) = registry_with(vec![flaky]).await;
    let pid = handles[0].pid().unwrap();

    // Killed, and the command gone: the next call cannot start it again.
    std::fs::remove_file(&script).unwrap();
    std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    let started = Instant::now();
    let failed = loop {
        let out = call(&registry, "flaky.echo", json!({"message": "x"})).await;
        if let ToolOutput::Failure { error, .. } = &out
            && error.contains("could not be started again")
        {
            break error.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{out:?}");
    };
    assert!(
        failed.starts_with("MCP server 'flaky' was lost"),
        "{failed}"
    );
    // The loss and the failed restart: the next try waits 1 s.
    assert!(
        matches!(
            handles[0].state(),
            McpServerState::Lost { failures: 2, backoff, .. } if backoff == Duration::from_secs(1)
        ),
        "{:?}",
        handles[0].state()
    );

    // Back again: the next call waits out the backoff, starts it and is answered.
    put_back();
    let before = Instant::now();
    assert_eq!(
        call(&registry, "flaky.echo", json!({"message": "back"})).await,
        ToolOutput::text("Echo: back")
    );
    assert!(before.elapsed() < Duration::from_secs(30));
    assert!(matches!(handles[0].state(), McpServerState::Running { .. }));
    assert_ne!(handles[0].pid().unwrap(), pid);
}
