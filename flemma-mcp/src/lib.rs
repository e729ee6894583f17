//! MCP servers as tool sources of a flemma [`ToolRegistry`](flemma_tools::ToolRegistry).
