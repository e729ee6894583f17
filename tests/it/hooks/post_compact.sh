#!/usr/bin/env bash
# A PostCompact hook: keeps what it was told beside the conversation.
input=$(cat)
printf '%s' "$input" > "$(jq -r '.cwd' <<<"$input")/post_compact.json"
