//! Starting a server: the child process or the HTTP transport, the MCP handshake, and the
//! `${NAME}` references of `env` and `headers`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{McpServerConfig, McpTransport};
use crate::error::McpError;
use crate::stdio::StdioTransport;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ServiceExt};

/// What a connection tells its server's source: the notifications flemma acts on.
pub(crate) trait Listener: Send + Sync + 'static {
    /// `notifications/progress` for a request of this connection.
    fn progress(&self, params: ProgressNotificationParam);
    /// `notifications/tools/list_changed`, on the connection `peer`.
    fn tools_changed(&self, peer: rmcp::service::Peer<RoleClient>);
    /// The answer to request `id` of this connection could not be decoded: the request gets
    /// an error answer (`PARSE_ERROR`), and this says why.
    fn undecodable(&self, id: rmcp::model::RequestId, cause: crate::undecodable::DecodeError);
}

/// The client side of one connection: says who flemma is, hands progress and list changes to
/// its [`Listener`], ignores what it does not use.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) listener: Arc<dyn Listener>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("flemma", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.listener.progress(params);
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.listener.tools_changed(context.peer);
    }
}

/// A running connection to a server.
pub(crate) type Client = RunningService<RoleClient, Handler>;

/// Starts `server` and completes the MCP handshake (no timeout: the caller puts one around);
/// `started` is told a stdio server's process id.
pub(crate) async fn connect(
    server: &McpServerConfig,
    handler: Handler,
    started: &(dyn Fn(u32) + Send + Sync),
) -> Result<Client, McpError> {
    let name = server.name();
    let initialize = |source| McpError::Initialize {
        server: name.to_owned(),
        source: Box::new(source),
    };
    match &server.transport {
        McpTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args);
            // The host's environment without its credentials, as for `bash`; the server's own
            // `env` (a key passed on by name) over it.
            cmd.env_clear();
            cmd.envs(flemma_config::EnvPolicy::default().apply_to_process());
            for (key, value) in env {
                cmd.env(key, expand(name, &format!("env.{key}"), value)?);
            }
            if let Some(cwd) = cwd {
                cmd.current_dir(cwd);
            }
            let listener = Arc::clone(&handler.listener);
            let (transport, stderr) =
                StdioTransport::spawn(name, cmd, listener).map_err(|source| McpError::Spawn {
                    server: name.to_owned(),
                    command: command.clone(),
                    source,
                })?;
            if let Some(pid) = transport.id() {
                started(pid);
            }
            if let Some(stderr) = stderr {
                tokio::spawn(crate::lines::trace_stderr(name.to_owned(), stderr));
            }
            handler.serve(transport).await.map_err(initialize)
        }
        McpTransport::Http { url, headers } => {
            let transport = http_transport(name, url, headers)?;
            handler.serve(transport).await.map_err(initialize)
        }
    }
}

fn http_transport(
    name: &str,
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if !headers.is_empty() && plain_http_off_loopback(url) {
        tracing::warn!(
            server = name,
            url,
            "the headers of MCP server '{name}' go over plain HTTP to a host that is not this machine: use https"
        );
    }
    for (key, value) in headers {
        let field = format!("headers.{key}");
        let invalid = || McpError::Header {
            server: name.to_owned(),
            header: key.clone(),
        };
        let header = http::HeaderName::try_from(key.as_str()).map_err(|_| invalid())?;
        let mut value =
            http::HeaderValue::try_from(expand(name, &field, value)?).map_err(|_| invalid())?;
        value.set_sensitive(true);
        config.custom_headers.insert(header, value);
    }
    Ok(StreamableHttpClientTransport::with_client(
        http_client(name)?,
        config,
    ))
}

/// Whether `url` is `http://` to a host other than this machine (`localhost`, 127.0.0.0/8,
/// `::1`).
fn plain_http_off_loopback(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    if url.scheme() != "http" {
        return false;
    }
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => !ip.is_loopback(),
        Err(_) => !host.eq_ignore_ascii_case("localhost"),
    }
}

/// reqwest with rustls on ring (installed as the process default unless another provider
/// was first), trusting the platform's certificate store (MCP servers are often internal).
/// It follows redirects within the server's origin only: a redirect to another origin would
/// take the configured headers (`X-Api-Key`, not only the `Authorization` reqwest strips) to
/// it, so the request stops there and fails.
fn http_client(name: &str) -> Result<reqwest::Client, McpError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(reqwest::Url::origin);
        if first != Some(attempt.url().origin()) {
            attempt.stop()
        } else if attempt.previous().len() >= 10 {
            attempt.error("too many redirects")
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .redirect(same_origin)
        .build()
        .map_err(|source| McpError::HttpClient {
            server: name.to_owned(),
            source: Arc::new(source),
        })
}

/// `value` with each `${NAME}` replaced by the environment variable `NAME`.
///
/// # Errors
///
/// [`McpError::MissingEnv`] for a variable that is not set; [`McpError::BadReference`] for a
/// `${` without its `}`.
pub(crate) fn expand(server: &str, field: &str, value: &str) -> Result<String, McpError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(McpError::BadReference {
                server: server.to_owned(),
                field: field.to_owned(),
            });
        };
        let variable = &after[..end];
        let resolved = std::env::var(variable).map_err(|_| McpError::MissingEnv {
            server: server.to_owned(),
            field: field.to_owned(),
            variable: variable.to_owned(),
        })?;
        out.push_str(&resolved);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_environment_variables() {
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(
            expand("s", "env.P", "x${PATH}y").ok(),
            Some(format!("x{path}y"))
        );
        assert_eq!(expand("s", "env.P", "plain").ok().as_deref(), Some("plain"));
        let missing = expand(
            "s",
            "headers.Authorization",
            "Bearer ${FLEMMA_MCP_NO_SUCH_VAR}",
        );
        assert_eq!(
            missing.map_err(|e| e.to_string()),
            Err("MCP server 's': `headers.Authorization` names the environment variable FLEMMA_MCP_NO_SUCH_VAR, which is not set".to_owned())
        );
        assert!(matches!(
            expand("s", "env.P", "${OPEN"),
            Err(McpError::BadReference { .. })
        ));
    }

    #[test]
    fn plain_http_to_another_host_is_found() {
        for (url, off) in [
            ("http://mcp.example.com/mcp", true),
            ("http://10.0.0.5:8080/mcp", true),
            ("http://127.0.0.1:3001/mcp", false),
            ("http://localhost/mcp", false),
            ("http://[::1]:80/mcp", false),
            ("https://mcp.example.com/mcp", false),
        ] {
            assert_eq!(plain_http_off_loopback(url), off, "{url}");
        }
    }
}
