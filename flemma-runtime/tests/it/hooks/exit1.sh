#!/usr/bin/env bash
echo "the hook broke" >&2
exit 1
