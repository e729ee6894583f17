#!/usr/bin/env python3
"""A Claude Code-style hook on Edit: refuse a new_string with the canary in it, and rewrite
"draft" to "final" (reads and answers .tool_input.old_string / new_string)."""
import json
import sys

event = json.load(sys.stdin)
if event.get("tool_name") != "Edit":
    sys.exit(0)
new = event.get("tool_input", {}).get("new_string")
if new is None:
    print("no new_string in the Edit input", file=sys.stderr)
    sys.exit(2)
if "CANARY" in new:
    decision = {"permissionDecision": "deny", "permissionDecisionReason": "the canary stays out"}
elif new == "draft":
    decision = {"permissionDecision": "allow", "updatedInput": {"new_string": "final"}}
else:
    sys.exit(0)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", **decision}}))
