"""An MCP server (stdio) whose tool list changes on cue, for flemma-mcp's tests.

Tools at start: `change`, `alpha`, `stable` ("Version 1"). Calling `change` removes `alpha`,
adds `beta`, gives `stable` the description "Version 2" (and turns its annotations from
`readOnlyHint: true` into `destructiveHint: true`), and sends
`notifications/tools/list_changed`. Calling it again changes back (and notifies again).
"""

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("changing")
changed = False


def alpha() -> str:
    """The tool that goes away."""
    return "alpha"


def beta() -> str:
    """The tool that arrives."""
    return "beta"


def stable_v1() -> str:
    return "stable 1"


def stable_v2() -> str:
    return "stable 2"


def first_list() -> None:
    server.add_tool(alpha, name="alpha", description="The tool that goes away.", structured_output=False)
    server.add_tool(
        stable_v1,
        name="stable",
        description="Version 1",
        annotations=ToolAnnotations(readOnlyHint=True),
        structured_output=False,
    )


def second_list() -> None:
    server.add_tool(beta, name="beta", description="The tool that arrives.", structured_output=False)
    server.add_tool(
        stable_v2,
        name="stable",
        description="Version 2",
        annotations=ToolAnnotations(destructiveHint=True),
        structured_output=False,
    )


@server.tool(structured_output=False)
async def change(ctx: Context) -> str:
    """Changes the tool list and tells the client."""
    global changed
    if changed:
        server.remove_tool("beta")
        server.remove_tool("stable")
        first_list()
    else:
        server.remove_tool("alpha")
        server.remove_tool("stable")
        second_list()
    changed = not changed
    await ctx.session.send_tool_list_changed()
    return "changed" if changed else "changed back"


first_list()

if __name__ == "__main__":
    server.run("stdio")
