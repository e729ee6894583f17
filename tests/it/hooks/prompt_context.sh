#!/usr/bin/env bash
# A UserPromptSubmit hook: plain standard output is context for the model; a prompt that
# holds a secret is blocked (exit 2, the reason for the user).
prompt=$(jq -r '.prompt')
if [[ "$prompt" == *"password"* ]]; then
  echo "Prompts must not hold passwords." >&2
  exit 2
fi
echo "The repository is on branch main."
