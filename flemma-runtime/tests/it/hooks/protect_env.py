#!/usr/bin/env python3
"""A Claude Code-style hook: refuse writes to .env files (reads .tool_input.file_path)."""
import json
import sys

event = json.load(sys.stdin)
path = event.get("tool_input", {}).get("file_path", "")
if path.endswith(".env"):
    print(json.dumps({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": f"{event['tool_name']} of {path} refused: secrets live there",
        }
    }))
    sys.exit(0)
sys.exit(0)
