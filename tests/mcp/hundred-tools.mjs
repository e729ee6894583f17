#!/usr/bin/env node
// A stdio MCP server with 100 tools (`tool_000` … `tool_099`, each with a small object
// schema, answering its `text` back), on the pinned @modelcontextprotocol/sdk: flemma-mcp's
// `mcp` bench measures the discovery of a server this size.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "hundred-tools", version: "1.0.0" });
for (let i = 0; i < 100; i++) {
  const name = `tool_${String(i).padStart(3, "0")}`;
  server.registerTool(
    name,
    {
      description: `Test tool number ${i}: answers its text back.`,
      inputSchema: {
        text: z.string().describe("What to answer"),
        times: z.number().int().min(1).max(10).optional().describe("How many times"),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ text, times }) => ({
      content: [{ type: "text", text: String(text).repeat(times ?? 1) }],
    }),
  );
}
await server.connect(new StdioServerTransport());
