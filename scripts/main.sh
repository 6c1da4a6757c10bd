#!/usr/bin/env bash
# The main job: set up, build, and train a digits classifier with
# DistributedDataParallel on 2 worker processes started by the trainrun
# launcher: examples/train_digits.py, a Python script on the trainrun
# package (data from Debian's python3-sklearn).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# OpenBLAS misdetects this CPU and picks slow kernels; choose for it unless
# the caller already did.
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-SkylakeX}"
./scripts/bazel.sh build //launcher:trainrun //python:trainrun/_C.so
status=0
./bazel-bin/launcher/trainrun --nproc-per-node 2 examples/train_digits.py "$@" || status=$?
bazel shutdown >/dev/null 2>&1 || true
exit $status
