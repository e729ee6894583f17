"""A process that reads its stdin (an MCP client's `initialize`) and never answers, for
flemma-mcp's tests: the client's `startup_timeout` has to end it."""

import sys

for _line in sys.stdin:
    pass
