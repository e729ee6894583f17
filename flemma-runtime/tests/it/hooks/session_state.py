#!/usr/bin/env python3
# A command hook written the way Claude Code's hook scripts keep state: one file per
# `session_id`, beside the transcript, with a line per event it saw.
import json
import os
import re
import sys

event = json.load(sys.stdin)
session = event["session_id"]
if not re.fullmatch(r"[A-Za-z0-9_-]+", session):
    print(f"unsafe session id {session!r}", file=sys.stderr)
    sys.exit(1)
state = os.path.join(os.path.dirname(event["transcript_path"]), "sessions")
os.makedirs(state, exist_ok=True)
with open(os.path.join(state, session + ".log"), "a", encoding="utf-8") as log:
    log.write(event["hook_event_name"] + " " + os.path.basename(event["transcript_path"]) + "\n")
