#!/usr/bin/env python3
"""A Stop hook: keep the session going once (Claude Code's stop_hook_active guard)."""
import json
import sys

event = json.load(sys.stdin)
if event.get("stop_hook_active"):
    sys.exit(0)
print(json.dumps({"decision": "block", "reason": "Run the tests before you stop."}))
