#!/usr/bin/env bash
# A hook that never answers in time; its child must die with it.
sleep 30 &
echo $! > "${HOOK_LOG:-/dev/null}"
wait
