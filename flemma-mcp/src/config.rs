//! [`McpServerConfig`]: one server of `[mcp.servers.NAME]`, typed, and its parser.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

/// How long a server may take to start and list its tools, unless configured.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one call may take, unless configured.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// How flemma reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A command started as a child process, speaking MCP on its stdin and stdout; its
    /// stderr goes to `tracing`, never to the transcript.
    Stdio {
        /// The program (looked up on `PATH` when it has no `/`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for the server, over the host's environment without its
        /// credentials (the policy `bash` gets: [`flemma_config::EnvPolicy`]'s default);
        /// values may name the host's variables as `${NAME}`, which is how a key reaches a
        /// server that needs one (`GITHUB_TOKEN = "${GITHUB_TOKEN}"`).
        env: BTreeMap<String, String>,
        /// The working directory; `None` keeps the host's.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint's URL (`http://127.0.0.1:3001/mcp`).
        url: String,
        /// Headers sent with every request; values may name environment variables as
        /// `${NAME}` (`Authorization = "Bearer ${GITHUB_TOKEN}"`), so keys stay out of the
        /// file. Resolved when the server is started.
        headers: BTreeMap<String, String>,
    },
}

/// One MCP server: `[mcp.servers.NAME]` of `flemma.toml`, or built in code.
///
/// ```
/// use flemma_mcp::McpServerConfig;
///
/// let server = McpServerConfig::stdio("everything", "mcp-server-everything")?
///     .with_args(["stdio"])
///     .with_include(["echo", "get-*"]);
/// assert_eq!(server.name(), "everything");
/// assert_eq!(server.tool_timeout, std::time::Duration::from_secs(120));
/// # Ok::<(), flemma_mcp::McpConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpServerConfig {
    name: String,
    /// How the server is reached.
    pub transport: McpTransport,
    /// `false` leaves the server out: it is not started and registers nothing.
    pub enabled: bool,
    /// Globs over the server's own tool names (`get-*`); when not empty, only tools matching
    /// one are registered.
    pub include: Vec<String>,
    /// Globs over the server's own tool names; matching tools are not registered (after
    /// `include`).
    pub exclude: Vec<String>,
    /// How long starting the server and listing its tools may take.
    pub startup_timeout: Duration,
    /// How long one call may take; the call is then cancelled (`notifications/cancelled`).
    pub tool_timeout: Duration,
    /// Whether the host trusts the server's annotations (`trusted = true` in its table):
    /// only then does a `readOnlyHint` let the read-only resolver approve its tools (the MCP
    /// specification: hints from untrusted servers are untrusted). Default `false`.
    pub trusted: bool,
}

impl McpServerConfig {
    /// A server with `transport` and the defaults: enabled, every tool, 10 s to start, 120 s
    /// per call.
    ///
    /// # Errors
    ///
    /// [`McpConfigError::InvalidName`] unless `name` is one tool-name segment
    /// (`[A-Za-z0-9_-]`, no `__`): it becomes the namespace of the server's tools.
    pub fn new(name: impl Into<String>, transport: McpTransport) -> Result<Self, McpConfigError> {
        let name = name.into();
        check_name(&name)?;
        Ok(Self {
            name,
            transport,
            enabled: true,
            include: Vec::new(),
            exclude: Vec::new(),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            trusted: false,
        })
    }

    /// Trusts the server's annotations (see [`trusted`](Self::trusted)).
    #[must_use]
    pub fn with_trusted(mut self, trusted: bool) -> Self {
        self.trusted = trusted;
        self
    }

    /// A stdio server running `command`.
    ///
    /// # Errors
    ///
    /// As [`McpServerConfig::new`].
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
    ) -> Result<Self, McpConfigError> {
        Self::new(
            name,
            McpTransport::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: BTreeMap::new(),
                cwd: None,
            },
        )
    }

    /// A streamable HTTP server at `url`.
    ///
    /// # Errors
    ///
    /// As [`McpServerConfig::new`].
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Result<Self, McpConfigError> {
        Self::new(
            name,
            McpTransport::Http {
                url: url.into(),
                headers: BTreeMap::new(),
            },
        )
    }

    /// The server's name: the namespace of its tools (`NAME.tool`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets a stdio server's arguments (ignored for HTTP).
    #[must_use]
    pub fn with_args<S: Into<String>>(mut self, new: impl IntoIterator<Item = S>) -> Self {
        if let McpTransport::Stdio { args, .. } = &mut self.transport {
            *args = new.into_iter().map(Into::into).collect();
        }
        self
    }

    /// Sets the include globs.
    #[must_use]
    pub fn with_include<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        self.include = globs.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the exclude globs.
    #[must_use]
    pub fn with_exclude<S: Into<String>>(mut self, globs: impl IntoIterator<Item = S>) -> Self {
        self.exclude = globs.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the start-up timeout.
    #[must_use]
    pub fn with_startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets the per-call timeout.
    #[must_use]
    pub fn with_tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }
}

