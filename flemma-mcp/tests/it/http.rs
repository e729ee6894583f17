//! The streamable HTTP transport against server-everything's `streamableHttp` mode, on
//! 127.0.0.1 and a port the system picks, configured as `[mcp.servers.NAME] url = …` with
//! `headers` that name environment variables.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use flemma_core::ToolOutput;
use flemma_mcp::McpServerState;
use flemma_runtime::RegistryWarning;
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::support::{call, everything_bin, registry_with};

/// What the loopback shim writes when the server listens.
const LISTENING: &str = "flemma-loopback: listening on 127.0.0.1:";

/// server-everything over streamable HTTP; killed when dropped, so it stops with the test
/// whatever the test does.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) port: u16,
    lines: mpsc::Receiver<String>,
}

impl HttpServer {
    /// Starts the server on 127.0.0.1 (`tests/mcp/loopback.cjs` pins the host and reports
    /// the port `PORT=0` got) and waits until it listens.
    pub(crate) fn start() -> Self {
        let shim = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/loopback.cjs");
        let mut child = Command::new("node")
            .arg("--require")
            .arg(&shim)
            .arg(everything_bin())
            .arg("streamableHttp")
            .env("PORT", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs server-everything");
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = mpsc::channel();
        // Reads stderr to the end (so the pipe never fills), handing on every line.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        let mut server = Self {
            child,
            port: 0,
            lines,
        };
        let line = server
            .wait_for(|line| line.starts_with(LISTENING))
            .expect("server-everything listens");
        server.port = line[LISTENING.len()..].trim().parse().unwrap();
        server
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The first stderr line (from now) that `matches`, within 30 s.
    pub(crate) fn wait_for(&mut self, matches: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if matches(&line) {
                return Some(line);
            }
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The servers of a `flemma.toml`.
fn servers(toml: &str) -> Vec<flemma_mcp::McpServerConfig> {
    let mut config = flemma_config::Config::new();
    config.load_toml_str(toml, "flemma.toml".as_ref()).unwrap();
    flemma_mcp::servers_of(&config).unwrap()
}

#[tokio::test]
async fn an_http_server_is_discovered_and_called_with_headers_from_the_environment() {
    let home = std::env::var("HOME").expect("HOME is set");
    let mut server = HttpServer::start();
    let toml = format!(
        "[mcp.servers.web]\nurl = \"{}\"\nheaders = {{ X-Flemma-Home = \"home=${{HOME}}\" }}\nstartup_timeout = 30\n",
        server.url()
    );
    let configs = servers(&toml);
    // The configuration keeps the reference, never the value.
    assert!(!format!("{configs:?}").contains(&format!("home={home}")));
    assert!(format!("{configs:?}").contains("home=${HOME}"));

    let (registry, handles) = registry_with(configs).await;
    assert!(registry.take_warnings().is_empty());
    assert!(registry.contains("web.echo"));
    assert!(registry.contains("web.get-tiny-image"));
    assert!(matches!(handles[0].state(), McpServerState::Running { .. }));
    // No process of flemma's own: the server is over HTTP.
    assert_eq!(handles[0].pid(), None);
    // The header went out with the variable's value, read when connecting.
    let header = server
        .wait_for(|line| line.starts_with("flemma-loopback: header x-flemma-home:"))
        .unwrap();
    assert_eq!(
        header,
        format!("flemma-loopback: header x-flemma-home: home={home}")
    );

    assert_eq!(
        call(&registry, "web.echo", json!({"message": "over http"})).await,
        ToolOutput::text("Echo: over http")
    );
    assert_eq!(
        call(&registry, "web.get-sum", json!({"a": 1, "b": 2}))
            .await
            .result_text(),
        "The sum of 1 and 2 is 3."
    );
    handles[0].shutdown().await;
}

#[tokio::test]
async fn a_header_naming_an_unset_variable_is_a_warning_naming_the_server() {
    let server = HttpServer::start();
    let toml = format!(
        "[mcp.servers.web]\nurl = \"{}\"\nheaders = {{ Authorization = \"Bearer ${{FLEMMA_MCP_TEST_UNSET_TOKEN}}\" }}\n",
        server.url()
    );
    let (registry, _) = registry_with(servers(&toml)).await;
    assert!(registry.names().is_empty());
    let warnings: Vec<String> = registry
        .take_warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        warnings,
        [
            "Async tool source failed: MCP server 'web': `headers.Authorization` names the environment variable FLEMMA_MCP_TEST_UNSET_TOKEN, which is not set"
        ]
    );
}

#[tokio::test]
async fn a_server_that_is_not_listening_is_a_warning_naming_it_and_the_rest_goes_on() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let toml = format!(
        "[mcp.servers.gone]\nurl = \"http://127.0.0.1:{port}/mcp\"\nstartup_timeout = 10\n\n[mcp.servers.everything]\ncommand = \"{}\"\nargs = [\"stdio\"]\nstartup_timeout = 30\n",
        everything_bin().display()
    );
    let started = std::time::Instant::now();
    let (registry, handles) = registry_with(servers(&toml)).await;
    // Refused at once, not after the start-up timeout.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(registry.contains("everything.echo"));
    let warnings = registry.take_warnings();
    let [RegistryWarning::SourceFailed { source, error }] = warnings.as_slice() else {
        panic!("one source failure expected: {warnings:?}");
    };
    assert_eq!(source, "gone");
    // rmcp's words follow; the server's name and its URL are what a user needs.
    assert!(
        error.starts_with("MCP server 'gone': the MCP handshake failed: "),
        "{error}"
    );
    assert!(
        error.contains(&format!("http://127.0.0.1:{port}/mcp")),
        "{error}"
    );
    let gone = handles.iter().find(|h| h.name() == "gone").unwrap();
    assert!(matches!(gone.state(), McpServerState::Failed(_)));
}

/// A server on 127.0.0.1 that answers every request with a redirect to `location`, until
/// dropped.
struct Redirector {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Redirector {
    fn to(location: String) -> Self {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok((mut stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let _ = write!(
                    stream,
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        Self { port, stop }
    }
}

impl Drop for Redirector {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Issue 34: a server's configured headers never follow a redirect to another origin (reqwest
/// strips `Authorization` across origins, not an `X-Api-Key`): the request stops at the
/// redirect, and the other origin sees nothing of them.
#[tokio::test]
async fn configured_headers_never_follow_a_redirect_to_another_origin() {
    let mut target = HttpServer::start();
    // `localhost` is another origin than `127.0.0.1`, the same server behind it.
    let redirector = Redirector::to(format!("http://localhost:{}/mcp", target.port));
    let toml = format!(
        "[mcp.servers.moved]\nurl = \"http://127.0.0.1:{}/mcp\"\nheaders = {{ X-Flemma-Key = \"canary-key-34\" }}\nstartup_timeout = 10\n",
        redirector.port
    );
    let (registry, handles) = registry_with(servers(&toml)).await;
    assert!(registry.names().is_empty());
    assert!(matches!(handles[0].state(), McpServerState::Failed(_)));
    // A request of the test's own after it: the target logs requests in order, so what it
    // logged before this one is all it got.
    {
        use std::io::Write as _;
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", target.port)).unwrap();
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flemma-Marker: after\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
    }
    let leaked = std::cell::Cell::new(false);
    let marker = target.wait_for(|line| {
        if line.contains("canary-key-34") {
            leaked.set(true);
        }
        line.contains("x-flemma-marker: after")
    });
    assert!(marker.is_some(), "the target never logged the marker");
    assert!(!leaked.get(), "the header followed the redirect");
}
