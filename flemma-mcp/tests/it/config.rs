//! `[mcp.servers.NAME]` of flemma.toml, parsed: the fields, the defaults, and errors that
//! name the server and the field.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use flemma_config::Config;
use flemma_mcp::{McpConfigError, McpServerConfig, McpTransport, servers_of};
use pretty_assertions::assert_eq;

fn parse(toml: &str) -> Result<Vec<McpServerConfig>, McpConfigError> {
    let mut config = Config::new();
    config.load_toml_str(toml, "flemma.toml".as_ref()).unwrap();
    servers_of(&config)
}

#[test]
fn stdio_and_http_servers_with_every_field_and_the_defaults() {
    let servers = parse(
        r#"
[mcp.servers.fs]
command = "mcp-fs"
args = ["/srv"]
env = { LOG = "debug", TOKEN = "${FS_TOKEN}" }
cwd = "/srv"
include = ["read_*"]
exclude = ["read_secret"]
startup_timeout = 2.5
tool_timeout = 30

[mcp.servers.web]
url = "http://127.0.0.1:3001/mcp"
headers = { Authorization = "Bearer ${WEB_TOKEN}" }
enabled = false
"#,
    )
    .unwrap();
    let fs = &servers[0];
    assert_eq!(fs.name(), "fs");
    assert_eq!(
        fs.transport,
        McpTransport::Stdio {
            command: "mcp-fs".into(),
            args: vec!["/srv".into()],
            env: BTreeMap::from([
                ("LOG".into(), "debug".into()),
                ("TOKEN".into(), "${FS_TOKEN}".into())
            ]),
            cwd: Some(PathBuf::from("/srv")),
        }
    );
    assert_eq!(fs.include, ["read_*"]);
    assert_eq!(fs.exclude, ["read_secret"]);
    assert_eq!(fs.startup_timeout, Duration::from_millis(2500));
    assert_eq!(fs.tool_timeout, Duration::from_secs(30));
    assert!(fs.enabled);
    let web = &servers[1];
    assert_eq!(
        web.transport,
        McpTransport::Http {
            url: "http://127.0.0.1:3001/mcp".into(),
            headers: BTreeMap::from([("Authorization".into(), "Bearer ${WEB_TOKEN}".into())]),
        }
    );
    assert!(!web.enabled);
    assert_eq!(web.startup_timeout, Duration::from_secs(10));
    assert_eq!(web.tool_timeout, Duration::from_secs(120));
}

#[test]
fn no_section_is_no_server() {
    assert_eq!(parse("model = \"m\"\n").unwrap(), []);
}

#[test]
fn errors_name_the_server_and_the_field() {
    let cases = [
        (
            "[mcp.servers.fs]\ncomand = \"x\"\n",
            "MCP server 'fs': unknown field `comand`",
        ),
        (
            "[mcp.servers.fs]\ncommand = 3\n",
            "MCP server 'fs': `command` must be a string",
        ),
        (
            "[mcp.servers.fs]\ncommand = \"x\"\nargs = \"-v\"\n",
            "MCP server 'fs': `args` must be a list of strings",
        ),
        (
            "[mcp.servers.fs]\ncommand = \"x\"\ntool_timeout = 0\n",
            "MCP server 'fs': `tool_timeout` must be a positive number of seconds",
        ),
        (
            "[mcp.servers.fs]\ncommand = \"x\"\nenabled = \"yes\"\n",
            "MCP server 'fs': `enabled` must be true or false",
        ),
        (
            "[mcp.servers.fs]\nargs = []\n",
            "MCP server 'fs': set either `command` (stdio) or `url` (streamable HTTP)",
        ),
        (
            "[mcp.servers.fs]\ncommand = \"x\"\nurl = \"http://127.0.0.1:1\"\n",
            "MCP server 'fs': set either `command` (stdio) or `url` (streamable HTTP)",
        ),
        (
            "[mcp.servers.fs]\nurl = \"http://127.0.0.1:1\"\ncwd = \"/\"\n",
            "MCP server 'fs': `cwd` is for stdio servers",
        ),
        (
            "[mcp.servers.fs]\ncommand = \"x\"\nheaders = {}\n",
            "MCP server 'fs': `headers` is for streamable HTTP servers",
        ),
        (
            "[mcp.servers.\"my.fs\"]\ncommand = \"x\"\n",
            "MCP server name \"my.fs\" is not a tool-name segment ([A-Za-z0-9_-], no `__`)",
        ),
        (
            "[mcp.server.fs]\ncommand = \"x\"\n",
            "unknown key `mcp.server` (only `mcp.servers` is read)",
        ),
        ("[mcp]\nservers = 1\n", "`mcp.servers` must be a table"),
    ];
    for (toml, expected) in cases {
        assert_eq!(
            parse(toml).map_err(|e| e.to_string()),
            Err(expected.to_owned()),
            "{toml}"
        );
    }
}