/// A configuration the parser refuses, naming the server and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpConfigError {
    /// `[mcp]` or `[mcp.servers]` is not a table.
    #[error("`{path}` must be a table")]
    NotATable {
        /// `mcp` or `mcp.servers`.
        path: String,
    },
    /// A key of `[mcp]` other than `servers`.
    #[error("unknown key `mcp.{key}` (only `mcp.servers` is read)")]
    UnknownSection {
        /// The key.
        key: String,
    },
    /// A server name that cannot be a tool namespace.
    #[error("MCP server name {name:?} is not a tool-name segment ([A-Za-z0-9_-], no `__`)")]
    InvalidName {
        /// The name.
        name: String,
    },
    /// A server name that is flemma's own namespace (`flemma`): its tools would be named like
    /// the harness's (`flemma.jobs.status`), which `$standard` approves.
    #[error("MCP server name {name:?} is reserved: `flemma.*` names flemma's own tools")]
    ReservedName {
        /// The name.
        name: String,
    },
    /// A field the server table does not have.
    #[error("MCP server '{server}': unknown field `{field}`")]
    UnknownField {
        /// The server.
        server: String,
        /// The field.
        field: String,
    },
    /// A field of the wrong type or value.
    #[error("MCP server '{server}': `{field}` must be {expected}")]
    InvalidField {
        /// The server.
        server: String,
        /// The field.
        field: String,
        /// What it must be (`a string`, `a positive number of seconds`).
        expected: &'static str,
    },
    /// Neither `command` nor `url`, or both.
    #[error("MCP server '{server}': set either `command` (stdio) or `url` (streamable HTTP)")]
    Transport {
        /// The server.
        server: String,
    },
    /// A field of the other transport (`headers` on a stdio server).
    #[error("MCP server '{server}': `{field}` is for {transport} servers")]
    WrongTransport {
        /// The server.
        server: String,
        /// The field.
        field: String,
        /// `stdio` or `streamable HTTP`.
        transport: &'static str,
    },
}

fn check_name(name: &str) -> Result<(), McpConfigError> {
    let valid = !name.contains('.') && flemma_ids::ToolName::new(name).is_ok();
    if !valid {
        return Err(McpConfigError::InvalidName {
            name: name.to_owned(),
        });
    }
    if name.eq_ignore_ascii_case("flemma") {
        return Err(McpConfigError::ReservedName {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// The servers of an `[mcp]` section (as [`flemma_config::Config::section`] returns it), in
/// name order, disabled ones included.
///
/// ```toml
/// [mcp.servers.everything]
/// command = "npx"
/// args = ["-y", "@modelcontextprotocol/server-everything"]
/// exclude = ["trigger-*"]
///
/// [mcp.servers.github]
/// url = "https://api.example.com/mcp"
/// headers = { Authorization = "Bearer ${GITHUB_TOKEN}" }
/// tool_timeout = 30
/// ```
///
/// # Errors
///
/// [`McpConfigError`] for the first server or field that is wrong.
pub fn parse_servers(section: &Value) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let mcp = table(section, "mcp")?;
    if let Some(key) = mcp.keys().find(|k| *k != "servers") {
        return Err(McpConfigError::UnknownSection { key: key.clone() });
    }
    let Some(servers) = mcp.get("servers") else {
        return Ok(Vec::new());
    };
    let servers = table(servers, "mcp.servers")?;
    let mut parsed: Vec<McpServerConfig> = servers
        .iter()
        .map(|(name, value)| parse_server(name, value))
        .collect::<Result<_, _>>()?;
    parsed.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(parsed)
}

/// The servers of a [`flemma_config::Config`]'s `[mcp]` section (none without one).
///
/// # Errors
///
/// As [`parse_servers`].
pub fn servers_of(config: &flemma_config::Config) -> Result<Vec<McpServerConfig>, McpConfigError> {
    config.section("mcp").map_or(Ok(Vec::new()), parse_servers)
}

fn table<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, McpConfigError> {
    value.as_object().ok_or_else(|| McpConfigError::NotATable {
        path: path.to_owned(),
    })
}

/// The fields of one server table, read one by one so that each error names its field.
struct Fields<'a> {
    server: &'a str,
    table: &'a Map<String, Value>,
}

impl Fields<'_> {
    fn invalid(&self, field: &str, expected: &'static str) -> McpConfigError {
        McpConfigError::InvalidField {
            server: self.server.to_owned(),
            field: field.to_owned(),
            expected,
        }
    }

    fn string(&self, field: &str) -> Result<Option<String>, McpConfigError> {
        self.table
            .get(field)
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.invalid(field, "a string"))
            })
            .transpose()
    }

    fn strings(&self, field: &str) -> Result<Vec<String>, McpConfigError> {
        let Some(value) = self.table.get(field) else {
            return Ok(Vec::new());
        };
        let items = value
            .as_array()
            .ok_or_else(|| self.invalid(field, "a list of strings"))?;
        items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| self.invalid(field, "a list of strings"))
            })
            .collect()
    }

    fn string_map(&self, field: &str) -> Result<BTreeMap<String, String>, McpConfigError> {
        let Some(value) = self.table.get(field) else {
            return Ok(BTreeMap::new());
        };
        let expected = "a table of strings";
        let map = value
            .as_object()
            .ok_or_else(|| self.invalid(field, expected))?;
        map.iter()
            .map(|(k, v)| {
                v.as_str()
                    .map(|v| (k.clone(), v.to_owned()))
                    .ok_or_else(|| self.invalid(field, expected))
            })
            .collect()
    }

    fn seconds(&self, field: &str, default: Duration) -> Result<Duration, McpConfigError> {
        let Some(value) = self.table.get(field) else {
            return Ok(default);
        };
        let expected = "a positive number of seconds";
        value
            .as_f64()
            .filter(|s| s.is_finite() && *s > 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .ok_or_else(|| self.invalid(field, expected))
    }
}

