//! The approval resolvers of MCP tools: the two reading a server's [`ToolHints`]
//! ([`McpReadOnlyResolver`], [`McpDestructiveResolver`]) and [`McpNarrowedResolver`], which
//! denies the tools a conversation's options take away.

use std::sync::Arc;

use async_trait::async_trait;
use flemma_approval::{
    ApprovalContext, ApprovalError, Chain, Resolver, ResolverError, ToolCall, Verdict,
};
use flemma_config::{GlobList, Layer, OpKind};
use flemma_ids::ToolName;

use crate::hints::ToolHints;
use crate::source::McpServerHandle;

/// Name of the resolver approving tools their server marks read-only.
pub const MCP_READ_ONLY_RESOLVER: &str = "urn:flemma:approval:mcp-read-only";
/// Priority of [`McpReadOnlyResolver`]: below the config resolver (100), above the sandbox
/// resolver (25).
pub const MCP_READ_ONLY_PRIORITY: i32 = 50;
/// Name of the resolver asking for approval of tools their server marks destructive.
pub const MCP_DESTRUCTIVE_RESOLVER: &str = "urn:flemma:approval:mcp-destructive";
/// Priority of [`McpDestructiveResolver`]: above the config resolver (100), so a glob in
/// `tools.auto_approve` cannot approve a destructive tool.
pub const MCP_DESTRUCTIVE_PRIORITY: i32 = 110;

/// Name of the resolver denying calls of tools the conversation's options take away.
pub const MCP_NARROWED_RESOLVER: &str = "urn:flemma:approval:mcp-narrowed";
/// Priority of [`McpNarrowedResolver`]: above every other built-in resolver, so that nothing
/// approves (or asks about) a tool the conversation cannot use.
pub const MCP_NARROWED_PRIORITY: i32 = 120;

/// The read-only built-ins: a conversation auto-approving each of them (as the presets
/// `$readonly` and `$standard` do) lets [`McpReadOnlyResolver`] approve read-only MCP tools.
pub const READ_ONLY_BUILTINS: [&str; 4] = ["read", "find", "grep", "ls"];

/// The servers both resolvers consult.
type Servers = Arc<[McpServerHandle]>;

/// The server that registered `tool`, and the tool's hints.
fn lookup<'s>(servers: &'s Servers, tool: &ToolName) -> Option<(&'s McpServerHandle, ToolHints)> {
    servers
        .iter()
        .find_map(|server| server.hints(tool).map(|hints| (server, hints)))
}

/// `urn:flemma:approval:mcp-read-only` (priority 50): approves a call of an MCP tool its
/// server marks read-only (`readOnlyHint: true`, and not `destructiveHint: true`) when the
/// host trusts the server (`trusted = true` in its table; a server's annotations are its own
/// claims, untrusted by default as the MCP specification says), when the
/// conversation auto-approves the read-only built-ins (`read`, `find`, `grep` and `ls` each
/// match the resolved `tools.auto_approve`, as with the presets `$readonly` and `$standard`,
/// the default) and its frontmatter neither removes the tool from `tools.auto_approve` nor
/// sets `tools.auto_approve` (as for the sandbox resolver). Passes otherwise, and
/// on tools not from its servers.
#[derive(Debug, Clone)]
pub struct McpReadOnlyResolver {
    servers: Servers,
}

impl McpReadOnlyResolver {
    /// A resolver looking tools up in `servers`.
    pub fn new(servers: impl Into<Arc<[McpServerHandle]>>) -> Self {
        Self {
            servers: servers.into(),
        }
    }
}

#[async_trait]
impl Resolver for McpReadOnlyResolver {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        let Some((server, hints)) = lookup(&self.servers, call.name) else {
            return Ok(Verdict::pass());
        };
        let trusted = server.is_trusted();
        let server = server.name();
        let pass = |why: String| Ok(Verdict::pass().because(why));
        if !trusted {
            return pass(format!(
                "MCP server '{server}' is not trusted: its annotations are its own claims ({}); `trusted = true` in [mcp.servers.{server}] lets readOnlyHint approve",
                hints.describe()
            ));
        }
        if !hints.is_read_only() {
            return pass(format!(
                "MCP server '{server}' does not mark the tool read-only ({})",
                hints.describe()
            ));
        }
        let list = GlobList::new(&ctx.options.tools.auto_approve);
        let missing: Vec<&str> = READ_ONLY_BUILTINS
            .into_iter()
            .filter(|builtin| !list.is_match(builtin))
            .collect();
        if !missing.is_empty() {
            return pass(format!(
                "the conversation does not auto-approve the read-only built-ins ({} not in tools.auto_approve)",
                missing.join(", ")
            ));
        }
        if ctx.config.layer_has_op(
            Layer::Frontmatter,
            OpKind::Remove,
            "tools.auto_approve",
            Some(call.name.as_str()),
        ) {
            return pass("the frontmatter removes the tool from tools.auto_approve".to_owned());
        }
        if ctx
            .config
            .layer_has_set(Layer::Frontmatter, "tools.auto_approve")
        {
            return pass("the frontmatter sets tools.auto_approve".to_owned());
        }
        Ok(Verdict::approve().because(format!(
            "MCP server '{server}' marks the tool read-only ({}) and the conversation auto-approves the read-only built-ins ($readonly)",
            hints.describe()
        )))
    }
}

