#!/usr/bin/env bash
# Runs Bazel with the flags every script shares: a disk cache that survives
# fresh clones (CI builds in a new folder each time).
set -euo pipefail
exec bazel "$1" --disk_cache="${HOME}/.cache/trainrun-bazel" "${@:2}"
