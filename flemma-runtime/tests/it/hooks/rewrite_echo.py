#!/usr/bin/env python3
"""A PreToolUse hook answering with JSON: allow the call, with its command rewritten."""
import json
import sys

event = json.load(sys.stdin)
command = event["tool_input"].get("command", "")
if "echo hi" in command:
    print(json.dumps({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": "rewritten by the test hook",
            "updatedInput": {"command": command.replace("echo hi", "echo rewritten")},
        }
    }))