/// The fields of a server table (one list, flemma-config's: it refuses the defining ones
/// outside the options files).
const FIELDS: &[&str] = flemma_config::MCP_SERVER_FIELDS;

fn parse_server(name: &str, value: &Value) -> Result<McpServerConfig, McpConfigError> {
    check_name(name)?;
    let table = value.as_object().ok_or_else(|| McpConfigError::NotATable {
        path: format!("mcp.servers.{name}"),
    })?;
    if let Some(field) = table.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(McpConfigError::UnknownField {
            server: name.to_owned(),
            field: field.clone(),
        });
    }
    let fields = Fields {
        server: name,
        table,
    };
    let transport = parse_transport(&fields)?;
    let enabled = match table.get("enabled") {
        None => true,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| fields.invalid("enabled", "true or false"))?,
    };
    let mut server = McpServerConfig::new(name, transport)?;
    server.enabled = enabled;
    server.include = fields.strings("include")?;
    server.exclude = fields.strings("exclude")?;
    server.startup_timeout = fields.seconds("startup_timeout", DEFAULT_STARTUP_TIMEOUT)?;
    server.tool_timeout = fields.seconds("tool_timeout", DEFAULT_TOOL_TIMEOUT)?;
    server.trusted = match table.get("trusted") {
        None => false,
        Some(v) => v
            .as_bool()
            .ok_or_else(|| fields.invalid("trusted", "true or false"))?,
    };
    Ok(server)
}

fn parse_transport(fields: &Fields<'_>) -> Result<McpTransport, McpConfigError> {
    let wrong = |field: &str, transport| McpConfigError::WrongTransport {
        server: fields.server.to_owned(),
        field: field.to_owned(),
        transport,
    };
    match (fields.string("command")?, fields.string("url")?) {
        (Some(command), None) => {
            if fields.table.contains_key("headers") {
                return Err(wrong("headers", "streamable HTTP"));
            }
            Ok(McpTransport::Stdio {
                command,
                args: fields.strings("args")?,
                env: fields.string_map("env")?,
                cwd: fields.string("cwd")?.map(PathBuf::from),
            })
        }
        (None, Some(url)) => {
            if let Some(field) = ["args", "env", "cwd"]
                .into_iter()
                .find(|f| fields.table.contains_key(*f))
            {
                return Err(wrong(field, "stdio"));
            }
            Ok(McpTransport::Http {
                url,
                headers: fields.string_map("headers")?,
            })
        }
        _ => Err(McpConfigError::Transport {
            server: fields.server.to_owned(),
        }),
    }
}
