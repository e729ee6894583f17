#!/usr/bin/env bash
# A PostToolUse hook: records what it saw, then adds a note for the model and a line to the
# result (flemma's appendToolOutput).
input=$(cat)
printf '%s\n' "$input" >> "${HOOK_LOG:-/dev/null}"
path=$(jq -r '.tool_input.file_path // .tool_input.path // empty' <<<"$input")
jq -n --arg p "$path" '{hookSpecificOutput: {hookEventName: "PostToolUse", additionalContext: ("lint clean: " + $p), appendToolOutput: "(checked)"}}'
