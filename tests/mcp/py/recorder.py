"""An MCP server (stdio) that records the `notifications/cancelled` it receives, for
flemma-mcp's tests.

Usage: recorder.py RECORD_FILE. Each `notifications/cancelled` appends its params as one JSON
line to RECORD_FILE. Tools: `slow(seconds)` sleeps, reporting progress each second when asked
to (`progress=true`); `big(lines)` returns `lines` numbered lines.
"""

import json
import sys

import anyio
from mcp import types
from mcp.server.mcpserver import Context, MCPServer

record = sys.argv[1]
server = MCPServer("recorder")


@server.tool(structured_output=False)
async def slow(seconds: float, ctx: Context, progress: bool = False) -> str:
    """Sleeps `seconds` seconds (progress each second when `progress`)."""
    if progress:
        done = 0.0
        while done < seconds:
            step = min(1.0, seconds - done)
            await anyio.sleep(step)
            done += step
            await ctx.report_progress(done, seconds, f"{done:g} of {seconds:g}s")
    else:
        await anyio.sleep(seconds)
    return f"slept {seconds:g}s"


@server.tool(structured_output=False)
def big(lines: int) -> str:
    """Returns `lines` numbered lines."""
    return "\n".join(f"line {n}" for n in range(1, lines + 1))


async def on_cancelled(_ctx, params: types.CancelledNotificationParams) -> None:
    with open(record, "a", encoding="utf-8") as out:
        out.write(json.dumps(params.model_dump(mode="json", by_alias=True, exclude_none=True)) + "\n")


server._lowlevel_server.add_notification_handler(
    "notifications/cancelled", types.CancelledNotificationParams, on_cancelled
)

if __name__ == "__main__":
    server.run("stdio")
