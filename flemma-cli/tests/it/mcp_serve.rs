//! `flemma mcp serve` driven by a real MCP client: the Python SDK (`mcp`, pinned in
//! `tests/mcp/requirements.txt`, installed into `tests/mcp/.venv` by `scripts/test`) running
//! `tests/mcp/py/serve_client.py`, over stdio and over streamable HTTP. The sandbox is the real
//! bubblewrap (`scripts/test` installs it), as in `cycle_runs_bash_in_the_sandbox`.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::scratch::Scratch;
use crate::{flemma, text};

/// The repository's tests/mcp directory.
fn mcp_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp")
}

/// The venv's python, with the pinned SDK.
fn python() -> PathBuf {
    let python = mcp_dir().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test, which installs tests/mcp/requirements.txt",
        python.display()
    );
    python
}

/// A directory of its own for each test, with `notes.txt`, `src/a.txt` and the conversation
/// `chat.chat` holding `chat`.
/// The guard stands for the conversation (its path canonical); it removes the directory.
fn workspace(test: &str, chat: &str) -> Scratch {
    let dir = Scratch::canonical(format!(
        "flemma-cli-test-{}-mcp-serve-{test}",
        std::process::id()
    ));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello world\nsecond line\n").unwrap();
    std::fs::write(dir.join("src/a.txt"), "hello from src\n").unwrap();
    dir.file("chat.chat", chat)
}

/// Where the client reaches the server.
#[derive(Debug, Clone, Copy)]
enum Transport {
    Stdio,
    Http,
}

