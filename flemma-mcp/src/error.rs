//! [`McpError`]: what goes wrong starting a server or listing its tools.

use std::sync::Arc;
use std::time::Duration;

/// Why a server did not start or list its tools. Each names the server; the registry reports
/// it as `Async tool source failed: <error>` and the other sources go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration is wrong.
    #[error(transparent)]
    Config(#[from] crate::McpConfigError),
    /// `env` or `headers` names an environment variable that is not set.
    #[error(
        "MCP server '{server}': `{field}` names the environment variable {variable}, which is not set"
    )]
    MissingEnv {
        /// The server.
        server: String,
        /// `env.KEY` or `headers.NAME`.
        field: String,
        /// The variable.
        variable: String,
    },
    /// A `${` without its closing `}`.
    #[error("MCP server '{server}': `{field}` has a `${{` without its `}}`")]
    BadReference {
        /// The server.
        server: String,
        /// `env.KEY` or `headers.NAME`.
        field: String,
    },
    /// A header name or value HTTP does not allow.
    #[error("MCP server '{server}': header `{header}` is not a valid HTTP header")]
    Header {
        /// The server.
        server: String,
        /// The header's name.
        header: String,
    },
    /// The HTTP client could not be built.
    #[error("MCP server '{server}': could not build the HTTP client")]
    HttpClient {
        /// The server.
        server: String,
        /// reqwest's error.
        #[source]
        source: Arc<reqwest::Error>,
    },
    /// The command could not be started.
    #[error("MCP server '{server}': could not start `{command}`")]
    Spawn {
        /// The server.
        server: String,
        /// The program.
        command: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The MCP handshake failed (the process exited, the URL did not answer MCP, …).
    #[error("MCP server '{server}': the MCP handshake failed")]
    Initialize {
        /// The server.
        server: String,
        /// rmcp's error.
        #[source]
        source: Box<rmcp::service::ClientInitializeError>,
    },
    /// `tools/list` failed.
    #[error("MCP server '{server}': listing its tools failed")]
    List {
        /// The server.
        server: String,
        /// rmcp's error.
        #[source]
        source: Box<rmcp::ServiceError>,
    },
    /// Starting and listing took longer than `startup_timeout`.
    #[error("MCP server '{server}': did not start and list its tools within {}s", timeout.as_secs_f64())]
    StartupTimeout {
        /// The server.
        server: String,
        /// The timeout.
        timeout: Duration,
    },
}