/// `urn:flemma:approval:mcp-destructive` (priority 110, above the config resolver): asks for
/// approval of a call of an MCP tool its server marks destructive (`destructiveHint: true`,
/// and not `readOnlyHint: true`), unless the resolved `tools.auto_approve` holds the tool's
/// registered name itself as an entry (compared as a string: no glob, no preset), in which
/// case it passes and the config resolver approves. A glob such as `fs.*`,
/// `tools.require_approval = false`, an `auto_approve` function or the host's policy do not
/// approve such a tool. Passes on every other tool.
#[derive(Debug, Clone)]
pub struct McpDestructiveResolver {
    servers: Servers,
}

impl McpDestructiveResolver {
    /// A resolver looking tools up in `servers`.
    pub fn new(servers: impl Into<Arc<[McpServerHandle]>>) -> Self {
        Self {
            servers: servers.into(),
        }
    }
}

#[async_trait]
impl Resolver for McpDestructiveResolver {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        let Some((server, hints)) = lookup(&self.servers, call.name) else {
            return Ok(Verdict::pass());
        };
        let server = server.name();
        let name = call.name.as_str();
        if !hints.is_destructive() {
            return Ok(Verdict::pass().because(format!(
                "MCP server '{server}' does not mark the tool destructive ({})",
                hints.describe()
            )));
        }
        if ctx
            .options
            .tools
            .auto_approve
            .iter()
            .any(|entry| entry == name)
        {
            return Ok(Verdict::pass().because(format!(
                "MCP server '{server}' marks the tool destructive ({}), and tools.auto_approve names '{name}' exactly",
                hints.describe()
            )));
        }
        Ok(Verdict::require_approval().because(format!(
            "MCP server '{server}' marks the tool destructive ({}): only an auto_approve entry naming '{name}' exactly approves it",
            hints.describe()
        )))
    }
}

/// `urn:flemma:approval:mcp-narrowed` (priority 120, above every other built-in resolver):
/// denies a call of an MCP tool that the conversation's options take away
/// (`mcp.servers.<name>.enabled = false`, or its `include`/`exclude`, written in a
/// frontmatter or another layer above the options files; see
/// [`McpOptions::allows`](flemma_config::McpOptions::allows)), so that the call is answered
/// without asking anyone. Passes on every other call. (Without this resolver such a call is
/// still never run: the executor answers `Tool '<name>' is not available in this
/// conversation`.)
#[derive(Debug, Clone)]
pub struct McpNarrowedResolver {
    servers: Servers,
}

impl McpNarrowedResolver {
    /// A resolver looking tools up in `servers`.
    pub fn new(servers: impl Into<Arc<[McpServerHandle]>>) -> Self {
        Self {
            servers: servers.into(),
        }
    }
}

#[async_trait]
impl Resolver for McpNarrowedResolver {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        let Some((server, original)) = self
            .servers
            .iter()
            .find_map(|server| server.original(call.name).map(|o| (server.name(), o)))
        else {
            return Ok(Verdict::pass());
        };
        let mcp = &ctx.options.mcp;
        if mcp.allows(server, &original) {
            return Ok(Verdict::pass());
        }
        let why = if mcp.disables(server) {
            format!(
                "the conversation disables MCP server '{server}' (mcp.servers.{server}.enabled = false)"
            )
        } else {
            format!(
                "the conversation's mcp.servers.{server}.include/exclude leave out the server's tool '{original}'"
            )
        };
        Ok(Verdict::deny(Some(why.clone())).because(why))
    }
}

/// Registers [`McpReadOnlyResolver`] (`urn:flemma:approval:mcp-read-only`, priority 50) and
/// [`McpDestructiveResolver`] (`urn:flemma:approval:mcp-destructive`, priority 110), which
/// read the servers' hints, and [`McpNarrowedResolver`] (`urn:flemma:approval:mcp-narrowed`,
/// priority 120), which denies the tools a conversation takes away, for `servers` in
/// `chain`, replacing earlier registrations of those names.
///
/// # Errors
///
/// [`ApprovalError::InvalidName`] (not for these names; kept for [`Chain::register`]).
pub fn register_hint_resolvers(
    chain: &mut Chain,
    servers: &[McpServerHandle],
) -> Result<(), ApprovalError> {
    let servers: Servers = servers.into();
    chain.register(
        MCP_READ_ONLY_RESOLVER,
        MCP_READ_ONLY_PRIORITY,
        McpReadOnlyResolver {
            servers: Arc::clone(&servers),
        },
    )?;
    chain.register(
        MCP_DESTRUCTIVE_RESOLVER,
        MCP_DESTRUCTIVE_PRIORITY,
        McpDestructiveResolver {
            servers: Arc::clone(&servers),
        },
    )?;
    chain.register(
        MCP_NARROWED_RESOLVER,
        MCP_NARROWED_PRIORITY,
        McpNarrowedResolver { servers },
    )?;
    Ok(())
}
