#!/usr/bin/env bash
# A PreToolUse hook the way Claude Code users write one: jq reads the command, exit 2 blocks
# with standard error as the reason.
command=$(jq -r '.tool_input.command // empty')
if [[ "$command" == *"rm -rf"* ]]; then
  echo "Blocked: recursive deletes are not allowed ($command)" >&2
  exit 2
fi
exit 0
