#!/usr/bin/env bash
# A PreCompact hook: a compaction whose instructions mention a secret is cancelled (exit 2,
# the reason for the user); otherwise plain standard output, which repeats what the hook was
# told, is added to the summary's instructions.
input=$(cat)
if [[ "$(jq -r '.custom_instructions' <<<"$input")" == *"secret"* ]]; then
  echo "Compactions must not mention secrets." >&2
  exit 2
fi
echo "Keep the file paths ($(jq -r '.trigger' <<<"$input"), $(jq -r '.messages' <<<"$input") messages)."
