"""A real MCP client (the Python SDK, `mcp` pinned in tests/mcp/requirements.txt) for the tests
of `flemma mcp serve`.

    serve_client.py stdio COMMAND [ARG...]   starts COMMAND and speaks MCP over its stdio
    serve_client.py http URL                 connects to a streamable HTTP endpoint

It reads the calls to make as JSON on stdin, `[{"name": ..., "arguments": {...}}, ...]`, and
prints one JSON report on stdout: the server's name, the tools it lists (name, annotations,
input schema) and each call's result (`isError` and its text content, or `protocolError`
with the JSON-RPC error's message), in order. The test
asserts on the report; this script checks nothing itself.
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


async def drive(read, write, calls):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        # The wire form (camelCase names), as the server sent it.
        tools = [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]
        results = []
        for call in calls:
            try:
                result = await session.call_tool(call["name"], call.get("arguments", {}))
            except MCPError as error:
                results.append({"protocolError": str(error)})
                continue
            wire = result.model_dump(by_alias=True, exclude_none=True)
            text = "".join(part.get("text", "") for part in wire.get("content", []))
            results.append({"isError": bool(wire.get("isError")), "text": text})
        info = init.model_dump(by_alias=True, exclude_none=True)
        return {"server": info["serverInfo"]["name"], "tools": tools, "results": results}


async def main():
    mode = sys.argv[1]
    calls = json.loads(sys.stdin.read() or "[]")
    if mode == "stdio":
        # The SDK's default environment for the server, and the OpenTelemetry variables the
        # test gives this client (the `otel` tests' collector).
        env = get_default_environment()
        env.update({k: v for k, v in os.environ.items() if k.startswith("OTEL_")})
        params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=env)
        async with stdio_client(params) as (read, write):
            report = await drive(read, write, calls)
    elif mode == "http":
        async with streamable_http_client(sys.argv[2]) as streams:
            report = await drive(streams[0], streams[1], calls)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