/// A `flemma mcp serve --http` child, killed when dropped (it serves until a signal).
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(args: &[&str], dir: &Path) -> Self {
        let mut child = crate::flemma_command()
            .args(["mcp", "serve"])
            .args(args)
            .args(["--http", "127.0.0.1:0"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stderr.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("flemma: serving MCP on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        assert!(url.ends_with("/mcp"), "{url}");
        Self { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the client against `flemma mcp serve ARGS` (in `dir`) and returns its report:
/// `{"server", "tools": [...], "results": [...]}`.
fn client(transport: Transport, args: &[&str], dir: &Path, calls: &Value) -> Value {
    client_with_env(transport, args, dir, calls, &[])
}

/// [`client`] with `env` in the client's environment (a stdio server inherits it).
fn client_with_env(
    transport: Transport,
    args: &[&str],
    dir: &Path,
    calls: &Value,
    env: &[(&str, &str)],
) -> Value {
    let script = mcp_dir().join("py/serve_client.py");
    let mut command = Command::new(python());
    command
        .arg(script)
        .current_dir(dir)
        .env("XDG_STATE_HOME", crate::state_home())
        .envs(env.iter().copied());
    let _server = match transport {
        Transport::Stdio => {
            command
                .arg("stdio")
                .arg(env!("CARGO_BIN_EXE_flemma"))
                .args(["mcp", "serve"])
                .args(args);
            None
        }
        Transport::Http => {
            let server = HttpServer::start(args, dir);
            command.arg("http").arg(&server.url);
            Some(server)
        }
    };
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(calls.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the client failed ({transport:?}): {}",
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", text(&out.stdout), text(&out.stderr)))
}

/// The results of a report, as `(isError, text)` pairs (a protocol error as `(true, message)`
/// prefixed with `protocol: `).
fn results(report: &Value) -> Vec<(bool, String)> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| match r.get("protocolError") {
            Some(message) => (true, format!("protocol: {}", message.as_str().unwrap())),
            None => (
                r["isError"].as_bool().unwrap(),
                r["text"].as_str().unwrap().to_owned(),
            ),
        })
        .collect()
}

/// Lists the tools (annotations from the built-ins' traits, schemas as the model sees them
/// without `flemma.background`), then calls `read`, `grep`, a `bash` the sandbox resolver
/// approves and bubblewrap confines, and a tool the conversation does not offer.
fn lists_and_calls_read_grep_and_sandboxed_bash(transport: Transport, test: &str) {
    let file = workspace(test, "@You:\nHello.\n");
    let dir = file.parent().unwrap();
    let before = std::fs::read_to_string(&file).unwrap();
    let calls = json!([
        {"name": "read", "arguments": {"path": "notes.txt"}},
        {"name": "grep", "arguments": {"pattern": "hello", "path": "src"}},
        {"name": "bash", "arguments": {
            "command": "echo ok > inside.txt && pwd && echo no > /usr/flemma-mcp-serve-test.txt",
            "label": "writing",
        }},
        {"name": "nope", "arguments": {}},
    ]);
    let report = client(transport, &[file.to_str().unwrap()], dir, &calls);
    assert_eq!(report["server"], "flemma");
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for name in ["bash", "edit", "find", "grep", "ls", "read", "write"] {
        assert!(names.contains(&name), "{name} not served: {names:?}");
    }
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap();
    for name in ["read", "ls", "grep", "find"] {
        assert_eq!(
            tool(name)["annotations"]["readOnlyHint"],
            true,
            "{name}: {}",
            tool(name)
        );
        assert_eq!(tool(name)["annotations"]["destructiveHint"], false);
    }
    for name in ["write", "edit", "bash"] {
        assert_eq!(tool(name)["annotations"]["readOnlyHint"], false, "{name}");
        assert_eq!(tool(name)["annotations"]["destructiveHint"], true, "{name}");
    }
    assert_eq!(tool("bash")["annotations"]["openWorldHint"], true);
    let bash_schema = &tool("bash")["inputSchema"];
    assert_eq!(bash_schema["properties"]["command"]["type"], "string");
    assert!(
        bash_schema["properties"].get("flemma.background").is_none(),
        "{bash_schema}"
    );
    assert!(bash_schema["properties"].get("flemma.save_to").is_some());

    let results = results(&report);
    assert_eq!(results[0], (false, "hello world\nsecond line".to_owned()));
    assert_eq!(
        results[1],
        (false, "src/a.txt:1:hello from src\n\n[1 match]".to_owned())
    );
    // Approved by the sandbox resolver (no rule names bash) and run under bubblewrap: the
    // conversation's directory is writable and the working directory, /usr is not.
    let (bash_failed, bash) = &results[2];
    assert!(
        *bash_failed && bash.contains("Read-only file system"),
        "bubblewrap must be installed and able to create namespaces: {bash}"
    );
    assert!(bash.starts_with(&format!("{}\n", dir.display())), "{bash}");
    assert_eq!(
        std::fs::read_to_string(dir.join("inside.txt")).unwrap(),
        "ok\n"
    );
    assert!(!Path::new("/usr/flemma-mcp-serve-test.txt").exists());
    assert!(
        results[3].1.starts_with("protocol: unknown tool `nope`"),
        "{:?}",
        results[3]
    );
    // The served calls have a conversation of their own: the file is never written.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
}

#[test]
fn stdio_lists_tools_and_calls_read_grep_and_sandboxed_bash() {
    lists_and_calls_read_grep_and_sandboxed_bash(Transport::Stdio, "stdio-calls");
}

#[test]
fn http_lists_tools_and_calls_read_grep_and_sandboxed_bash() {
    lists_and_calls_read_grep_and_sandboxed_bash(Transport::Http, "http-calls");
}

/// The frontmatter's policy: `grep` approved, `rm -rf` denied, any other bash pending (a Lua
/// function takes bash from the sandbox resolver).
#[cfg(feature = "lua")]
const POLICY: &str = "```lua
flemma.opt.tools.auto_approve = function(tool_name, input, ctx)
  if tool_name == \"grep\" then return true end
  if tool_name == \"bash\" and input.command:match(\"rm %-rf\") then return \"deny\" end
  return false
end
```
@You:
Clean up.
";

/// Calls the policy approves, denies and leaves pending, served with `approve`.
#[cfg(feature = "lua")]
fn policy_calls(
    transport: Transport,
    test: &str,
    approve: &[&str],
) -> (Scratch, Vec<(bool, String)>) {
    let file = workspace(test, POLICY);
    let dir = file.parent().unwrap();
    let calls = json!([
        {"name": "grep", "arguments": {"pattern": "hello", "path": "src"}},
        {"name": "bash", "arguments": {"command": "rm -rf src", "label": "cleaning"}},
        {"name": "bash", "arguments": {"command": "ls src", "label": "listing"}},
    ]);
    let args: Vec<&str> = [file.to_str().unwrap()]
        .into_iter()
        .chain(approve.iter().copied())
        .collect();
    let report = client(transport, &args, dir, &calls);
    let results = results(&report);
    (file, results)
}

/// Without `--approve`, a pending call is refused with a clear error result, and a denied one
/// is an error result with the chain's reason; neither runs.
#[cfg(feature = "lua")]
fn refuses_pending_and_denies(transport: Transport, test: &str) {
    let (file, results) = policy_calls(transport, test, &[]);
    let dir = file.parent().unwrap();
    assert_eq!(
        results[0],
        (false, "src/a.txt:1:hello from src\n\n[1 match]".to_owned())
    );
    let (denied_is_error, denied) = &results[1];
    assert!(*denied_is_error, "{denied}");
    assert_eq!(
        denied,
        "The tool was denied by a policy.\nReason: denied by the resolver \
         `urn:flemma:approval:config`"
    );
    let (pending_is_error, pending) = &results[2];
    assert!(*pending_is_error, "{pending}");
    assert!(
        pending.starts_with("`bash` needs approval: ") && pending.contains("--approve all"),
        "{pending}"
    );
    assert!(dir.join("src/a.txt").exists(), "the denied call ran");
}

/// With `--approve all`, the pending call runs (and its output is the result); the denied
/// call is still denied: the mode approves what the chain leaves to a human, nothing else.
#[cfg(feature = "lua")]
fn approve_all_runs_the_pending_call(transport: Transport, test: &str) {
    let (file, results) = policy_calls(transport, test, &["--approve", "all"]);
    let dir = file.parent().unwrap();
    assert!(!results[0].0, "{:?}", results[0]);
    assert!(results[1].0, "{:?}", results[1]);
    assert!(results[1].1.starts_with("The tool was denied by a policy."));
    assert_eq!(results[2], (false, "a.txt".to_owned()));
    assert!(dir.join("src/a.txt").exists(), "the denied call ran");
}

#[cfg(feature = "lua")]
#[test]
fn stdio_refuses_a_pending_call_and_gives_a_denied_call_the_chains_reason() {
    refuses_pending_and_denies(Transport::Stdio, "stdio-pending");
}

#[cfg(feature = "lua")]
#[test]
fn http_refuses_a_pending_call_and_gives_a_denied_call_the_chains_reason() {
    refuses_pending_and_denies(Transport::Http, "http-pending");
}

#[cfg(feature = "lua")]
#[test]
fn stdio_with_approve_all_runs_a_pending_call() {
    approve_all_runs_the_pending_call(Transport::Stdio, "stdio-approve");
}

#[cfg(feature = "lua")]
#[test]
fn http_with_approve_all_runs_a_pending_call() {
    approve_all_runs_the_pending_call(Transport::Http, "http-approve");
}

/// `--http` binds loopback addresses only, unless `--allow-remote` says otherwise.
#[test]
fn http_refuses_a_non_loopback_address() {
    let out = flemma(&["mcp", "serve", "--http", "0.0.0.0:0"], None);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr)
            .starts_with("flemma: refusing to serve on 0.0.0.0:0: not a loopback address"),
        "{}",
        text(&out.stderr)
    );
    let out = flemma(&["mcp", "serve", "--allow-remote"], None);
    assert_eq!(out.status.code(), Some(2), "--allow-remote needs --http");
}

/// One HTTP/1.1 request to the server of `url` (`Connection: close`), with `headers`:
/// the status and the body (the JSON-RPC answer of an event stream, as sent).
fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    use std::fmt::Write as _;
    use std::io::Read as _;
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix(flemma::mcp::serve::ENDPOINT))
        .unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    // A guard against a hung test, not a timing assertion.
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let body = body.to_string();
    let mut request = format!(
        "POST {} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n",
        flemma::mcp::serve::ENDPOINT,
        body.len()
    );
    for (name, value) in headers {
        let _ = write!(request, "{name}: {value}\r\n");
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let response = text(&response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {response:?}"));
    (status, response)
}

/// The `Mcp-Session-Id` of a response.
fn session_id(response: &str) -> String {
    response
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {response:?}"))
}

/// `initialize`, with an `Origin` when given.
fn initialize(url: &str, origin: Option<&str>) -> (u16, String) {
    let headers: Vec<(&str, &str)> = origin.map(|o| ("Origin", o)).into_iter().collect();
    post(
        url,
        &headers,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26",
            "capabilities": {},
            "clientInfo": {"name": "origin-test", "version": "0"},
        }}),
    )
}

/// A session opened without an `Origin` (as a non-browser client opens it).
fn open_session(url: &str) -> String {
    let (status, response) = initialize(url, None);
    assert_eq!(status, 200, "{response}");
    let session = session_id(&response);
    let (status, response) = post(
        url,
        &[("Mcp-Session-Id", &session)],
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(status, 202, "{response}");
    session
}

/// `tools/call` of `write` to `path` in `session`, with an `Origin` when given.
fn write_call(url: &str, session: &str, origin: Option<&str>, path: &str) -> (u16, String) {
    let mut headers = vec![("Mcp-Session-Id", session)];
    headers.extend(origin.map(|o| ("Origin", o)));
    post(
        url,
        &headers,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "write",
            "arguments": {"path": path, "content": "written\n"},
        }}),
    )
}

/// DNS rebinding (MCP streamable HTTP, Security Warning): a page of `evil.example` whose name
/// now points at 127.0.0.1 sends requests with its own `Origin`. They are refused with 403,
/// before anything runs: the canary the call would write is never written, and no session
/// opens for it.
#[test]
fn http_refuses_a_foreign_origin_and_runs_nothing() {
    let file = workspace("http-origin-evil", "@You:\nHello.\n");
    let dir = file.parent().unwrap();
    let server = HttpServer::start(&[file.to_str().unwrap(), "--approve", "all"], dir);
    let evil = Some("http://evil.example");

    let (status, response) = initialize(&server.url, evil);
    assert_eq!(status, 403, "{response}");
    assert!(
        !response.to_ascii_lowercase().contains("mcp-session-id"),
        "{response}"
    );

    let session = open_session(&server.url);
    let (status, response) = write_call(&server.url, &session, evil, "canary.txt");
    assert_eq!(status, 403, "{response}");
    // Another port of loopback is another origin (another local site) too.
    let (status, response) = write_call(
        &server.url,
        &session,
        Some("http://127.0.0.1:1"),
        "canary.txt",
    );
    assert_eq!(status, 403, "{response}");
    assert!(!dir.join("canary.txt").exists(), "a refused call ran");
    assert!(
        !dir.join(".flemma/chat.chat.mcp-serve").exists(),
        "a refused call reached the executor"
    );
}

/// Requests from the server's own loopback origins (`127.0.0.1`, `localhost`, `[::1]` at its
/// port), and requests without `Origin` (every non-browser client), are served.
#[test]
fn http_serves_loopback_origins_and_requests_without_origin() {
    let file = workspace("http-origin-loopback", "@You:\nHello.\n");
    let dir = file.parent().unwrap();
    let server = HttpServer::start(&[file.to_str().unwrap(), "--approve", "all"], dir);
    let port = server
        .url
        .trim_end_matches(flemma::mcp::serve::ENDPOINT)
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let origins = [
        Some(format!("http://127.0.0.1:{port}")),
        Some(format!("http://localhost:{port}")),
        Some(format!("http://[::1]:{port}")),
        None,
    ];
    for (n, origin) in origins.iter().enumerate() {
        let (status, response) = initialize(&server.url, origin.as_deref());
        assert_eq!(status, 200, "{origin:?}: {response}");
        let session = open_session(&server.url);
        let canary = format!("canary-{n}.txt");
        let (status, response) = write_call(&server.url, &session, origin.as_deref(), &canary);
        assert_eq!(status, 200, "{origin:?}: {response}");
        assert!(
            response.contains("\"isError\":false"),
            "{origin:?}: {response}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(&canary)).unwrap(),
            "written\n",
            "{origin:?}"
        );
    }
}

/// `flemma mcp serve` built with the `otel` feature exports an `execute_tool` span for each
/// call it serves.
#[cfg(feature = "otel")]
#[test]
fn stdio_exports_an_execute_tool_span_per_call() {
    let file = workspace("otel", "@You:\nHello.\n");
    let dir = file.parent().unwrap();
    let (endpoint, requests) = crate::otel::receiver();
    let calls = json!([{"name": "read", "arguments": {"path": "notes.txt"}}]);
    let report = client_with_env(
        Transport::Stdio,
        &[file.to_str().unwrap()],
        dir,
        &calls,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    assert_eq!(results(&report)[0].0, false, "{report}");
    let requests: Vec<_> = requests.try_iter().collect();
    let (spans, services) = crate::otel::decode(&requests, &[]);
    assert!(services.iter().all(|name| name == "flemma"), "{services:?}");
    let read: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "execute_tool read")
        .collect();
    assert_eq!(
        read.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert_eq!(crate::otel::string(read[0], "gen_ai.tool.name"), "read");
    // The served calls' conversation, named after the file (never written).
    assert_eq!(
        crate::otel::string(read[0], "flemma.chat.path"),
        format!("{}.mcp-serve", file.display())
    );
    assert!(!crate::otel::string(read[0], "gen_ai.conversation.id").is_empty());
}
